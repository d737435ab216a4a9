//go:build linux

package integration

import (
	"bufio"
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

	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// The debugger matrix: every debugger of requirements-debuggers.txt, each
// installed in a directory of its own by scripts/setup-debuggers, debugged
// through a real `sparkdap serve` the way a user would: debugpy releases
// from the recorded VS Code's sessions, pydevd-pycharm builds from the
// PyCharm double.

// matrixDebugger is one line of requirements-debuggers.txt.
type matrixDebugger struct {
	name, version string
	dir           string // absolute; scripts/setup-debuggers fills it
}

func (d matrixDebugger) String() string { return d.name + "-" + d.version }

// pycharm says which front end debugs it.
func (d matrixDebugger) pycharm() bool { return d.name == "pydevd-pycharm" }

// matrixDebuggers reads the matrix; a debugger whose directory is not
// installed is testenv.Missing.
func matrixDebuggers(t testing.TB) []matrixDebugger {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "requirements-debuggers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cache, err := filepath.Abs(filepath.Join("..", ".cache", "debuggers"))
	if err != nil {
		t.Fatal(err)
	}
	var out []matrixDebugger
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		name, version, ok := strings.Cut(strings.TrimSpace(line), "==")
		if !ok {
			continue
		}
		d := matrixDebugger{name: name, version: version, dir: filepath.Join(cache, name+"-"+version)}
		if _, err := os.Stat(filepath.Join(d.dir, ".installed")); err != nil {
			testenv.Missing(t, "%s is not installed in %s (scripts/setup-debuggers)", d, d.dir)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("requirements-debuggers.txt lists no debugger")
	}
	return out
}

// matrixDebuggerNamed is the matrix's entry for name==version.
func matrixDebuggerNamed(t testing.TB, name, version string) matrixDebugger {
	t.Helper()
	for _, d := range matrixDebuggers(t) {
		if d.name == name && d.version == version {
			return d
		}
	}
	t.Fatalf("requirements-debuggers.txt has no %s==%s", name, version)
	return matrixDebugger{}
}

// matrixEnv is the environment that puts d first on a Python's path and
// nothing else of a PYTHONPATH the test run may have.
func matrixEnv(d matrixDebugger, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "PYTHONPATH="+d.dir), extra...)
}

// matrixParallel is how many debuggers run through serve at once: most of
// each run is waiting out a lease, not CPU.
const matrixParallel = 10

// TestMatrixServe: for each debugger of the matrix, three workers with the
// generated wrapper attach to a serve of their own and stop at a
// breakpoint, each showing its own values; the IDE clears the breakpoint
// (an empty list, the request debugpy before 1.8.8 crashed on) and
// resumes the first, which ends with its plain result; serve then goes
// silent (SIGSTOP), and the second worker's lease lapses and it runs to
// its plain result while the third, with no lease, stays stopped; serve
// is killed, and the third runs to its plain result too.
func TestMatrixServe(t *testing.T) {
	testenv.SkipIfShort(t, "starts a worker per debugger of the matrix")
	py := testenv.Python(t)
	debuggers := matrixDebuggers(t)
	if only := os.Getenv("SPARKDAP_MATRIX_ONLY"); only != "" {
		var keep []matrixDebugger
		for _, d := range debuggers {
			if strings.Contains(d.String(), only) {
				keep = append(keep, d)
			}
		}
		debuggers = keep
	}
	ctx := testContext(t, 10*time.Minute)
	wrappers := map[bool]string{}
	for _, kind := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"wrap", "-o", dir, "--lease", testLease.String()}
		if kind {
			args = append(args, "--ide-kind", "pycharm")
		}
		if out, err := exec.CommandContext(ctx, sparkdapBinary(t), args...).CombinedOutput(); err != nil {
			t.Fatalf("sparkdap %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		wrappers[kind] = dir
	}
	script, err := filepath.Abs(filepath.Join("testdata", "matrix_worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "matrix-compute")

	start := time.Now()
	sem := make(chan struct{}, matrixParallel)
	var wg sync.WaitGroup
	for _, d := range debuggers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(d.String(), func(t *testing.T) {
				m := &matrixRun{d: d, py: py, wrapper: wrappers[d.pycharm()], script: script, line: line}
				if d.pycharm() {
					m.runPyCharm(t, ctx)
				} else {
					m.runDAP(t, ctx)
				}
			})
		}()
	}
	wg.Wait()
	t.Logf("%d debuggers through serve in %v", len(debuggers), time.Since(start).Round(time.Second))
}

