//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// These tests run the loans example and small jobs on real local-mode
// PySpark under `sparkdap submit`, against a real `sparkdap serve`, driven
// by a DAP client. The developer's sources (src/) always live in another
// directory than the one Spark runs the job from (ship/), so every stop
// proves the path mapping: executor path in, local path out.

// requireSpark returns spark-submit for local-mode jobs with pandas UDFs
// and debugpy, or the test is testenv.Missing.
func requireSpark(t testing.TB) string {
	t.Helper()
	testenv.SkipIfShort(t, "runs a Spark job")
	_, submit := testenv.Spark(t, "debugpy", "pandas", "pyarrow")
	return submit
}

// sparkRun is one spark-submit (plain or through sparkdap submit).
type sparkRun struct {
	pid     int // of the process group's leader
	started time.Time
	out     *syncbuf.Buffer
	done    chan struct{}
	err     error
	elapsed time.Duration
}

func startSpark(t testing.TB, ctx context.Context, dir string, env []string, name string, args ...string) *sparkRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so a job that hangs is killed whole (the JVM
	// and its Python workers too) and cannot hold the output pipe open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	r := &sparkRun{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	r.pid, r.started = cmd.Process.Pid, start
	go func() {
		r.err = cmd.Wait()
		r.elapsed = time.Since(start)
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
		if t.Failed() {
			t.Logf("%s %s output (last 8 KiB):\n%s", name, strings.Join(args, " "), tail(r.out.String(), 8<<10))
		}
	})
	return r
}

func (r *sparkRun) wait(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatalf("Spark job still running: %v", ctx.Err())
	}
	if r.err != nil {
		t.Fatalf("Spark job failed: %v", r.err)
	}
}

// sparkStop is what the IDE saw at one breakpoint hit.
type sparkStop struct {
	thread   string
	path     string
	line     int
	function string
	locals   map[string]string
	frameID  int
	threadID int
	frames   []godap.StackFrame
}

// nextStop waits for a stopped event and reads the top frame and its
// locals, as an IDE does when it shows a stop.
func nextStop(t testing.TB, ctx context.Context, ide *dapclient.Client, job *sparkRun) sparkStop {
	t.Helper()
	type result struct {
		tid int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		st, err := ide.StoppedEvent(ctx)
		if err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{tid: st.ThreadId}
	}()
	var tid int
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiting for a stop: %v", r.err)
		}
		tid = r.tid
	case <-job.done:
		t.Fatalf("the job ended (%v) without stopping at the expected breakpoint", job.err)
	}
	s := sparkStop{threadID: tid, locals: map[string]string{}}
	threads, err := ide.Threads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range threads {
		if th.Id == tid {
			s.thread = th.Name
		}
	}
	frames, err := ide.StackTrace(ctx, tid)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v (%d frames)", err, len(frames))
	}
	s.frames = frames
	top := frames[0]
	if top.Source != nil {
		s.path = top.Source.Path
	}
	s.line, s.function, s.frameID = top.Line, top.Name, top.Id
	scopes, err := ide.Scopes(ctx, top.Id)
	if err != nil || len(scopes) == 0 {
		t.Fatalf("scopes: %v", err)
	}
	vars, err := ide.Variables(ctx, scopes[0].VariablesReference)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		s.locals[v.Name] = v.Value
	}
	return s
}

// place is where a breakpoint is set: the developer's file and line.
type place struct {
	path string
	line int
}

// loansPlaces are the breakpoints at markers in the loans example's
// developer copy: a "loanlib-" marker is in loanlib.py (srcLib), any
// other in loans.py (srcMain).
func loansPlaces(t testing.TB, srcMain, srcLib string, markers ...string) map[string]place {
	t.Helper()
	out := make(map[string]place, len(markers))
	for _, m := range markers {
		path := srcMain
		if strings.HasPrefix(m, "loanlib-") {
			path = srcLib
		}
		out[m] = place{path, testenv.MarkedLine(t, path, m)}
	}
	return out
}

