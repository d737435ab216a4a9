//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/sshdtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
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

// nodeDisk is where a cluster's NodeManager keeps its local and log
// directories. The zero value is the cluster's directory on the machine's
// disk. With fillPercent set, the NodeManager runs in a mount namespace of
// its own on a tmpfs of sizeMiB that is that full before it starts, which
// is what a shared CI machine's disk can look like.
type nodeDisk struct {
	sizeMiB, fillPercent int
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
		yarnShared.c, yarnShared.err = startYARN(ctx, jars, java, nodeDisk{})
		if yarnShared.c != nil {
			atPackageEnd(yarnShared.c.stop)
		}
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
// and waits until the NodeManager has registered. The caller stops it; on
// an error, startYARN stops what it started.
func startYARN(ctx context.Context, jars, java string, disk nodeDisk) (_ *yarnCluster, err error) {
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
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	nmDirs := dir
	if disk.fillPercent > 0 {
		nmDirs = filepath.Join(dir, "nm-disk")
		if err := os.MkdirAll(nmDirs, 0o755); err != nil {
			return nil, err
		}
	}
	// Ten daemon ports, all distinct: a NodeManager given one port twice
	// exits with a BindException.
	free, err := sshdtest.FreePorts("127.0.0.1", 10)
	if err != nil {
		return nil, err
	}
	port := func() string {
		p := free[0]
		free = free[1:]
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	site := map[string]map[string]string{
		"core-site.xml": {
			"fs.defaultFS":   "file:///",
			"hadoop.tmp.dir": filepath.Join(dir, "tmp"),
		},
		"yarn-site.xml": {
			"yarn.resourcemanager.hostname":                 "127.0.0.1",
			"yarn.resourcemanager.bind-host":                "127.0.0.1",
			"yarn.resourcemanager.address":                  port(),
			"yarn.resourcemanager.scheduler.address":        port(),
			"yarn.resourcemanager.resource-tracker.address": port(),
			"yarn.resourcemanager.admin.address":            port(),
			"yarn.resourcemanager.webapp.address":           port(),
			"yarn.nodemanager.hostname":                     "127.0.0.1",
			"yarn.nodemanager.bind-host":                    "127.0.0.1",
			"yarn.nodemanager.address":                      port(),
			"yarn.nodemanager.localizer.address":            port(),
			"yarn.nodemanager.webapp.address":               port(),
			"yarn.nodemanager.collector-service.address":    port(),
			"yarn.nodemanager.amrmproxy.address":            port(),
			"yarn.nodemanager.local-dirs":                   filepath.Join(nmDirs, "nm-local"),
			"yarn.nodemanager.log-dirs":                     filepath.Join(nmDirs, "nm-logs"),
			"yarn.nodemanager.container-executor.class":     "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
			"yarn.nodemanager.resource.memory-mb":           "4096",
			"yarn.nodemanager.resource.cpu-vcores":          "4",
			"yarn.nodemanager.vmem-check-enabled":           "false",
			"yarn.nodemanager.pmem-check-enabled":           "false",
			"yarn.nodemanager.disk-health-checker.enable":   "false",
			// The checker being off does not stop the NodeManager from
			// dropping a directory on a disk over 90 % full, and with none
			// left every container fails to localize ("No space available
			// in any of the local directories"). Only a full disk counts.
			"yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100",
			"yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb":               "0",
			"yarn.nodemanager.recovery.enabled":                                             "false",
			"yarn.nodemanager.delete.debug-delay-sec":                                       "0",
			"yarn.scheduler.minimum-allocation-mb":                                          "256",
			"yarn.timeline-service.enabled":                                                 "false",
			"yarn.log-aggregation-enable":                                                   "false",
			"yarn.resourcemanager.nodemanager-connect-retries":                              "3",
		},
		// Spark's AM must fit beside the executors in one small node.
		"capacity-scheduler.xml": {
			"yarn.scheduler.capacity.root.queues":                   "default",
			"yarn.scheduler.capacity.root.default.capacity":         "100",
			"yarn.scheduler.capacity.root.default.maximum-capacity": "100",
			"yarn.scheduler.capacity.maximum-am-resource-percent":   "1.0",
		},
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
	daemon := func(slot **standaloneProc, name, class, ready string, wrap []string) error {
		args := append(append([]string{}, yarnJavaOpts...), "-Dhadoop.log.dir="+filepath.Join(dir, "logs"),
			"-Dyarn.log.dir="+filepath.Join(dir, "logs"), "-cp", cp, class)
		bin := java
		if len(wrap) > 0 {
			bin, args = wrap[0], append(append(append([]string{}, wrap[1:]...), java), args...)
		}
		p, err := spawnProc(dir, env, name, bin, args...)
		if err != nil {
			return err
		}
		*slot = p
		if err := p.waitOutput(ctx, ready, 3*time.Minute); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(p.out.String(), 6<<10))
		}
		return nil
	}
	if err := daemon(&c.rm, "ResourceManager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager",
		"Transitioned to active state", nil); err != nil {
		return nil, err
	}
	var nmWrap []string
	if disk.fillPercent > 0 {
		// The tmpfs lives in the NodeManager's own mount namespace, so it
		// goes away with the process and never shows on the machine.
		fill := disk.sizeMiB * disk.fillPercent / 100
		nmWrap = []string{"unshare", "--mount", "--propagation", "private", "sh", "-ec",
			`mount -t tmpfs -o size="$1"m tmpfs "$2"; head -c "$3"M /dev/zero > "$2/fill"; shift 3; exec "$@"`,
			"sh", strconv.Itoa(disk.sizeMiB), nmDirs, strconv.Itoa(fill)}
	}
	if err := daemon(&c.nm, "NodeManager", "org.apache.hadoop.yarn.server.nodemanager.NodeManager",
		"Registered with ResourceManager", nmWrap); err != nil {
		return nil, err
	}
	return c, nil
}

// stop stops both daemons, and the containers, which are in the
// NodeManager's process group.
func (c *yarnCluster) stop() {
	for _, p := range []*standaloneProc{c.nm, c.rm} {
		if p == nil {
			continue
		}
		if err := p.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
		}
	}
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

// TestYARNRunsOnANearlyFullDisk starts a second one-node YARN whose
// NodeManager keeps its directories on a disk 93 % full, as a shared CI
// machine's disk can be, and runs a plain Spark job on it. A NodeManager
// that drops such directories fails every container ("No space available
// in any of the local directories"), and the YARN tests would fail on the
// machine, not on sparkdap.
func TestYARNRunsOnANearlyFullDisk(t *testing.T) {
	testenv.SkipIfShort(t, "starts a second YARN and a Spark job on it")
	py := python(t)
	sparkHome, sparkSubmit := requireStandalone(t, py)
	jars := yarnJars(t)
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Missing(t, "needs Java 17 for YARN: %v", err)
		return
	}
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		testenv.Missing(t, "needs unshare --mount for the NodeManager's tmpfs: %v %s", err, out)
		return
	}
	ctx := testContext(t, 5*time.Minute)
	y, err := startYARN(ctx, jars, java, nodeDisk{sizeMiB: 256, fillPercent: 93})
	if err != nil {
		t.Fatalf("starting YARN with the NodeManager on a disk 93 %% full: %v", err)
	}
	t.Cleanup(y.stop)
	dir := t.TempDir()
	job, out := filepath.Join(dir, "four_partitions.py"), filepath.Join(dir, "out.json")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	env := []string{"HADOOP_CONF_DIR=" + y.ConfDir, "YARN_CONF_DIR=" + y.ConfDir, "SPARK_CONF_DIR=" + y.smallSparkConf(t, sparkHome),
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_ARCHIVES_PATH=local:" + yarnPySparkOnly(t, py),
		"PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py}
	r := startSpark(t, ctx, dir, env, sparkSubmit, "--master", "yarn", "--deploy-mode", "client", job, out)
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540", got)
	}
	if t.Failed() {
		t.Logf("NodeManager output (last 6 KiB):\n%s", tail(y.nm.out.String(), 6<<10))
	}
}