// matrixRun is one debugger's run through serve.
type matrixRun struct {
	d       matrixDebugger
	py      string
	wrapper string // the generated remote_debug.py's directory
	script  string // testdata/matrix_worker.py
	line    int    // its breakpoint
	proxy   *faultProxy
}

// worker starts testdata/matrix_worker.py with the debugger first on its
// path and the given lease.
func (m *matrixRun) worker(t testing.TB, ctx context.Context, id int, lease string) *worker {
	t.Helper()
	cmd := exec.Command(m.py, "-X", "frozen_modules=off", m.script, "--wrapper", m.wrapper, "--id", strconv.Itoa(id))
	cmd.Env = matrixEnv(m.d, "SPARKDAP_TOKEN="+testToken, "SPARKDAP_PROXY="+m.proxy.Executors, "SPARKDAP_LEASE="+lease)
	return runWorker(t, cmd, id, 3)
}

// attached checks that the wrapper attached w with the matrix's copy of
// the debugger, not the one site-packages holds.
func (m *matrixRun) attached(t testing.TB, ctx context.Context, w *worker) {
	t.Helper()
	id := w.ID
	loaded := strings.Fields(w.waitLine(t, ctx, "LOADED "))
	module := "debugpy"
	if m.d.pycharm() {
		module = "pydevd_pycharm"
	}
	dir, err := filepath.EvalSymlinks(m.d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 4 || loaded[1] != module || loaded[2] != m.d.version || !strings.HasPrefix(loaded[3], dir+string(filepath.Separator)) {
		t.Fatalf("worker %d loaded %q, want %s %s from %s", id, loaded, module, m.d.version, dir)
	}
	if got := w.waitLine(t, ctx, "DEBUGGER "); got != "DEBUGGER connected" {
		t.Fatalf("worker %d: the wrapper says %q, want it connected; stderr:\n%s", id, got, w.stderr)
	}
}

// matrixValue is how a debugger shows an int local: "1000" (DAP), or
// "int: 1000" (pydevd-pycharm's line protocol).
func matrixValue(shown string, want int) bool {
	return shown == strconv.Itoa(want) || shown == "int: "+strconv.Itoa(want)
}

// afterStops is the part both front ends share once the three workers are
// stopped and the first resumed: the first ends with its plain result; a
// silent serve lets the second go at its lease while the third, without
// a lease, waits; a killed serve lets the third go.
func (m *matrixRun) afterStops(t testing.TB, ctx context.Context, ws []*worker) {
	t.Helper()
	bounded := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	ws[0].waitSuccess(t, bounded(60*time.Second))
	m.proxy.freeze(t)
	frozen := time.Now()
	ws[1].waitSuccess(t, bounded(testLease+60*time.Second))
	took := time.Since(frozen)
	t.Logf("worker 2 ran on %v after serve went silent", took.Round(100*time.Millisecond))
	if took < testLease-3*time.Second {
		t.Errorf("worker 2 ran on %v after serve went silent, before its lease of %v could lapse", took, testLease)
	}
	if n := strings.Count(ws[1].stderr.String(), leaseLine); n != 1 {
		t.Errorf("worker 2 said %q %d times, want once; stderr:\n%s", leaseLine, n, ws[1].stderr)
	}
	select {
	case <-ws[2].exited:
		t.Fatalf("worker 3, stopped with no lease, ran on while serve was only silent (%v)", ws[2].exitErr)
	default:
	}
	m.proxy.kill9(t)
	ws[2].waitSuccess(t, bounded(60*time.Second))
}

// matrixWorkers are the three workers of a run, by id: the first alone,
// then the other two at once; the third holds its stop with no lease.
var matrixWorkers = [][]struct {
	id    int
	lease string
}{{{1, testLease.String()}}, {{2, testLease.String()}, {3, "0"}}}

// runDAP: a debugpy release, debugged from VS Code's child sessions.
func (m *matrixRun) runDAP(t testing.TB, ctx context.Context) {
	m.proxy = startFaultProxy(t, ctx, "--root", filepath.Dir(m.script))
	ide := vscodeIDE(t, filepath.Dir(m.script))
	ide.SetBreakpoints(m.script, m.line)
	host, port, _ := net.SplitHostPort(m.proxy.IDE)
	if _, err := ide.Attach(ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
		"request": "attach", "connect": map[string]any{"host": host, "port": port}, "justMyCode": false}); err != nil {
		t.Fatal(err)
	}
	stops := map[int]*vscodeclient.Stop{}
	var ws []*worker
	for _, batch := range matrixWorkers {
		for _, wl := range batch {
			ws = append(ws, m.worker(t, ctx, wl.id, wl.lease))
		}
		for range batch {
			var st *vscodeclient.Stop
			select {
			case st = <-ide.Stops():
			case <-time.After(60 * time.Second):
				t.Fatalf("VS Code showed %d stops in 60 s, want %d", len(stops), len(ws))
			}
			if st.Err != nil {
				t.Fatalf("VS Code could not show a stop: %v", st.Err)
			}
			if top := st.Top(); top.Source == nil || top.Source.Path != m.script || top.Line != m.line {
				t.Fatalf("a worker stopped at %+v, want %s:%d", top, m.script, m.line)
			}
			// Which worker stopped is in its own locals: each computes values of its own.
			id, _ := strconv.Atoi(st.Locals["worker_id"])
			if id < 1 || id > len(ws) || stops[id] != nil || !matrixValue(st.Locals["value"], id*1000) {
				t.Fatalf("a stop shows worker_id=%q value=%q; want one stop of each of workers 1..%d, with value = worker_id·1000",
					st.Locals["worker_id"], st.Locals["value"], len(ws))
			}
			stops[id] = st
		}
		for _, w := range ws[len(ws)-len(batch):] {
			m.attached(t, ctx, w)
		}
	}
	clearLeavingListOut(t, ctx, ide, m.script)
	if err := stops[1].Session.Continue(ctx, stops[1].Event.ThreadId); err != nil {
		t.Fatalf("continue worker 1: %v", err)
	}
	m.afterStops(t, ctx, ws)
}

