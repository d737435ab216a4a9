package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/testenv"
)

// yarnCluster is a one-node YARN (a ResourceManager and a NodeManager, each
// its own JVM) on loopback, from the Maven Central jars scripts/setup puts
// in .cache/yarn/jars. Every address is 127.0.0.1 on a free port, every
// directory under the package's temp dir, and fs.defaultFS is the local
// file system, so no HDFS runs. One runs per package run (sharedYARN);
// after start-up its fields are only read.
type yarnCluster struct {
	ConfDir string // HADOOP_CONF_DIR for spark-submit
	Dir     string // everything the cluster writes
	rm, nm  *standaloneProc
}

// yarnJars is the directory of the cluster's jars: $SPARKDAP_YARN_JARS, or
// the one scripts/setup fills.
func yarnJars(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SPARKDAP_YARN_JARS")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join("..", ".cache", "yarn", "jars"))
		if err != nil {
			t.Fatal(err)
		}
		dir = abs
	}
	for _, jar := range []string{"hadoop-yarn-server-resourcemanager-", "hadoop-yarn-server-nodemanager-",
		"hadoop-yarn-server-timelineservice-", "hadoop-common-", "hadoop-hdfs-client-"} {
		if m, _ := filepath.Glob(filepath.Join(dir, jar+"*.jar")); len(m) == 0 {
			testenv.Missing(t, "needs the Hadoop YARN jars in %s (scripts/setup fetches them; no %s*.jar)", dir, jar)
			return ""
		}
	}
	return dir
}

// yarnJavaOpts opens what Hadoop's daemons reach into on Java 17.
var yarnJavaOpts = []string{
	"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-Djava.net.preferIPv4Stack=true",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/sun.security.action=ALL-UNNAMED",
}

// yarnShared is the package's one YARN: the first test that needs it
// starts it (a minute or more of JVM start-up), every YARN test after that
// reuses it, and TestMain stops it after the last test.
var yarnShared struct {
	once sync.Once
	c    *yarnCluster
	err  error
}

// sharedYARN returns the package's YARN, starting it on first use. On the
// test's failure the daemons' output is logged.
func sharedYARN(t testing.TB) *yarnCluster {
	t.Helper()
	jars := yarnJars(t)
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Missing(t, "needs Java 17 for YARN: %v", err)
		return nil
	}
	yarnShared.once.Do(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		yarnShared.c, yarnShared.err = startYARN(ctx, jars, java)
		t.Logf("YARN up in %s", time.Since(start).Round(time.Second))
	})
	if yarnShared.err != nil {
		t.Fatalf("starting the package's YARN: %v", yarnShared.err)
	}
	c := yarnShared.c
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*standaloneProc{c.rm, c.nm} {
				t.Logf("%s output (last 6 KiB):\n%s", p.name, tail(p.out.String(), 6<<10))
			}
		}
	})
	return c
}