// armedLines is places' lines by file, as setBreakpoints takes them.
func armedLines(places map[string]place) map[string][]int {
	armed := map[string][]int{}
	for _, p := range places {
		armed[p.path] = append(armed[p.path], p.line)
	}
	return armed
}

// placeName is the name of the place s stopped at, or "".
func placeName(places map[string]place, s sparkStop) string {
	for name, p := range places {
		if p.path == s.path && p.line == s.line {
			return name
		}
	}
	return ""
}

// disarmAndContinue removes the breakpoint s stopped at from armed, sends
// its file's remaining ones, and continues the stopped thread: each
// breakpoint stops once.
func disarmAndContinue(t testing.TB, ctx context.Context, ide *dapclient.Client, armed map[string][]int, s sparkStop) {
	t.Helper()
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

// checkRunsFromZip: at the loanlib-payment stop, the executor runs
// loanlib from the --py-files zip, not from a copy of loanlib.py it could
// have found elsewhere.
func checkRunsFromZip(t testing.TB, ctx context.Context, ide *dapclient.Client, s sparkStop) {
	t.Helper()
	if r, err := ide.Evaluate(ctx, s.frameID, "__file__"); err != nil {
		t.Errorf("loanlib-payment: evaluate __file__: %v", err)
	} else if !strings.Contains(r.Result, "loanlib.zip/loanlib.py") {
		t.Errorf("loanlib-payment: the module's __file__ is %s, not loanlib.py inside loanlib.zip", r.Result)
	}
}

// labelRE is the task label the wrapper gives each debugged worker.
var labelRE = regexp.MustCompile(`exec \S+ · .+ · pid \d+ · partition (\d+) · stage \d+\]`)

// loansLayout puts the developer's copy of the loans example in src/ and
// the copy Spark runs in ship/.
type loansLayout struct {
	src, ship         string
	srcMain, srcLib   string
	shipMain, shipLib string
}

func newLoansLayout(t testing.TB) loansLayout {
	t.Helper()
	root := t.TempDir()
	l := loansLayout{src: filepath.Join(root, "home", "dev", "loans"), ship: filepath.Join(root, "deploy", "job")}
	for _, f := range []string{"loans.py", "loanlib.py"} {
		copyFile(t, filepath.Join("..", "examples", "loans", f), filepath.Join(l.src, f))
		copyFile(t, filepath.Join("..", "examples", "loans", f), filepath.Join(l.ship, f))
	}
	l.srcMain, l.srcLib = filepath.Join(l.src, "loans.py"), filepath.Join(l.src, "loanlib.py")
	l.shipMain, l.shipLib = filepath.Join(l.ship, "loans.py"), filepath.Join(l.ship, "loanlib.py")
	return l
}

// plainLoans runs the loans job without sparkdap, for the reference result.
func plainLoans(t testing.TB, ctx context.Context, sparkSubmit string, l loansLayout) map[string]any {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plain.json")
	r := startSpark(t, ctx, l.ship, nil, sparkSubmit, "--master", "local[2]", "--py-files", l.shipLib, l.shipMain, "--output", out)
	r.wait(t, ctx)
	return readJSON(t, out)
}

// TestSparkStopsInEveryKindOfExecutorCode runs the loans job under
// sparkdap and stops once in each place executor code comes from: a lambda
// in the driver's script, a module shipped with --py-files, a UDF and a
// mapInPandas function. Each stop must show the developer's file and line,
// the task's label, and the task's real values; the job must end with the
// same result as without sparkdap.
func TestSparkStopsInEveryKindOfExecutorCode(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	sparkSubmit := requireSpark(t)
	ctx := testContext(t, 8*time.Minute)
	l := newLoansLayout(t)
	plain := plainLoans(t, ctx, sparkSubmit, l)

	p := startProxy(t, ctx, "--root", l.src)
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := loansPlaces(t, l.srcMain, l.srcLib, "mapvalues-lambda", "loanlib-payment", "udf-body", "mapinpandas-body")
	// What is still armed, per file: a hit disarms its breakpoint so each
	// kind stops once.
	armed := armedLines(want)
	err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			for path, lines := range armed {
				bps, err := ide.SetBreakpoints(ctx, path, lines...)
				if err != nil {
					return err
				}
				for _, bp := range bps {
					if bp.Verified {
						return fmt.Errorf("breakpoint %s:%d verified before any executor ran", path, bp.Line)
					}
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "debugged.json")
	job := startSpark(t, ctx, l.ship, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "0", "--",
		"--master", "local[2]", "--py-files", l.shipLib, l.shipMain, "--output", out)

	seen := map[string]sparkStop{}
	for len(seen) < len(want) {
		s := nextStop(t, ctx, ide, job)
		if len(seen) == 0 {
			checkLibrarySource(t, ctx, ide, s)
		}
		name := placeName(want, s)
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), which is none of the breakpoints, or not at the developer's path", s.path, s.line, s.function)
		}
		if _, dup := seen[name]; dup {
			t.Fatalf("stopped at %s twice: its breakpoint was removed after the first hit", name)
		}
		seen[name] = s
		disarmAndContinue(t, ctx, ide, armed, s)
	}
	for name, s := range seen {
		m := labelRE.FindStringSubmatch(s.thread)
		if m == nil || m[1] != "0" {
			t.Errorf("%s: thread %q does not show the task label of partition 0", name, s.thread)
		}
	}
	// Real values, from the executor's frames.
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
	if _, ok := seen["mapinpandas-body"].locals["pdf"]; !ok {
		t.Errorf("mapinpandas-body locals %v lack the pandas batch pdf", seen["mapinpandas-body"].locals)
	}

	job.wait(t, ctx)
	got := readJSON(t, out)
	if g, w := fmt.Sprint(got), fmt.Sprint(plain); g != w {
		t.Errorf("result under sparkdap differs from the plain run:\n got %s\nwant %s", g, w)
	}
}