// clearLeavingListOut clears path's breakpoints in every open session,
// as VS Code does, but the way DAP lets a client say it and go-dap's
// clients (sparkdap's demo among them) do: with no breakpoints list at
// all. pydevd before debugpy 1.8.8 ended a worker's session on a request
// without the list, unless the proxy filled it in.
func clearLeavingListOut(t testing.TB, ctx context.Context, ide *vscodeclient.IDE, path string) {
	t.Helper()
	ide.SetBreakpoints(path)
	for _, s := range ide.Sessions() {
		if s.Ended() {
			continue
		}
		if _, err := s.Client.SetBreakpoints(ctx, path); err != nil {
			t.Fatalf("clearing the breakpoints of %s in session %q: %v", path, s.Name, err)
		}
	}
}

// runPyCharm: a pydevd-pycharm build, debugged from the PyCharm double
// through `serve --ide-kind pycharm`.
func (m *matrixRun) runPyCharm(t testing.TB, ctx context.Context) {
	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	m.proxy = startFaultProxy(t, ctx, "--ide-kind", "pycharm", "--pycharm", ide.Addr(), "--root", filepath.Dir(m.script))
	var ws []*worker
	threads := map[int]string{} // worker id → its stopped thread
	for i, batch := range matrixWorkers {
		for _, wl := range batch {
			ws = append(ws, m.worker(t, ctx, wl.id, wl.lease))
		}
		if i == 0 {
			accept, cancel := context.WithTimeout(ctx, 60*time.Second)
			err := ide.Accept(accept)
			cancel()
			if err != nil {
				t.Fatalf("serve never connected to the PyCharm double: %v", err)
			}
			// The worker's handshake waits for PyCharm's.
			if _, err := ide.Start(ctx, pycharmtest.Breakpoint{File: m.script, Line: m.line, Func: "compute"}); err != nil {
				t.Fatalf("handshake: %v", err)
			}
		}
		for range batch {
			wait, cancel := context.WithTimeout(ctx, 60*time.Second)
			suspend, err := ide.WaitFor(wait, func(msg pycharm.Message) bool { return msg.ID == pycharm.CmdThreadSuspend })
			cancel()
			if err != nil {
				t.Fatalf("PyCharm saw %d suspends, want %d: %v", len(threads), len(ws), err)
			}
			ths, _, err := pycharmtest.ParseXML(suspend.Payload)
			if err != nil || len(ths) != 1 || len(ths[0].Frames) == 0 {
				t.Fatalf("suspend payload: %v %+v", err, ths)
			}
			th := ths[0]
			id := 0
			pid, _ := pycharm.ThreadPID(th.ID)
			for _, w := range ws {
				if int64(w.PID) == pid {
					id = w.ID
				}
			}
			if id == 0 || threads[id] != "" {
				t.Fatalf("a suspend of pid %d: want one of each worker's %v", pid, ws)
			}
			threads[id] = th.ID
			top := th.Frames[0]
			if top.File != m.script || top.Line != m.line {
				t.Fatalf("worker %d suspended at %s:%d, want %s:%d", id, top.File, top.Line, m.script, m.line)
			}
			frame, err := ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0")
			if err != nil {
				t.Fatalf("worker %d's frame: %v", id, err)
			}
			_, vars, err := pycharmtest.ParseXML(frame.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range vars {
				got[v.Name] = v.Value
			}
			if !matrixValue(got["worker_id"], id) || !matrixValue(got["value"], id*1000) {
				t.Errorf("worker %d's frame shows %v, want worker_id=%d value=%d", id, got, id, id*1000)
			}
		}
		for _, w := range ws[len(ws)-len(batch):] {
			m.attached(t, ctx, w)
		}
	}
	if err := ide.RemoveBreakpoint(m.script, m.line); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Send(pycharm.CmdThreadRun, threads[1]); err != nil {
		t.Fatal(err)
	}
	m.afterStops(t, ctx, ws)
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
}

// TestMatrixSpark: the oldest and newest debugger of each range debug a
// real local-mode PySpark job, the executors loading it from the matrix
// directory that spark-submit's PYTHONPATH names (Spark's local workers
// inherit it), not the copy in site-packages: a stop with the task's real
// values, the breakpoint cleared, and the job's plain result.
func TestMatrixSpark(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job per debugger")
	for _, tt := range []struct{ name, version string }{
		{"debugpy", "1.6.7"},
		{"debugpy", "1.8.22"},
		{"pydevd-pycharm", "253.17525.96"},
		{"pydevd-pycharm", "263.7307.50"},
	} {
		t.Run(tt.name+"-"+tt.version, func(t *testing.T) {
			// Each debugger's run has its own serve, IDE, job and
			// files: they run side by side, most of each being a JVM
			// and Python workers starting.
			t.Parallel()
			d := matrixDebuggerNamed(t, tt.name, tt.version)
			if d.pycharm() {
				matrixSparkPyCharm(t, d)
			} else {
				matrixSparkDAP(t, d)
			}
		})
	}
}

// checkLoadedFrom fails unless file, a debugger module's __file__ on the
// executor as the debugger shows it, is inside d's directory.
func checkLoadedFrom(t testing.TB, d matrixDebugger, file string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	file = strings.Trim(strings.TrimPrefix(file, "str: "), `'"`)
	if real, err := filepath.EvalSymlinks(file); err == nil {
		file = real
	}
	if !strings.HasPrefix(file, dir+string(filepath.Separator)) {
		t.Errorf("the executor's debugger is %s, not %s's copy in %s", file, d, dir)
	}
}

// matrixSparkDAP: the loans job, stopped in loanlib.py from VS Code.
func matrixSparkDAP(t testing.TB, d matrixDebugger) {
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	l := newLoansLayout(t)
	line := testenv.MarkedLine(t, l.srcLib, "loanlib-payment")
	p := startProxy(t, ctx, "--root", l.src)
	ide := vscodeIDE(t, l.src)
	ide.SetBreakpoints(l.srcLib, line)
	host, port, _ := net.SplitHostPort(p.IDE)
	if _, err := ide.Attach(ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
		"request": "attach", "connect": map[string]any{"host": host, "port": port}, "justMyCode": false}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.json")
	job := startSpark(t, ctx, l.ship, []string{"SPARKDAP_TOKEN=" + p.Token, "PYTHONPATH=" + d.dir}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "0", "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--py-files", l.shipLib, l.shipMain, "--output", out)
	var st *vscodeclient.Stop
	select {
	case st = <-ide.Stops():
	case <-job.done:
		t.Fatalf("the job ended (%v) without stopping at loanlib.py:%d", job.err, line)
	case <-ctx.Done():
		t.Fatal("VS Code showed no stop")
	}
	if st.Err != nil {
		t.Fatalf("VS Code could not show the stop: %v", st.Err)
	}
	if top := st.Top(); top.Source == nil || top.Source.Path != l.srcLib || top.Line != line {
		t.Fatalf("stopped at %+v, want the developer's %s:%d", top, l.srcLib, line)
	}
	if !strings.Contains(st.Thread, "partition 0 · stage ") {
		t.Errorf("thread %q does not show the task label of partition 0", st.Thread)
	}
	n, errN := strconv.Atoi(st.Locals["n"])
	years, errY := strconv.Atoi(st.Locals["years"])
	if errN != nil || errY != nil || n != 12*years {
		t.Errorf("locals n = %q, years = %q: want n = 12·years", st.Locals["n"], st.Locals["years"])
	}
	r, err := st.Session.Client.Evaluate(ctx, st.Top().Id, "__import__('debugpy').__file__")
	if err != nil {
		t.Fatalf("evaluate debugpy.__file__: %v", err)
	}
	checkLoadedFrom(t, d, r.Result)
	clearLeavingListOut(t, ctx, ide, l.srcLib)
	if err := st.Session.Continue(ctx, st.Event.ThreadId); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	got, want := readJSON(t, out), readJSON(t, filepath.Join("..", "workerwrap", "testdata", "loans.want.json"))
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("job result:\n%s\nwant (plain run):\n%s", g, w)
	}
}

