//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// stop is one stopped event and the worker it turned out to belong to.
type stop struct {
	client   *dapclient.Client
	threadID int
	worker   *worker
}

// inspectStop checks what an IDE would show for a worker stopped on its
// first pass over the breakpoint: the thread is listed (in merged mode,
// named after the worker's pid), the top frame is worker.py at the
// breakpoint line, and both the Locals scope and evaluate show this
// worker's own value. It identifies the worker by evaluating pid.
func inspectStop(t testing.TB, ctx context.Context, c *dapclient.Client, threadID int, byPID map[int]*worker, merged bool) *worker {
	t.Helper()
	threads, err := c.Threads(ctx)
	if err != nil {
		t.Fatalf("threads: %v", err)
	}
	var thread *dap.Thread
	for i := range threads {
		if threads[i].Id == threadID {
			thread = &threads[i]
		}
	}
	if thread == nil {
		t.Fatalf("stopped thread %d not in threads response %+v", threadID, threads)
	}

	frames, err := c.StackTrace(ctx, threadID)
	if err != nil {
		t.Fatalf("stackTrace thread %d: %v", threadID, err)
	}
	if len(frames) == 0 {
		t.Fatalf("stackTrace thread %d: no frames", threadID)
	}
	top := frames[0]
	script := workerScript(t)
	line := testenv.MarkedLine(t, script, "")
	if top.Source == nil || top.Source.Path != script || top.Line != line || top.Name != "compute" {
		t.Fatalf("top frame of thread %d: %+v source %+v; want compute at %s:%d", threadID, top, top.Source, script, line)
	}

	pidEval, err := c.Evaluate(ctx, top.Id, "pid")
	if err != nil {
		t.Fatalf("evaluate pid: %v", err)
	}
	pid, err := strconv.Atoi(pidEval.Result)
	if err != nil {
		t.Fatalf("evaluate pid = %q: %v", pidEval.Result, err)
	}
	w := byPID[pid]
	if w == nil {
		t.Fatalf("thread %d (%q) is in pid %d, which is none of our workers", threadID, thread.Name, pid)
	}
	if merged && !strings.Contains(thread.Name, fmt.Sprintf("pid %d", pid)) {
		t.Fatalf("thread %d name %q does not contain %q", threadID, thread.Name, fmt.Sprintf("pid %d", pid))
	}
	t.Logf("worker %d (pid %d) stopped: thread %d %q", w.ID, pid, threadID, thread.Name)

	scopes, err := c.Scopes(ctx, top.Id)
	if err != nil {
		t.Fatalf("scopes: %v", err)
	}
	locals := -1
	for _, s := range scopes {
		if s.Name == "Locals" {
			locals = s.VariablesReference
		}
	}
	if locals <= 0 {
		t.Fatalf("no Locals scope in %+v", scopes)
	}
	vars, err := c.Variables(ctx, locals)
	if err != nil {
		t.Fatalf("variables: %v", err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	want := strconv.Itoa(w.value(0))
	if got["value"] != want || got["i"] != "0" || got["worker_id"] != strconv.Itoa(w.ID) {
		t.Fatalf("worker %d locals %v; want value=%s i=0 worker_id=%d", w.ID, got, want, w.ID)
	}
	ev, err := c.Evaluate(ctx, top.Id, "value")
	if err != nil {
		t.Fatalf("evaluate value: %v", err)
	}
	if ev.Result != want {
		t.Fatalf("worker %d: evaluate value = %q, want %s", w.ID, ev.Result, want)
	}
	return w
}

func indexByPID(ws []*worker) map[int]*worker {
	m := map[int]*worker{}
	for _, w := range ws {
		m[w.PID] = w
	}
	return m
}

// collectStops waits for n stopped events on c, inspects each, and fails on
// a repeated thread or worker or a stop in a process not in ws.
func collectStops(t testing.TB, ctx context.Context, c *dapclient.Client, ws []*worker, n int, merged bool) []stop {
	t.Helper()
	byPID := indexByPID(ws)
	var stops []stop
	seenThread := map[int]bool{}
	seenWorker := map[int]bool{}
	for range n {
		s, err := c.StoppedEvent(ctx)
		if err != nil {
			t.Fatalf("after %d of %d stops: %v", len(stops), n, err)
		}
		if s.Reason != "breakpoint" {
			t.Fatalf("stopped reason %q, want breakpoint", s.Reason)
		}
		if seenThread[s.ThreadId] {
			t.Fatalf("two stopped events for threadId %d", s.ThreadId)
		}
		seenThread[s.ThreadId] = true
		w := inspectStop(t, ctx, c, s.ThreadId, byPID, merged)
		if seenWorker[w.ID] {
			t.Fatalf("worker %d stopped twice on its first iteration", w.ID)
		}
		seenWorker[w.ID] = true
		stops = append(stops, stop{client: c, threadID: s.ThreadId, worker: w})
	}
	return stops
}

func countEvents(c *dapclient.Client, name string) int {
	n := 0
	for _, ev := range c.Events() {
		if ev.Event == name {
			n++
		}
	}
	return n
}

// attachMerged attaches c as an IDE without child-session support, setting
// the worker.py breakpoint during configuration when withBreakpoint.
func attachMerged(t testing.TB, ctx context.Context, c *dapclient.Client, withBreakpoint bool) {
	t.Helper()
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	err := c.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		if !withBreakpoint {
			return nil
		}
		return setWorkerBreakpoint(ctx, c, workerScript(t), testenv.MarkedLine(t, workerScript(t), ""))
	})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
}

