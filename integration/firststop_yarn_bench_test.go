//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// BenchmarkFirstStopYARN is BenchmarkFirstStop on the package's one-node
// YARN (sharedYARN): firststop_job.py in client deploy mode, plainly with
// spark-submit and through `sparkdap submit` with serve beside the job, as
// TestYARNRecipe's "submit" form runs it. Both sides' executors run this
// machine's Python, which has debugpy, so the debugged side measures
// sparkdap and not the unpacking of a shipped debugger.
//
//	SPARKDAP_BENCH_FIRSTSTOP_ROUNDS=3 go test ./integration -run '^$' -bench FirstStopYARN -benchtime 1x -v -timeout 40m
//
// SPARKDAP_BENCH_FIRSTSTOP_KEEP=dir (a new one) keeps what tells where the time went
// (the cluster and the package's temp dir go at the end of the run):
// serve's log, each run's output and submit time, and the NodeManager's
// container logs, the executors' stderr among them.
func BenchmarkFirstStopYARN(b *testing.B) {
	testenv.SkipIfShort(b, "starts YARN and Spark jobs on it")
	py := python(b)
	sparkHome, sparkSubmit := requireStandalone(b, py)
	ctx := testContext(b, 35*time.Minute)
	y := sharedYARN(b)
	script := firstStopScript(b)
	line := firstStopLine(b, script)

	// The site's Spark configuration, as in TestYARNRecipe: Spark's jars
	// from the local disk, staging under the cluster's directory, one
	// small executor, so that every round asks YARN for the same
	// containers.
	confDir := y.smallSparkConf(b, sparkHome)
	env := []string{"HADOOP_CONF_DIR=" + y.ConfDir, "YARN_CONF_DIR=" + y.ConfDir, "SPARK_CONF_DIR=" + confDir,
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_ARCHIVES_PATH=local:" + yarnPySparkOnly(b, py),
		"PYSPARK_PYTHON=" + py, "PYSPARK_DRIVER_PYTHON=" + py}
	job := []string{"--master", "yarn", "--deploy-mode", "client", script, "4"}

	p := startProxy(b, ctx)
	rounds := firstStopRoundsWanted(b, 5)
	keep := newFirstStopKeep(b, os.Getenv("SPARKDAP_BENCH_FIRSTSTOP_KEEP"))
	for i := 0; i < b.N; i++ {
		plain := func(round int) firstStopRun {
			run := startSpark(b, ctx, b.TempDir(), env, sparkSubmit, job...)
			run.wait(b, ctx)
			keep.run(b, round, "plain", run)
			at, err := firstTaskAt(run.out.String())
			if err != nil {
				b.Fatal(err)
			}
			return firstStopRun{first: at.Sub(run.started), job: run.elapsed}
		}
		debugged := func(round int) firstStopRun {
			// The breakpoint is at the driver's path of the script: the
			// task is a function of __main__, which Spark pickles by
			// value, so the executor's code names the file the driver ran.
			ide := attachAtLine(b, ctx, p, script, line)
			defer detachIDE(b, ctx, ide)
			run := startSpark(b, ctx, b.TempDir(), append(append([]string{}, env...), "SPARKDAP_TOKEN="+p.Token),
				sparkdapBinary(b), append([]string{"submit", "--proxy", p.Executors, "--partitions", "0", "--"}, job...)...)
			at := firstStopAt(b, ctx, ide, run, script)
			run.wait(b, ctx)
			keep.run(b, round, "debugged", run)
			return firstStopRun{first: at.Sub(run.started), job: run.elapsed}
		}
		plains, debuggeds := firstStopRounds(b, rounds, plain, debugged)
		reportFirstStop(b, "one-node YARN",
			"one-node YARN on this machine (a ResourceManager and a NodeManager), client deploy mode, one executor of one core; "+
				"plain = spark-submit --master yarn of testdata/firststop_job.py (4 partitions); "+
				"debugged = the same through `sparkdap submit --proxy … --partitions 0` to a running serve beside the job, "+
				"breakpoint on the task's first line; executors run this machine's Python (with debugpy) on both sides",
			plains, debuggeds)
	}
	keep.end(b, p, y)
}

// firstStopKeep is SPARKDAP_BENCH_FIRSTSTOP_KEEP's directory, or "" to
// keep nothing.
type firstStopKeep string

func newFirstStopKeep(b *testing.B, dir string) firstStopKeep {
	b.Helper()
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return firstStopKeep(dir)
}

// run keeps a run's output, headed by when it was submitted.
func (k firstStopKeep) run(b *testing.B, round int, side string, run *sparkRun) {
	b.Helper()
	if k == "" {
		return
	}
	head := fmt.Sprintf("submitted %s, ended after %v\n", run.started.UTC().Format(time.RFC3339Nano), run.elapsed)
	name := filepath.Join(string(k), fmt.Sprintf("round%d-%s.out", round+1, side))
	if err := os.WriteFile(name, []byte(head+run.out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// end keeps serve's log and the NodeManager's container logs.
func (k firstStopKeep) end(b *testing.B, p *proxy, y *yarnCluster) {
	b.Helper()
	if k == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(string(k), "serve.log"), []byte(p.Log()), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(string(k), "nm-logs"), os.DirFS(filepath.Join(y.Dir, "nm-logs"))); err != nil {
		b.Fatal(err)
	}
	b.Logf("kept serve's log, the runs' output and the container logs in %s", k)
}