// matrixSparkPyCharm: testdata/pycharm's job, suspended in pcmath.py from
// the PyCharm double.
func matrixSparkPyCharm(t testing.TB, d matrixDebugger) {
	ctx := testContext(t, 5*time.Minute)
	// spark-submit, and through it Spark's local workers, inherit it (a
	// later PYTHONPATH in an exec.Cmd's Env replaces the run's own).
	j := startPyCharmRunEnv(t, ctx, []string{"PYTHONPATH=" + d.dir}, "local[2]", "1", "pcjob.py", nil, nil)
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	th := j.nextSuspend(t, ctx)
	top := th.Frames[0]
	if top.File != j.localMath || top.Line != j.line {
		t.Fatalf("suspended at %s:%d, want the local path %s:%d", top.File, top.Line, j.localMath, j.line)
	}
	if name := j.ide.ThreadName(th.ID); !strings.Contains(name, "partition 1") {
		t.Errorf("PyCharm shows the thread as %q, want partition 1's label", name)
	}
	frame, err := j.ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0")
	if err != nil {
		t.Fatalf("get frame: %v", err)
	}
	_, vars, err := pycharmtest.ParseXML(frame.Payload)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	// Partition 1 holds 20..39: the first element to stop is 20.
	if !matrixValue(got["factor"], 2) || !matrixValue(got["x"], 20) {
		t.Errorf("frame variables %v: want x = 20 and factor = 2", got)
	}
	out, errOut, err := j.ide.ConsoleExec(ctx, th.ID, top.ID, "print(__import__('pydevd_pycharm').__file__)")
	if err != nil || errOut != "" {
		t.Fatalf("console: stdout %q stderr %q err %v", out, errOut, err)
	}
	// The console's greeting comes first; the printed path is the last line.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	checkLoadedFrom(t, d, lines[len(lines)-1])
	if err := j.ide.RemoveBreakpoint(j.localMath, j.line); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)
}