func setWorkerBreakpoint(ctx context.Context, c *dapclient.Client, script string, line int) error {
	bps, err := c.SetBreakpoints(ctx, script, line)
	if err != nil {
		return err
	}
	if len(bps) != 1 {
		return fmt.Errorf("setBreakpoints %s:%d answered %d breakpoints: %+v", script, line, len(bps), bps)
	}
	return nil
}

// TestMergedModeBreakpointReplayedToNewExecutors: the IDE sets a breakpoint
// before any executor exists; each executor that connects later gets it
// and stops, and the IDE sees all of them as threads of one session.
func TestMergedModeBreakpointReplayedToNewExecutors(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 90*time.Second)
	p := startProxy(t, ctx)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, true)

	var ws []*worker
	for id := 1; id <= 3; id++ {
		ws = append(ws, startWorker(t, ctx, p, id, workerOpts{}))
	}
	stops := collectStops(t, ctx, c, ws, len(ws), true)

	// Removing the breakpoint must reach every executor, or the workers
	// stop again on their next iteration and never finish.
	if _, err := c.SetBreakpoints(ctx, workerScript(t)); err != nil {
		t.Fatalf("clearing breakpoints: %v", err)
	}
	for _, s := range stops {
		if err := c.Continue(ctx, s.threadID); err != nil {
			t.Fatalf("continue worker %d (thread %d): %v", s.worker.ID, s.threadID, err)
		}
	}
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
	if n := countEvents(c, "stopped"); n != len(ws) {
		t.Fatalf("%d stopped events, want %d (one per worker)", n, len(ws))
	}
}