// TestSparkZipModuleAndDriverClosureBind covers code that has no file of
// its own on the executor: a module imported from a --py-files zip, and a
// lambda pickled from a driver script that does not exist where the
// executor runs.
func TestSparkZipModuleAndDriverClosureBind(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 8*time.Minute)

	t.Run("module inside a zip", func(t *testing.T) {
		l := newLoansLayout(t)
		// Spark gets only the zip: no loanlib.py beside the job.
		deps := filepath.Join(l.ship, "deps.zip")
		zipFiles(t, deps, l.shipLib)
		os.Remove(l.shipLib)
		p := startProxy(t, ctx, "--root", l.src)
		line := testenv.MarkedLine(t, l.srcLib, "loanlib-amortize")
		ide := attachAtLine(t, ctx, p, l.srcLib, line)
		out := filepath.Join(t.TempDir(), "out.json")
		job := startSpark(t, ctx, l.ship, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
			"submit", "--proxy", p.Executors, "--partitions", "1", "--",
			"--master", "local[2]", "--py-files", deps, l.shipMain, "--output", out)
		s := nextStop(t, ctx, ide, job)
		if s.path != l.srcLib || s.line != line {
			t.Fatalf("stopped at %s:%d, want the developer's %s:%d", s.path, s.line, l.srcLib, line)
		}
		if _, err := ide.SetBreakpoints(ctx, l.srcLib); err != nil {
			t.Fatal(err)
		}
		// The path report says where the code really was.
		report, err := exec.CommandContext(ctx, sparkdapBinary(t), "paths", "--ide", p.IDE).CombinedOutput()
		if err != nil {
			t.Fatalf("sparkdap paths: %v\n%s", err, report)
		}
		if !regexp.MustCompile(`deps\.zip/loanlib\.py\n\s+→ ` + regexp.QuoteMeta(l.srcLib)).Match(report) {
			t.Errorf("sparkdap paths does not show the zip entry mapped to %s:\n%s", l.srcLib, report)
		}
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
		job.wait(t, ctx)
		readJSON(t, out)
	})

	t.Run("closure from a driver script absent on the executor", func(t *testing.T) {
		root := t.TempDir()
		src := filepath.Join(root, "home", "dev", "closure_job.py")
		ship := filepath.Join(root, "deploy", "closure_job.py")
		copyFile(t, filepath.Join("testdata", "closure_job.py"), src)
		copyFile(t, filepath.Join("testdata", "closure_job.py"), ship)
		line := testenv.MarkedLine(t, src, "closure-lambda")
		p := startProxy(t, ctx, "--root", filepath.Dir(src))
		ide := attachAtLine(t, ctx, p, src, line)
		out := filepath.Join(t.TempDir(), "out.json")
		job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
			"submit", "--proxy", p.Executors, "--partitions", "2", "--",
			"--master", "local[2]", ship, out)
		s := nextStop(t, ctx, ide, job)
		if s.path != src || s.line != line {
			t.Fatalf("stopped at %s:%d, want the developer's %s:%d", s.path, s.line, src, line)
		}
		if x, err := strconv.Atoi(s.locals["x"]); err != nil || x < 50 || x >= 75 {
			t.Errorf("x = %q: want an element of partition 2 (50..74)", s.locals["x"])
		}
		if _, err := ide.SetBreakpoints(ctx, src); err != nil {
			t.Fatal(err)
		}
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
		job.wait(t, ctx)
		if got := readJSON(t, out)["total"]; got != float64(3*4950+100) {
			t.Errorf("total = %v, want %d", got, 3*4950+100)
		}
	})
}

