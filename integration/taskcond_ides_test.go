//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/nvimdapclient"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// The tests of this file set one ordinary IDE breakpoint condition naming
// the task through the `sparkdap` builtin and the user's own variable.
// range(40) in four partitions puts 5, 15, 25 and 35 in partitions 0, 1, 2
// and 3: the user's part of the condition is true once in every task, and
// only the task's part leaves exactly one stop, partition 3 at x 35.
// Without the builtin `sparkdap` is an unknown name and the condition is
// never true: pydevd either stops on the condition's error (in the first
// task to reach the line, with another x) or not at all, and each test
// fails either way.
const taskCondition = "sparkdap.partition == 3 and x in (5, 15, 25, 35)"

// taskCondJob copies four_partitions.py into a developer's directory and a
// directory Spark runs it from; it returns both paths and the breakpoint's
// line.
func taskCondJob(t *testing.T) (src, ship string, line int) {
	t.Helper()
	srcDir, shipDir := t.TempDir(), t.TempDir()
	src, ship = filepath.Join(srcDir, "four_partitions.py"), filepath.Join(shipDir, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), src)
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), ship)
	return src, ship, testenv.MarkedLine(t, src, "square")
}

// startTaskCondSpark submits the job through the proxy on local[2].
func startTaskCondSpark(t *testing.T, ctx context.Context, p *proxy, ship string) (*sparkRun, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	r := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--", "--master", "local[2]", "--conf", "spark.ui.enabled=false", ship, out)
	return r, out
}

// checkTaskCondStop checks a stop of a DAP client: in partition 3 by the
// worker's own TaskContext and by the sparkdap builtin, with x 35.
func checkTaskCondStop(t *testing.T, ctx context.Context, c *dapclient.Client, frameID int, x string) {
	t.Helper()
	if x != "35" {
		t.Errorf("stopped with x = %q, want 35 (partition 3's only x the condition takes)", x)
	}
	if _, partition := runningTask(t, ctx, c, frameID); partition != "3" {
		t.Errorf("stopped in partition %s (TaskContext), want 3", partition)
	}
	if res, err := c.Evaluate(ctx, frameID, "sparkdap.partition"); err != nil || res.Result != "3" {
		t.Errorf("evaluate sparkdap.partition at the stop = %+v (%v), want 3", res, err)
	}
}

// checkTaskCondResult: the job's result is the plain run's.
func checkTaskCondResult(t *testing.T, out string) {
	t.Helper()
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want the plain run's 20540", got)
	}
}

// TestSparkVSCodeTaskCondition: VS Code (testkit/vscodeclient: the
// requests of the recorded sessions, a child session per stopped worker)
// with the breakpoint's condition taskCondition in every session's
// setBreakpoints, as the editor's "Edit Condition…" makes VS Code send it.
// Of the forty
// elements in four tasks, two at a time, it stops once: in partition 3 at
// x 35, shown in a child session. Continued, the job ends with the plain
// run's result: nothing else stopped, or the job could not have ended.
func TestSparkVSCodeTaskCondition(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	src, ship, line := taskCondJob(t)
	p := startProxy(t, ctx, "--root", filepath.Dir(src))
	ide := vscodeIDE(t, filepath.Dir(src))
	ide.SetConditionalBreakpoint(src, line, taskCondition)
	host, port, _ := net.SplitHostPort(p.IDE)
	root, err := ide.Attach(ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
		"request": "attach", "connect": map[string]any{"host": host, "port": port}, "justMyCode": false})
	if err != nil {
		t.Fatal(err)
	}
	job, out := startTaskCondSpark(t, ctx, p, ship)

	var st *vscodeclient.Stop
	select {
	case st = <-ide.Stops():
	case <-job.done:
		t.Fatalf("the job ended (%v) without stopping at the conditional breakpoint", job.err)
	case <-ctx.Done():
		t.Fatal("VS Code showed no stop")
	}
	if st.Err != nil {
		t.Fatalf("VS Code could not show the stop: %v", st.Err)
	}
	if top := st.Top(); top.Source == nil || top.Source.Path != src || top.Line != line {
		t.Fatalf("stopped at %+v, want the developer's %s:%d", top, src, line)
	}
	if st.Session.Parent != root {
		t.Errorf("the stop was shown in %q, not in a child session of the root", st.Session.Name)
	}
	if !strings.Contains(st.Session.Name+" "+st.Thread, "partition 3") {
		t.Errorf("VS Code shows the stop as session %q, thread %q: no partition 3", st.Session.Name, st.Thread)
	}
	checkTaskCondStop(t, ctx, st.Session.Client, st.Top().Id, st.Locals["x"])

	if err := st.Session.Continue(ctx, st.Event.ThreadId); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	checkTaskCondResult(t, out)
	select {
	case other := <-ide.Stops():
		t.Errorf("a second stop, in %q at %+v with locals %v", other.Session.Name, other.Top(), other.Locals)
	default:
	}
	if sent := root.Disconnect(); sent == nil {
		t.Errorf("the root session was already shut")
	}
	select {
	case <-root.Done():
	case <-time.After(10 * time.Second):
		t.Errorf("the root session still open 10 s after Disconnect")
	}
}