// startYARN starts the cluster in a directory of the package's temp dir
// and waits until the NodeManager has registered; atPackageEnd stops both
// daemons (and the containers, which are in the NodeManager's process
// group).
func startYARN(ctx context.Context, jars, java string) (*yarnCluster, error) {
	javaHome := os.Getenv("JAVA_HOME")
	if javaHome == "" {
		if real, err := filepath.EvalSymlinks(java); err == nil {
			javaHome = filepath.Dir(filepath.Dir(real))
		}
	}
	dir, err := os.MkdirTemp(binDir, "yarn-")
	if err != nil {
		return nil, err
	}
	c := &yarnCluster{Dir: dir, ConfDir: filepath.Join(dir, "conf")}
	var portErr error
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			portErr = err
			return ""
		}
		defer l.Close()
		return l.Addr().String()
	}
	site := map[string]map[string]string{
		"core-site.xml": {
			"fs.defaultFS":   "file:///",
			"hadoop.tmp.dir": filepath.Join(dir, "tmp"),
		},
		"yarn-site.xml": {
			"yarn.resourcemanager.hostname":                    "127.0.0.1",
			"yarn.resourcemanager.bind-host":                   "127.0.0.1",
			"yarn.resourcemanager.address":                     port(),
			"yarn.resourcemanager.scheduler.address":           port(),
			"yarn.resourcemanager.resource-tracker.address":    port(),
			"yarn.resourcemanager.admin.address":               port(),
			"yarn.resourcemanager.webapp.address":              port(),
			"yarn.nodemanager.hostname":                        "127.0.0.1",
			"yarn.nodemanager.bind-host":                       "127.0.0.1",
			"yarn.nodemanager.address":                         port(),
			"yarn.nodemanager.localizer.address":               port(),
			"yarn.nodemanager.webapp.address":                  port(),
			"yarn.nodemanager.collector-service.address":       port(),
			"yarn.nodemanager.amrmproxy.address":               port(),
			"yarn.nodemanager.local-dirs":                      filepath.Join(dir, "nm-local"),
			"yarn.nodemanager.log-dirs":                        filepath.Join(dir, "nm-logs"),
			"yarn.nodemanager.container-executor.class":        "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
			"yarn.nodemanager.resource.memory-mb":              "4096",
			"yarn.nodemanager.resource.cpu-vcores":             "4",
			"yarn.nodemanager.vmem-check-enabled":              "false",
			"yarn.nodemanager.pmem-check-enabled":              "false",
			"yarn.nodemanager.disk-health-checker.enable":      "false",
			"yarn.nodemanager.recovery.enabled":                "false",
			"yarn.nodemanager.delete.debug-delay-sec":          "0",
			"yarn.scheduler.minimum-allocation-mb":             "256",
			"yarn.timeline-service.enabled":                    "false",
			"yarn.log-aggregation-enable":                      "false",
			"yarn.resourcemanager.nodemanager-connect-retries": "3",
		},
		// Spark's AM must fit beside the executors in one small node.
		"capacity-scheduler.xml": {
			"yarn.scheduler.capacity.root.queues":                   "default",
			"yarn.scheduler.capacity.root.default.capacity":         "100",
			"yarn.scheduler.capacity.root.default.maximum-capacity": "100",
			"yarn.scheduler.capacity.maximum-am-resource-percent":   "1.0",
		},
	}
	if portErr != nil {
		return nil, portErr
	}
	if err := os.MkdirAll(c.ConfDir, 0o755); err != nil {
		return nil, err
	}
	for name, props := range site {
		var b strings.Builder
		b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
		for k, v := range props {
			fmt.Fprintf(&b, "  <property><name>%s</name><value>%s</value></property>\n", k, v)
		}
		b.WriteString("</configuration>\n")
		if err := os.WriteFile(filepath.Join(c.ConfDir, name), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	log4j := "log4j.rootLogger=INFO,console\nlog4j.appender.console=org.apache.log4j.ConsoleAppender\n" +
		"log4j.appender.console.target=System.err\nlog4j.appender.console.layout=org.apache.log4j.PatternLayout\n" +
		"log4j.appender.console.layout.ConversionPattern=%d{HH:mm:ss} %p %c{1}: %m%n\n"
	if err := os.WriteFile(filepath.Join(c.ConfDir, "log4j.properties"), []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	env := []string{"HADOOP_CONF_DIR=" + c.ConfDir, "JAVA_HOME=" + javaHome, "HADOOP_HOME=" + dir}
	cp := c.ConfDir + string(os.PathListSeparator) + filepath.Join(jars, "*")
	daemon := func(name, class, ready string) (*standaloneProc, error) {
		args := append(append([]string{}, yarnJavaOpts...), "-Dhadoop.log.dir="+filepath.Join(dir, "logs"),
			"-Dyarn.log.dir="+filepath.Join(dir, "logs"), "-cp", cp, class)
		p, err := spawnProc(dir, env, name, java, args...)
		if err != nil {
			return nil, err
		}
		atPackageEnd(func() {
			if err := p.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "integration:", err)
			}
		})
		if err := p.waitOutput(ctx, ready, 3*time.Minute); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, tail(p.out.String(), 6<<10))
		}
		return p, nil
	}
	if c.rm, err = daemon("ResourceManager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager",
		"Transitioned to active state"); err != nil {
		return nil, err
	}
	if c.nm, err = daemon("NodeManager", "org.apache.hadoop.yarn.server.nodemanager.NodeManager",
		"Registered with ResourceManager"); err != nil {
		return nil, err
	}
	return c, nil
}

// smallSparkConf writes a SPARK_CONF_DIR for jobs on y and returns it:
// Spark's jars from sparkHome on the local disk, staging under the
// cluster's directory, the driver on loopback, and one small executor, so
// that every job asks YARN for the same containers.
func (y *yarnCluster) smallSparkConf(t testing.TB, sparkHome string) string {
	t.Helper()
	confDir := filepath.Join(t.TempDir(), "spark-conf")
	defaults := strings.Join([]string{
		"spark.yarn.jars local:" + filepath.Join(sparkHome, "jars", "*"),
		"spark.yarn.stagingDir file://" + filepath.Join(y.Dir, "staging"),
		"spark.driver.host 127.0.0.1",
		"spark.driver.bindAddress 127.0.0.1",
		"spark.ui.enabled false",
		"spark.executor.instances 1",
		"spark.executor.cores 1",
		"spark.executor.memory 512m",
		"spark.yarn.am.memory 512m",
	}, "\n") + "\n"
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "spark-defaults.conf"), []byte(defaults), 0o644); err != nil {
		t.Fatal(err)
	}
	return confDir
}
