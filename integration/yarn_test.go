package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/testenv"
)

// TestYARNRecipe runs examples/README.md's YARN recipe on a real one-node
// YARN (yarn_cluster_test.go): the loans job in client mode with
// loanlib.py shipped as a --py-files zip, under `sparkdap submit`. One
// cluster serves every form. Each must stop in the zipped module, a UDF
// and a driver lambda with the developer's path and line, the YARN
// container id as the task label and the task's real values, and end with
// the result of a plain YARN run.
func TestYARNRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping YARN in -short mode")
	}
	py := python(t)
	sparkHome, sparkSubmit := requireStandalone(t, py)
	ctx := testContext(t, 15*time.Minute)
	start := time.Now()
	y := startYARN(t, ctx)
	t.Logf("YARN up in %s", time.Since(start).Round(time.Second))

	// The site's Spark configuration, as a YARN cluster's spark-defaults
	// would hold it, so that the recipe's command lines stay as printed:
	// Spark's jars from the local disk (nothing large is uploaded), the
	// staging directory under the cluster's, one small executor.
	confDir := filepath.Join(y.Dir, "spark-conf")
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
	// The pip-installed pyspark has no python/lib/pyspark.zip for Spark to
	// ship; the containers run on this machine, where pyspark is installed.
	env := []string{"HADOOP_CONF_DIR=" + y.ConfDir, "YARN_CONF_DIR=" + y.ConfDir, "SPARK_CONF_DIR=" + confDir,
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py,
		"PYSPARK_ARCHIVES_PATH=local:" + filepath.Dir(sparkHome)}

	l := newLoansLayout(t)
	zipFiles(t, filepath.Join(l.ship, "loanlib.zip"), l.shipLib)
	if err := os.Remove(l.shipLib); err != nil { // the job gets loanlib only from the zip
		t.Fatal(err)
	}

	plainOut := filepath.Join(t.TempDir(), "plain.json")
	plain := startSpark(t, ctx, l.ship, env, sparkSubmit, "--master", "yarn", "--deploy-mode", "client",
		"--py-files", "loanlib.zip", "loans.py", "--output", plainOut)
	plain.wait(t, ctx)
	t.Logf("plain YARN run: %s", plain.elapsed.Round(time.Second))
	want := readJSON(t, plainOut)

	t.Run("submit", func(t *testing.T) {
		p := startProxy(t, ctx, "--root", l.src)
		ide := yarnAttach(t, ctx, p, l)
		out := filepath.Join(t.TempDir(), "debugged.json")
		// The recipe: sparkdap submit --partitions 0 -- --master yarn --deploy-mode client --py-files loanlib.zip loans.py
		job := startSpark(t, ctx, l.ship, append(env, "SPARKDAP_TOKEN="+p.Token), sparkdapBinary(t),
			"submit", "--proxy", p.Executors, "--partitions", "0", "--",
			"--master", "yarn", "--deploy-mode", "client", "--py-files", "loanlib.zip", "loans.py", "--output", out)
		yarnStops(t, ctx, ide, job, l, y)
		job.wait(t, ctx)
		t.Logf("debugged YARN run: %s", job.elapsed.Round(time.Second))
		if g, w := fmt.Sprint(readJSON(t, out)), fmt.Sprint(want); g != w {
			t.Errorf("result under sparkdap differs from the plain YARN run:\n got %s\nwant %s", g, w)
		}
	})
	t.Logf("TestYARNRecipe total: %s", time.Since(start).Round(time.Second))
}

// yarnWant is each of the recipe's stops: the zipped module, a UDF, a
// driver lambda, as the developer's path and line.
func yarnWant(t *testing.T, l loansLayout) map[string][2]any {
	t.Helper()
	return map[string][2]any{
		"loanlib-payment":  {l.srcLib, testenv.MarkedLine(t, l.srcLib, "loanlib-payment")},
		"udf-body":         {l.srcMain, testenv.MarkedLine(t, l.srcMain, "udf-body")},
		"mapvalues-lambda": {l.srcMain, testenv.MarkedLine(t, l.srcMain, "mapvalues-lambda")},
	}
}

// yarnAttach attaches an IDE to the proxy with the recipe's breakpoints set.
func yarnAttach(t *testing.T, ctx context.Context, p *proxy, l loansLayout) *dapclient.Client {
	t.Helper()
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	armed := map[string][]int{}
	for _, w := range yarnWant(t, l) {
		armed[w[0].(string)] = append(armed[w[0].(string)], w[1].(int))
	}
	err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			for path, lines := range armed {
				if _, err := ide.SetBreakpoints(ctx, path, lines...); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return ide
}

// containerRE is a YARN container id in a task label.
var containerRE = regexp.MustCompile(`^\[exec (container_\d+_\d+_\d+_\d+) · .+ · pid \d+ · stage \d+ · partition 0 · attempt 0\]`)

// yarnStops waits for each breakpoint to stop once, checks what the IDE
// shows there, disarms it and continues.
func yarnStops(t *testing.T, ctx context.Context, ide *dapclient.Client, job *sparkRun, l loansLayout, y *yarnCluster) {
	t.Helper()
	want := yarnWant(t, l)
	armed := map[string][]int{}
	for _, w := range want {
		armed[w[0].(string)] = append(armed[w[0].(string)], w[1].(int))
	}
	seen := map[string]sparkStop{}
	for len(seen) < len(want) {
		s := nextStop(t, ctx, ide, job)
		name := ""
		for n, w := range want {
			if w[0].(string) == s.path && w[1].(int) == s.line {
				name = n
			}
		}
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), none of the breakpoints at the developer's paths", s.path, s.line, s.function)
		}
		if _, dup := seen[name]; dup {
			t.Fatalf("stopped at %s twice", name)
		}
		seen[name] = s
		t.Logf("%s: %s at %s:%d locals %v", name, s.thread, s.path, s.line, s.locals)
		var keep []int
		for _, line := range armed[s.path] {
			if line != s.line {
				keep = append(keep, line)
			}
		}
		armed[s.path] = keep
		if _, err := ide.SetBreakpoints(ctx, s.path, keep...); err != nil {
			t.Fatal(err)
		}
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range seen {
		m := containerRE.FindStringSubmatch(s.thread)
		if m == nil {
			t.Errorf("%s: thread %q lacks a YARN container id as its task label", name, s.thread)
			continue
		}
		// The container is one the NodeManager ran.
		if dirs, _ := filepath.Glob(filepath.Join(y.Dir, "nm-logs", "application_*", m[1])); len(dirs) == 0 {
			t.Errorf("%s: label names %s, which the NodeManager has no log directory for", name, m[1])
		}
	}
	principal := func(name, v string) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 10000 || int(f-10000)%2500 != 0 {
			t.Errorf("%s: principal = %q, not a principal of the portfolio (10000 + k·2500)", name, v)
		}
	}
	principal("loanlib-payment", seen["loanlib-payment"].locals["principal"])
	principal("udf-body", seen["udf-body"].locals["principal"])
	if n, years := seen["loanlib-payment"].locals["n"], seen["loanlib-payment"].locals["years"]; n == "" || years == "" {
		t.Errorf("loanlib-payment locals %v lack n and years", seen["loanlib-payment"].locals)
	} else if ni, _ := strconv.Atoi(n); fmt.Sprint(ni/12) != years {
		t.Errorf("loanlib-payment: n = %s but years = %s", n, years)
	}
	if seen["mapvalues-lambda"].locals["loan"] == "" {
		t.Errorf("mapvalues-lambda locals %v lack the loan", seen["mapvalues-lambda"].locals)
	}
}