// nvimSetBreakpoints is nvim-dap's setBreakpoints for one file whose one
// breakpoint has a condition (lua/dap/session.lua: the breakpoint trimmed
// to line, column, condition, hitCondition, logMessage, nil ones absent;
// lines; sourceModified false).
func nvimSetBreakpoints(ctx context.Context, c *dapclient.Client, path string, line int, condition string) error {
	return c.Call(ctx, "setBreakpoints", map[string]any{
		"source":         map[string]any{"path": path, "name": filepath.Base(path)},
		"sourceModified": false,
		"breakpoints":    []any{map[string]any{"line": line, "condition": condition}},
		"lines":          []any{line},
	}, nil)
}

// TestSparkNvimDapTaskCondition: the same job in nvim-dap with child
// sessions (testkit/nvimdapclient follows each session's thread table).
// It stops once, in a child session, with the stopped thread and the
// sessions widget naming partition 3, and x 35; continued, the job ends
// with the plain run's result and no other session ever opened.
func TestSparkNvimDapTaskCondition(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	src, ship, line := taskCondJob(t)
	p := startProxy(t, ctx, "--root", filepath.Dir(src))
	root := dialIDE(t, ctx, p.IDE)
	setBPs := func(ctx context.Context, c *dapclient.Client) error {
		return nvimSetBreakpoints(ctx, c, src, line, taskCondition)
	}
	children := root.FollowChildren(ctx, setBPs)
	if _, err := root.Initialize(ctx, true); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(p.IDE)
	if err := root.Attach(ctx, map[string]any{"type": "sparkdap", "request": "attach", "name": "sparkdap: attach to Spark workers",
		"connect": map[string]any{"host": host, "port": port}, "justMyCode": false}, func(ctx context.Context) error {
		return setBPs(ctx, root)
	}); err != nil {
		t.Fatal(err)
	}
	rootSession := nvimdapclient.New(root, 1, "sparkdap: attach to Spark workers")
	job, out := startTaskCondSpark(t, ctx, p, ship)

	var ch dapclient.Child
	select {
	case ch = <-children:
	case <-job.done:
		t.Fatalf("the job ended (%v) without a child session: no stop", job.err)
	case <-ctx.Done():
		t.Fatal("no child session")
	}
	if ch.Err != nil {
		t.Fatalf("child session: %v", ch.Err)
	}
	t.Cleanup(func() { ch.Client.Close() })
	var cfg struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(ch.Config.Configuration, &cfg)
	nv := nvimdapclient.New(ch.Client, 2, cfg.Name)
	if _, err := ch.Client.WaitEvent(ctx, "stopped", nil); err != nil {
		t.Fatal(err)
	}
	if err := nv.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	th, ok := nv.StoppedThread()
	if !ok {
		t.Fatal("nvim-dap holds no stopped thread")
	}
	if !strings.Contains(th.Name, "partition 3") {
		t.Errorf("nvim-dap holds the stopped thread as %q: no partition 3", th.Name)
	}
	if !strings.Contains(nv.SessionsLine(), "partition 3") {
		t.Errorf("the sessions widget shows %q: no partition 3", nv.SessionsLine())
	}
	frames, err := ch.Client.StackTrace(ctx, th.ID)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v", err)
	}
	top := frames[0]
	if top.Source == nil || top.Source.Path != src || top.Line != line {
		t.Fatalf("stopped at %+v, want the developer's %s:%d", top, src, line)
	}
	x := ""
	if scopes, err := ch.Client.Scopes(ctx, top.Id); err == nil && len(scopes) > 0 {
		vars, err := ch.Client.Variables(ctx, scopes[0].VariablesReference)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vars {
			if v.Name == "x" {
				x = v.Value
			}
		}
	}
	checkTaskCondStop(t, ctx, ch.Client, top.Id, x)

	if err := ch.Client.Continue(ctx, th.ID); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	checkTaskCondResult(t, out)
	select {
	case other := <-children:
		t.Errorf("a second child session (%v): another stop", other.Err)
		if other.Client != nil {
			other.Client.Close()
		}
	default:
	}
	if err := rootSession.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if th, ok := rootSession.StoppedThread(); ok {
		t.Errorf("the root session holds stopped thread %+v", th)
	}
	if err := root.Disconnect(ctx, false); err != nil {
		t.Errorf("disconnect the root: %v", err)
	}
}