// TestMergedModeBreakpointFansOutToConnectedExecutors: executors are
// already connected (and running) when the IDE sets the breakpoint.
func TestMergedModeBreakpointFansOutToConnectedExecutors(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 90*time.Second)
	p := startProxy(t, ctx)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, false)

	gate := filepath.Join(t.TempDir(), "go")
	var ws []*worker
	for id := 1; id <= 2; id++ {
		ws = append(ws, startWorker(t, ctx, p, id, workerOpts{gate: gate}))
	}
	// CONNECTED means debugpy.connect returned, i.e. the proxy finished
	// the executor handshake (configurationDone) on its own.
	for _, w := range ws {
		w.waitLine(t, ctx, "CONNECTED")
	}
	script := workerScript(t)
	if err := setWorkerBreakpoint(ctx, c, script, testenv.MarkedLine(t, script, "")); err != nil {
		t.Fatalf("breakpoint after executors connected: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stops := collectStops(t, ctx, c, ws, len(ws), true)
	if _, err := c.SetBreakpoints(ctx, script); err != nil {
		t.Fatalf("clearing breakpoints: %v", err)
	}
	for _, s := range stops {
		if err := c.Continue(ctx, s.threadID); err != nil {
			t.Fatalf("continue worker %d: %v", s.worker.ID, err)
		}
	}
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
}

// TestChildSessionPerExecutor: an IDE that supports startDebugging gets
// one child session per executor, as VS Code does with debugpy
// subprocesses, and the executor's stop is reported on its child only.
func TestChildSessionPerExecutor(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 90*time.Second)
	p := startProxy(t, ctx)
	script := workerScript(t)
	line := testenv.MarkedLine(t, script, "")

	root := dialIDE(t, ctx, p.IDE)
	children := root.FollowChildren(ctx, func(ctx context.Context, child *dapclient.Client) error {
		traceClient(t, child, "child")
		// VS Code sends every breakpoint to every session.
		return setWorkerBreakpoint(ctx, child, script, line)
	})
	if _, err := root.Initialize(ctx, true); err != nil {
		t.Fatalf("initialize root: %v", err)
	}
	if err := root.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		return setWorkerBreakpoint(ctx, root, script, line)
	}); err != nil {
		t.Fatalf("attach root: %v", err)
	}

	var ws []*worker
	for id := 1; id <= 3; id++ {
		ws = append(ws, startWorker(t, ctx, p, id, workerOpts{}))
	}
	var kids []*dapclient.Client
	executors := map[string]bool{}
	for range ws {
		var ch dapclient.Child
		select {
		case ch = <-children:
		case <-ctx.Done():
			t.Fatalf("got %d startDebugging requests for %d workers: %v", len(kids), len(ws), ctx.Err())
		}
		if ch.Err != nil {
			t.Fatalf("child session: %v", ch.Err)
		}
		t.Cleanup(func() { ch.Client.Close() })
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(ch.Config.Configuration, &cfg); err != nil {
			t.Fatalf("startDebugging configuration: %v", err)
		}
		exec, ok := cfg["sparkdapExecutor"]
		if !ok {
			t.Fatalf("startDebugging configuration lacks sparkdapExecutor: %s", ch.Config.Configuration)
		}
		if executors[string(exec)] {
			t.Fatalf("two startDebugging requests for executor %s", exec)
		}
		executors[string(exec)] = true
		kids = append(kids, ch.Client)
	}

	var stops []stop
	seen := map[int]bool{}
	for _, kid := range kids {
		s := collectStops(t, ctx, kid, ws, 1, false)
		if seen[s[0].worker.ID] {
			t.Fatalf("worker %d stopped in two child sessions", s[0].worker.ID)
		}
		seen[s[0].worker.ID] = true
		stops = append(stops, s...)
	}
	for _, c := range append([]*dapclient.Client{root}, kids...) {
		if _, err := c.SetBreakpoints(ctx, script); err != nil {
			t.Fatalf("clearing breakpoints: %v", err)
		}
	}
	for _, s := range stops {
		if err := s.client.Continue(ctx, s.threadID); err != nil {
			t.Fatalf("continue worker %d in its child session: %v", s.worker.ID, err)
		}
	}
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
	if n := countEvents(root, "stopped"); n != 0 {
		t.Fatalf("root session got %d stopped events; stops belong to child sessions", n)
	}
}

var rejectionLog = regexp.MustCompile(`(?i)(wrong|invalid|bad|mismatch|reject|refus|denied|unauthori[sz]ed)[^\n]*token|token[^\n]*(wrong|invalid|mismatch|reject|refus|denied)`)

// TestWrongTokenWorkerRunsUndebugged: a worker with the wrong access token
// is not debugged, but it must not hang either.
func TestWrongTokenWorkerRunsUndebugged(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 90*time.Second)
	p := startProxy(t, ctx)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, true)

	intruder := startWorker(t, ctx, p, 2, workerOpts{token: "not-the-token"})
	intruder.waitSuccess(t, ctx)

	// A worker with the right token stops at the same breakpoint, which
	// shows the breakpoint was live while the intruder ran.
	good := startWorker(t, ctx, p, 1, workerOpts{})
	stops := collectStops(t, ctx, c, []*worker{good}, 1, true)
	if _, err := c.SetBreakpoints(ctx, workerScript(t)); err != nil {
		t.Fatalf("clearing breakpoints: %v", err)
	}
	if err := c.Continue(ctx, stops[0].threadID); err != nil {
		t.Fatal(err)
	}
	good.waitSuccess(t, ctx)

	if n := countEvents(c, "stopped"); n != 1 {
		t.Fatalf("%d stopped events, want 1 (the good worker's only)", n)
	}
	if !rejectionLog.MatchString(p.Log()) {
		t.Fatalf("proxy log does not mention rejecting the token:\n%s", p.Log())
	}
}

// TestWorkersRunWithoutIDE: the proxy completes the executor handshake
// itself, so workers are never blocked waiting for an IDE to attach.
func TestWorkersRunWithoutIDE(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 60*time.Second)
	p := startProxy(t, ctx)
	var ws []*worker
	for id := 1; id <= 2; id++ {
		ws = append(ws, startWorker(t, ctx, p, id, workerOpts{}))
	}
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
}
