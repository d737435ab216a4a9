//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// backoffJob squares 0..79 in backoffTasks partitions; each task is one
// Python worker process when workers are not reused.
const backoffJob = `import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkdap-backoff").getOrCreate()
n = spark.sparkContext.parallelize(range(80), int(sys.argv[1])).map(lambda x: x * x).sum()
print("RESULT %d" % n)
spark.stop()
`

const (
	backoffTasks  = 8
	backoffResult = "RESULT 167480" // sum of x*x for x in 0..79
)

// TestBackoffSparkJobSkipsFrozenProxy: serve is SIGSTOPped before the job
// starts, so every worker's connect goes through (the kernel's backlog) and
// its hello is never answered. With local[2] and
// spark.python.worker.reuse=false each of the job's tasks is a new worker
// process: only the first ones, running side by side, wait out the
// handshake timeout; the executor's later workers skip the silent proxy at
// once (for --proxy-backoff), each saying so in one line, and the job ends
// with its plain result.
func TestBackoffSparkJobSkipsFrozenProxy(t *testing.T) {
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "squares.py"), []byte(backoffJob), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startFaultProxy(t, ctx, "--root", dir)
	p.freeze(t)
	// The daemon makes its directory for the backoff under TMPDIR.
	tmp := t.TempDir()
	job := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + testToken, "TMPDIR=" + tmp}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--connect-timeout", "2s", "--handshake-timeout", "2s", "--proxy-backoff", "90s", "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
		"--conf", "spark.python.worker.reuse=false",
		"squares.py", fmt.Sprint(backoffTasks))
	job.wait(t, ctx)
	out := job.out.String()
	t.Logf("the job said:\n%s", grepLines(out, "sparkdap: [pid"))

	if !strings.Contains(out, backoffResult+"\n") {
		t.Errorf("the job's output has no %q", backoffResult)
	}
	waited := regexp.MustCompile(`(?m)^sparkdap: \[pid \d+\] debugger unavailable \(proxy ` + regexp.QuoteMeta(p.Executors) +
		` (accepted the connection but did not finish the debug handshake within 2s|unreachable: no connection within 2s)` +
		`; this executor's other workers skip it for 90s\); task runs undebugged$`)
	skipped := regexp.MustCompile(`(?m)^sparkdap: \[pid \d+\] debugger unavailable \(another worker of this executor found proxy ` +
		regexp.QuoteMeta(p.Executors) + ` silent \d+s ago; retrying after \d+s\); task runs undebugged$`)
	nWaited := len(waited.FindAllString(out, -1))
	nSkipped := len(skipped.FindAllString(out, -1))
	// Two task slots: at most the two workers that started together wait.
	if nWaited < 1 || nWaited > 2 {
		t.Errorf("%d workers waited for the frozen proxy, want 1 or 2 (the ones running side by side)", nWaited)
	}
	if nWaited+nSkipped != backoffTasks {
		t.Errorf("%d workers waited and %d skipped the proxy, want one line from each of the %d tasks' workers",
			nWaited, nSkipped, backoffTasks)
	}
	if n := strings.Count(out, "sparkdap: [pid"); n != nWaited+nSkipped {
		t.Errorf("the workers wrote %d sparkdap lines, want only the %d counted above", n, nWaited+nSkipped)
	}
	if strings.Contains(out, "Traceback") {
		t.Errorf("the job's output has a traceback")
	}
	// Spark stops its daemon with SIGTERM as the job ends; the daemon
	// removes its directory on the way out.
	var left []string
	for range 100 { // 10 s
		left, _ = filepath.Glob(filepath.Join(tmp, "sparkdap-backoff-*"))
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) != 0 {
		t.Errorf("the daemon's directory outlived the job: %q", left)
	}
}