// pycharmX matches a pydevd-pycharm value of 35 ("35", "int: 35").
var pycharmX = regexp.MustCompile(`(^|[^0-9])35$`)

// TestPyCharmSparkTaskCondition: PyCharm (testkit/pycharmtest, through
// `serve --ide-kind pycharm`) sends the condition in CMD_SET_BREAK's
// condition field. The job (testdata/pycharm/pcfour.py) doubles 0..39 in
// four partitions with pcmath.scale; it suspends once, in partition 3 at
// x 35, and resumed, the job ends with the plain run's result and no
// other suspend.
func TestPyCharmSparkTaskCondition(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 5*time.Minute)
	j := startPyCharmScript(t, ctx, "local[2]", "0,1,2,3", "pcfour.py")
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale",
		Condition: taskCondition}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	th := j.nextSuspend(t, ctx)
	top := th.Frames[0]
	if top.File != j.localMath || top.Line != j.line {
		t.Errorf("suspended at %s:%d, want the local path %s:%d", top.File, top.Line, j.localMath, j.line)
	}
	if name := j.ide.ThreadName(th.ID); !strings.Contains(name, "partition 3") {
		t.Errorf("PyCharm shows the suspended thread as %q: no partition 3", name)
	}
	frame, err := j.ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0")
	if err != nil {
		t.Fatalf("get frame: %v", err)
	}
	_, vars, err := pycharmtest.ParseXML(frame.Payload)
	if err != nil {
		t.Fatal(err)
	}
	x := ""
	for _, v := range vars {
		if v.Name == "x" {
			x = v.Value
		}
	}
	if !pycharmX.MatchString(x) {
		t.Errorf("suspended with x = %q, want 35 (partition 3's only x the condition takes)", x)
	}
	stdout, stderr, err := j.ide.ConsoleExec(ctx, th.ID, top.ID,
		"print(sparkdap.partition, __import__('pyspark').TaskContext.get().partitionId())")
	// The console's first line may be its banner ("PyDev console: using
	// IPython …"): the printed line is the last.
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if err != nil || strings.TrimSpace(lines[len(lines)-1]) != "3 3" {
		t.Errorf("the Debug Console prints sparkdap.partition and TaskContext's partition as %q (stderr %q, %v), want 3 3", stdout, stderr, err)
	}
	if _, err := j.ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if m, err := j.ide.WaitFor(wait, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err == nil {
		t.Errorf("a second suspend: %s", m)
	}
}
