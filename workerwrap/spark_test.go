package workerwrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// The tests below run real PySpark jobs (local[2], one short job each).
// Without pyspark they skip, except in CI where a silent skip would hide a
// broken environment.

type sparkEnv struct {
	python, sparkSubmit string
}

func requireSpark(t *testing.T) sparkEnv {
	t.Helper()
	testenv.SkipIfShort(t, "runs a Spark job")
	python, sparkSubmit := testenv.Spark(t, "debugpy")
	return sparkEnv{python: python, sparkSubmit: sparkSubmit}
}

type jobResult struct {
	Sum, Count int
	stderr     string
	elapsed    time.Duration
}

// runJob runs testdata/job.py under the wrapper built from opts.
func runJob(t *testing.T, se sparkEnv, opts Options, partitions int, env ...string) jobResult {
	t.Helper()
	return runJobWith(t, se, &opts, partitions, env...)
}

func runJobWith(t *testing.T, se sparkEnv, opts *Options, partitions int, env ...string) jobResult {
	t.Helper()
	job, err := filepath.Abs(filepath.Join("testdata", "job.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "result.json")
	res := runSparkWith(t, se, opts, []string{job, out, fmt.Sprint(partitions)}, env...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("job wrote no result: %v\nstderr:\n%s", err, res.stderr)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	return res
}

// runSpark runs spark-submit in local[2] with app (options and application)
// under the wrapper built from opts. The module is importable only through
// what Injection adds: the tests set no PYTHONPATH for it.
// runPlainJob runs testdata/job.py without sparkdap, for reference.
func runPlainJob(t *testing.T, se sparkEnv, partitions int) jobResult {
	t.Helper()
	return runJobWith(t, se, nil, partitions)
}

func runSpark(t *testing.T, se sparkEnv, opts Options, app []string, env ...string) jobResult {
	return runSparkWith(t, se, &opts, app, env...)
}

// runSparkWith runs app under the wrapper built from opts, or plainly if
// opts is nil.
func runSparkWith(t *testing.T, se sparkEnv, opts *Options, app []string, env ...string) jobResult {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{
		"--master", "local[2]",
		"--conf", "spark.ui.enabled=false",
		"--conf", "spark.pyspark.python=" + se.python,
		"--conf", "spark.log.level=WARN",
	}, app...)
	if opts != nil {
		wrapper := filepath.Join(dir, "wrapper", FileName)
		if err := os.Mkdir(filepath.Dir(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(wrapper, *opts); err != nil {
			t.Fatal(err)
		}
		var err error
		if args, err = (Injection{WrapperPath: wrapper}).Apply(args); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, se.sparkSubmit, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := jobResult{stderr: stderr.String(), elapsed: time.Since(start)}
	if err != nil {
		t.Fatalf("spark-submit %q: %v (after %v)\nstdout:\n%s\nstderr:\n%s", args, err, res.elapsed, stdout.String(), res.stderr)
	}
	t.Logf("job took %v", res.elapsed.Round(time.Millisecond))
	return res
}

// Expected result of testdata/job.py: sum of 2*x for x in 0..39.
const wantSum, wantCount = 1560, 40

// jobTimeout bounds one test job; a healthy one takes about 10 s here.
var jobTimeout = 3 * time.Minute

var sparkdapLine = regexp.MustCompile(`^sparkdap: \[pid (\d+)\] (.*)$`)

// sparkdapLines returns the wrapper's stderr lines by worker pid.
func sparkdapLines(stderr string) map[string][]string {
	lines := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		if m := sparkdapLine.FindStringSubmatch(sc.Text()); m != nil {
			lines[m[1]] = append(lines[m[1]], m[2])
		}
	}
	return lines
}

// daemonPreloadFailed is the one line the daemon prints when it cannot load
// the debugger before forking (remote_debug._preload_debugger).
var daemonPreloadFailed = regexp.MustCompile(`^could not load the debugger in the daemon \(.*\); each worker that attaches loads it$`)

// daemonLines takes the daemon's own lines (one process printing only
// daemonPreloadFailed) out of lines, and returns them.
func daemonLines(lines map[string][]string) []string {
	var daemon []string
	for pid, ls := range lines {
		if len(ls) == 1 && daemonPreloadFailed.MatchString(ls[0]) {
			daemon = append(daemon, ls[0])
			delete(lines, pid)
		}
	}
	return daemon
}

// checkFailOpen asserts a correct result and exactly one sparkdap line per
// worker process, matching want; it returns the daemon's lines.
func checkFailOpen(t *testing.T, res jobResult, want *regexp.Regexp) []string {
	t.Helper()
	if res.Sum != wantSum || res.Count != wantCount {
		t.Errorf("job result sum=%d count=%d, want %d and %d", res.Sum, res.Count, wantSum, wantCount)
	}
	lines := sparkdapLines(res.stderr)
	daemon := daemonLines(lines)
	if len(lines) == 0 {
		t.Fatalf("no sparkdap: line from a worker in stderr:\n%s", res.stderr)
	}
	for pid, ls := range lines {
		if len(ls) != 1 {
			t.Errorf("worker %s printed %d sparkdap lines, want 1: %q", pid, len(ls), ls)
		}
		if !want.MatchString(ls[0]) {
			t.Errorf("worker %s: %q does not match %q", pid, ls[0], want)
		}
	}
	if strings.Contains(res.stderr, "Traceback") {
		t.Errorf("stderr has a traceback:\n%s", res.stderr)
	}
	return daemon
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestSparkFailOpenProxyRefused(t *testing.T) {
	se := requireSpark(t)
	o := NewOptions()
	o.Proxy = closedPort(t)
	o.ConnectTimeout = time.Second
	res := runJob(t, se, o, 4)
	checkFailOpen(t, res, regexp.MustCompile(`^debugger unavailable \(proxy `+regexp.QuoteMeta(o.Proxy)+` unreachable: connection refused\); task runs undebugged$`))
}

// A proxy that accepts but never speaks is the case that would hang a worker
// forever in debugpy.connect without the wrapper's guard.
func TestSparkFailOpenSilentProxy(t *testing.T) {
	se := requireSpark(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	o := NewOptions()
	o.Proxy = ln.Addr().String()
	o.ConnectTimeout = time.Second
	o.HandshakeTimeout = 2 * time.Second
	plain := runPlainJob(t, se, 4)
	res := runJob(t, se, o, 4)
	// The first workers wait; once one of them found the proxy silent, the
	// daemon's later workers skip it (backoff.py).
	checkFailOpen(t, res, regexp.MustCompile(`(did not finish the debug handshake within 2s; this executor's other workers skip it for 60s|`+
		`another worker of this executor found proxy `+regexp.QuoteMeta(o.Proxy)+` silent \d+s ago; retrying after \d+s)\); task runs undebugged$`))
	// Each worker process waits at most once, for at most connect +
	// handshake timeout: the extra time over the same job without sparkdap
	// is bounded by that per worker, plus slack for a shared machine.
	workers := len(sparkdapLines(res.stderr))
	bound := time.Duration(workers)*(o.ConnectTimeout+o.HandshakeTimeout) + 30*time.Second
	if extra := res.elapsed - plain.elapsed; extra > bound {
		t.Errorf("job took %v with a silent proxy, %v without sparkdap: %v extra for %d workers, want at most %v",
			res.elapsed, plain.elapsed, extra, workers, bound)
	}
	if res.Sum != plain.Sum || res.Count != plain.Count {
		t.Errorf("result %d/%d differs from the plain run's %d/%d", res.Sum, res.Count, plain.Sum, plain.Count)
	}
}

func TestSparkFailOpenNoDebugpy(t *testing.T) {
	se := requireSpark(t)
	// A package named debugpy that fails to import, ahead of site-packages.
	shim := t.TempDir()
	if err := os.MkdirAll(filepath.Join(shim, "debugpy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shim, "debugpy", "__init__.py"),
		[]byte("raise ImportError('debugpy disabled by the sparkdap test')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The proxy is there and accepts the worker's hello; debugpy is what
	// is missing on the executor.
	a := newFakeAdapter(t, "")
	o := NewOptions()
	o.Proxy = a.addr()
	res := runJob(t, se, o, 4, "PYTHONPATH="+shim)
	daemon := checkFailOpen(t, res, regexp.MustCompile(`^debugger unavailable \(cannot import debugpy: ImportError: debugpy disabled by the sparkdap test\); task runs undebugged$`))
	// The daemon tried to load it once before forking, and said so once.
	if len(daemon) != 1 || !strings.Contains(daemon[0], "ImportError: debugpy disabled by the sparkdap test") {
		t.Errorf("daemon lines %q, want one saying why debugpy did not load", daemon)
	}
	if r := a.report(); len(r.hellos) == 0 || r.conns != 0 {
		t.Errorf("got %d hellos and %d pydevd connections, want >0 and 0", len(r.hellos), r.conns)
	}
}

func TestSparkSelectsPartition(t *testing.T) {
	se := requireSpark(t)
	const token = "test-token-4f1c"
	a := newFakeAdapter(t, token)
	o := NewOptions()
	o.Proxy = a.addr()
	o.Partitions = []int{1}
	res := runJob(t, se, o, 4, "SPARKDAP_TOKEN="+token)
	if res.Sum != wantSum || res.Count != wantCount {
		t.Errorf("job result sum=%d count=%d, want %d and %d", res.Sum, res.Count, wantSum, wantCount)
	}
	if l := sparkdapLines(res.stderr); len(l) != 0 {
		t.Errorf("unexpected sparkdap lines: %v", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(ctx, func() bool { return len(a.report().tasks) >= 1 })
	a.close()
	r := a.report()
	if len(r.errs) > 0 {
		t.Errorf("fake adapter errors: %v", r.errs)
	}
	// The debugger presents its hello's one-time token (which the fake
	// accepts once), never the token itself.
	if r.conns != 1 || len(r.tokens) != 1 || r.tokens[0] == token || r.tokens[0] == "" {
		t.Errorf("got %d connections with tokens %v, want 1 with a derived token", r.conns, r.tokens)
	}
	if len(r.hellos) != 1 || r.hellos[0]["proofOK"] != true || r.hellos[0]["token"] != nil || r.hellos[0]["partitionId"] != 1.0 {
		t.Fatalf("got hellos %v, want one for partition 1 with a good proof and no token", r.hellos)
	}
	if strings.Contains(r.heard, token) {
		t.Errorf("the token crossed the wire in the hello: %q", r.heard)
	}
	roots, _ := r.hellos[0]["roots"].(map[string]any)
	if cwd, _ := roots["cwd"].(string); cwd == "" || roots["sparkFiles"] == nil {
		t.Errorf("hello roots %v lack the worker's directory or SparkFiles root", roots)
	}
	if len(r.tasks) != 1 {
		t.Fatalf("got %d sparkdapTask events, want 1: %v", len(r.tasks), r.tasks)
	}
	// Every worker followed the selection and reported each task, and
	// whether it was selected, on its watch connection.
	selectedBy := map[float64]bool{}
	idles := 0
	for _, line := range r.reports {
		if line == admission.HelloPrefix+"IDLE" {
			idles++
			continue
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, admission.HelloPrefix+"TASK ")), &rep); err != nil {
			t.Fatalf("watch report %q: %v", line, err)
		}
		p, _ := rep["partitionId"].(float64)
		selectedBy[p] = rep["selected"] == true
	}
	if r.watches == 0 || len(selectedBy) != 4 || !selectedBy[1] || selectedBy[0] || selectedBy[2] || selectedBy[3] || idles != len(r.reports)-idles {
		t.Errorf("%d watches reported %q: want all 4 partitions, only 1 selected, each task ended", r.watches, r.reports)
	}
	task := r.tasks[0]
	if task["partitionId"] != 1.0 || task["attemptNumber"] != 0.0 || task["executorId"] != "driver" ||
		task["postMortem"] != false || task["wait"] != false {
		t.Errorf("sparkdapTask body = %v", task)
	}
	for _, k := range []string{"stageId", "taskAttemptId", "pid"} {
		if _, ok := task[k].(float64); !ok {
			t.Errorf("sparkdapTask body %s = %#v, want a number", k, task[k])
		}
	}
	if h, _ := task["host"].(string); h == "" {
		t.Errorf("sparkdapTask body host = %#v, want the worker's host name", task["host"])
	}
	wantLabel := fmt.Sprintf("partition 1 · stage %v", task["stageId"])
	if task["label"] != wantLabel {
		t.Errorf("label = %q, want %q", task["label"], wantLabel)
	}
}

func TestSparkWaitStopsInUserCode(t *testing.T) {
	se := requireSpark(t)
	a := newFakeAdapter(t, "")
	o := NewOptions()
	o.Proxy = a.addr()
	o.Partitions = []int{2}
	o.Wait = true
	o.PostMortem = true
	res := runJob(t, se, o, 4)
	if res.Sum != wantSum || res.Count != wantCount {
		t.Errorf("job result sum=%d count=%d, want %d and %d", res.Sum, res.Count, wantSum, wantCount)
	}
	a.close()
	r := a.report()
	if len(r.errs) > 0 {
		t.Errorf("fake adapter errors: %v", r.errs)
	}
	if len(r.tasks) != 1 || r.tasks[0]["partitionId"] != 2.0 || r.tasks[0]["wait"] != true || r.tasks[0]["postMortem"] != true {
		t.Fatalf("sparkdapTask events = %v, want one for partition 2 with wait and postMortem", r.tasks)
	}
	job, _ := filepath.Abs(filepath.Join("testdata", "job.py"))
	want := stackFrame{Name: "scale", Path: job, Line: testenv.MarkedLine(t, job, "job-scale")}
	if len(r.stops) != 1 {
		t.Fatalf("got %d stops, want exactly 1 (at the first user line of the selected task): %+v", len(r.stops), r.stops)
	}
	got := r.stops[0]
	got.Reason = ""
	if got != want {
		t.Errorf("stopped at %+v, want %+v", got, want)
	}
}

// A worker whose token differs from the proxy's finds out at the proxy's
// proof: it says no more, loads no debugger, and runs on at once.
func TestSparkFailOpenWrongToken(t *testing.T) {
	se := requireSpark(t)
	a := newFakeAdapter(t, "the-right-token")
	o := NewOptions()
	o.Proxy = a.addr()
	o.HandshakeTimeout = time.Minute // must not be what ends the wait
	res := runJob(t, se, o, 4, "SPARKDAP_TOKEN=a-wrong-token")
	checkFailOpen(t, res, regexp.MustCompile(`^debugger unavailable \(proxy `+regexp.QuoteMeta(o.Proxy)+` did not prove it knows the access token \(another program on that port, or another token\?\)\); task runs undebugged$`))
	if res.elapsed > 45*time.Second {
		t.Errorf("job took %v: the wrapper waited for the handshake timeout instead of taking the refusal", res.elapsed)
	}
	// Stopped at the proxy's proof: no description, no debugger, no pydevd connection.
	if r := a.report(); r.heard == "" || len(r.hellos) != 0 || r.conns != 0 || len(r.tasks) != 0 {
		t.Errorf("fake adapter heard %q and saw %d hellos, %d pydevd connections and %d task events, want only nonces",
			r.heard, len(r.hellos), r.conns, len(r.tasks))
	}
}

// TestSparkSquatterLearnsNoToken: a program that bound the proxy's port
// before the proxy (another user on a shared gateway) gets every worker's
// hello, and from it only nonces: not the token, not a proof it could
// replay, not even the task. The workers load no debugger and run on.
func TestSparkSquatterLearnsNoToken(t *testing.T) {
	se := requireSpark(t)
	const token = "squatted-token-9d2e"
	a := newFakeAdapter(t, token)
	a.squat = true
	o := NewOptions()
	o.Proxy = a.addr()
	o.HandshakeTimeout = time.Minute
	res := runJob(t, se, o, 4, "SPARKDAP_TOKEN="+token)
	checkFailOpen(t, res, regexp.MustCompile(`^debugger unavailable \(proxy `+regexp.QuoteMeta(o.Proxy)+` did not prove it knows the access token .*\); task runs undebugged$`))
	r := a.report()
	if r.heard == "" || len(r.hellos) != 0 || r.conns != 0 {
		t.Errorf("squatter heard %q, %d hellos, %d pydevd connections; want nonces only", r.heard, len(r.hellos), r.conns)
	}
	if !regexp.MustCompile(`^(SPARKDAP/2 HELLO [0-9a-f]{32}\n)+$`).MatchString(r.heard) {
		t.Errorf("squatter heard more than nonces: %q", r.heard)
	}
	if strings.Contains(r.heard, token) {
		t.Errorf("squatter heard the token: %q", r.heard)
	}
}

// The proxy enforces --max-sessions by finishing the handshake and hanging
// up; the workers must carry on.
func TestSparkSurvivesSessionRefusal(t *testing.T) {
	se := requireSpark(t)
	a := newFakeAdapter(t, "")
	a.hangUpAfterHandshake = true
	o := NewOptions()
	o.Proxy = a.addr()
	res := runJob(t, se, o, 4)
	if res.Sum != wantSum || res.Count != wantCount {
		t.Errorf("job result sum=%d count=%d, want %d and %d", res.Sum, res.Count, wantSum, wantCount)
	}
	for pid, ls := range sparkdapLines(res.stderr) {
		if len(ls) > 1 {
			t.Errorf("worker %s printed %d sparkdap lines, want at most 1: %q", pid, len(ls), ls)
		}
	}
	if strings.Contains(res.stderr, "Traceback") {
		t.Errorf("stderr has a traceback:\n%s", res.stderr)
	}
	if r := a.report(); r.conns == 0 {
		t.Error("no worker connected to the fake adapter")
	}
}

// The example app (RDD lambdas, a module from --py-files, a UDF and
// mapInPandas) gives the same result with every task traced as without
// sparkdap (testdata/loans.want.json, from a plain spark-submit run).
func TestSparkLoansExampleUnchanged(t *testing.T) {
	se := requireSpark(t)
	a := newFakeAdapter(t, "")
	o := NewOptions()
	o.Proxy = a.addr()
	o.PostMortem = true
	ex, err := filepath.Abs(filepath.Join("..", "examples", "loans"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "loans.json")
	res := runSpark(t, se, o, []string{"--py-files", filepath.Join(ex, "loanlib.py"), filepath.Join(ex, "loans.py"), "--output", out})
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result: %v\nstderr:\n%s", err, res.stderr)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "loans.want.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("result under sparkdap:\n%s\nwant:\n%s", got, want)
	}
	a.close()
	r := a.report()
	if len(r.errs) > 0 {
		t.Errorf("fake adapter errors: %v", r.errs)
	}
	seen := map[float64]bool{}
	for _, task := range r.tasks {
		id, _ := task["taskAttemptId"].(float64)
		if seen[id] {
			t.Errorf("task %v labelled twice", id)
		}
		seen[id] = true
	}
	if len(seen) < 4 || r.conns == 0 || r.conns > len(seen) {
		t.Errorf("%d connections, %d distinct task labels; want every task labelled once over at most one connection per task", r.conns, len(seen))
	}
}