// TestSparkPartitionFilter: with --partitions 1, exactly one of the four
// tasks gets a debug session.
func TestSparkPartitionFilter(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	p := startProxy(t, ctx)
	dir := t.TempDir()
	job := filepath.Join(dir, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	out := filepath.Join(dir, "out.json")
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "1", "--", "--master", "local[2]", job, out)
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540", got)
	}
	attached := regexp.MustCompile(`(?m)^sparkdap: \+ executor \d+ attached \[(.*)\]$`).FindAllStringSubmatch(p.Log(), -1)
	if len(attached) != 1 {
		t.Fatalf("%d debug sessions for a 4-partition job with --partitions 1, want 1: %v", len(attached), attached)
	}
	if !strings.Contains(attached[0][1], "partition 1 ·") {
		t.Errorf("the session is not partition 1's: %s", attached[0][1])
	}
}

// checkLibrarySource: a frame of code with no local copy (PySpark's own
// worker.py inside pyspark.zip) keeps a sourceReference and no path, and
// the IDE gets the code through it from the executor.
func checkLibrarySource(t testing.TB, ctx context.Context, ide *dapclient.Client, s sparkStop) {
	t.Helper()
	for _, f := range s.frames {
		// With no local copy the IDE gets no path (an executor must not
		// name laptop files), only the executor's path as origin.
		if f.Source == nil || f.Source.Path != "" || !strings.HasSuffix(f.Source.Origin, "pyspark/worker.py") {
			continue
		}
		if f.Source.SourceReference == 0 {
			t.Errorf("frame %s in %s has no sourceReference: the IDE could not show it", f.Name, f.Source.Origin)
			return
		}
		var body struct {
			Content string `json:"content"`
		}
		if err := ide.Call(ctx, "source", map[string]any{"source": f.Source, "sourceReference": f.Source.SourceReference}, &body); err != nil {
			t.Errorf("source of %s: %v", f.Source.Origin, err)
			return
		}
		if !strings.Contains(body.Content, "def main(") {
			t.Errorf("source of %s does not look like PySpark's worker.py: %.200q", f.Source.Origin, body.Content)
		}
		return
	}
	t.Errorf("no pyspark/worker.py frame in the stack: %+v", s.frames)
}
