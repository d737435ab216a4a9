package dap

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

// viewWorker is a worker as the wrapper makes one: its watch connection
// (executor "1", host worker-1) running task stage 2 · partition of pid,
// and its debugger, told the same task.
func (p *testProxy) viewWorker(pid, partition int) *fakePydevd {
	p.t.Helper()
	f := p.executor(pid, nil)
	taskEvent(f, pid, 2, partition)
	w, err := watchtest.Dial(p.srv.ExecutorAddr().String(), testToken, admission.TaskInfo{ExecutorID: "1", Host: "worker-1", PID: int64(pid)})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { w.Close() })
	if _, err := w.Next(5 * time.Second); err != nil {
		p.t.Fatal(err)
	}
	if err := w.Task(2, int64(partition), 0, int64(1000+pid), true); err != nil {
		p.t.Fatal(err)
	}
	return f
}

// executorID is the proxy's id of the executor session of pid.
func (p *testProxy) executorID(pid int64) uint64 {
	p.t.Helper()
	for _, st := range p.hub.Executors() {
		if st.Process.PID == pid {
			return st.ID
		}
	}
	p.t.Fatalf("no executor session of pid %d", pid)
	return 0
}

// viewAsk sends the sparkdap request with args (a control.Request, or
// any JSON object) and returns the answer of a success.
func viewAsk(t *testing.T, c *dapclient.Client, args any) control.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := c.Request(ctx, ControlCommand, args)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatalf("sparkdap %s: %s (body %s)", jsonText(args), resp.Message, resp.Body)
	}
	var ans control.Answer
	if err := json.Unmarshal(resp.Body, &ans); err != nil {
		t.Fatalf("answer %s: %v", resp.Body, err)
	}
	return ans
}

// viewFails sends the sparkdap request with args and checks its error
// response: the message says text, and the body has the control code.
func viewFails(t *testing.T, c *dapclient.Client, args any, code, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := c.Request(ctx, ControlCommand, args)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Code  string `json:"code"`
		Error struct {
			Format   string `json:"format"`
			ShowUser bool   `json:"showUser"`
		} `json:"error"`
	}
	_ = json.Unmarshal(resp.Body, &body)
	if resp.Success || !strings.Contains(resp.Message, text) || body.Code != code || body.Error.Format != resp.Message || body.Error.ShowUser {
		t.Fatalf("sparkdap %s: success %v, message %q, body %s; want a %s error saying %q", jsonText(args), resp.Success, resp.Message, resp.Body, code, text)
	}
}

// workersEvents counts the sparkdapWorkers events c was sent so far.
func workersEvents(c *dapclient.Client) int {
	n := 0
	for _, ev := range c.Events() {
		if ev.Event == WorkersEvent {
			n++
		}
	}
	return n
}

// nextWorkers waits for the next sparkdapWorkers event whose answer ok
// accepts.
func nextWorkers(t *testing.T, c *dapclient.Client, ok func(control.Answer) bool) (control.Answer, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := c.WaitEvent(ctx, WorkersEvent, func(body json.RawMessage) bool {
		var a control.Answer
		return json.Unmarshal(body, &a) == nil && ok(a)
	})
	if err != nil {
		t.Fatalf("%v (events: %d)", err, workersEvents(c))
	}
	var a control.Answer
	_ = json.Unmarshal(ev.Body, &a)
	return a, string(ev.Body)
}

// The root session's sparkdap request is the control protocol: select,
// known-workers, continue, pause, continue-all and detach each do on the
// workers what they say, errors come back with the control code, and
// what the socket refuses is refused.
func TestViewControlRoundTrip(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	ctx := p.ctx
	a, b := p.viewWorker(101, 7), p.viewWorker(202, 8)
	idA, idB := p.executorID(101), p.executorID(202)

	ans := viewAsk(t, c, map[string]any{"op": "select", "selection": map[string]any{"partitions": []int{7}, "stages": []int{2}, "sampleRate": 1}})
	if ans.Sent != 2 || ans.Selection == nil || !slices.Equal(ans.Selection.Partitions, []int64{7}) {
		t.Fatalf("select: %+v", ans)
	}
	waitFor(t, "both workers running, named by their sessions", func() (bool, string) {
		ans := viewAsk(t, c, control.Request{Op: control.OpKnownWorkers})
		ok := len(ans.Known) == 2 && ans.Counts != nil && ans.Counts.Running == 2 && ans.Selection != nil &&
			ans.Known[0].Executor == idA && ans.Known[1].Executor == idB
		return ok, jsonText(ans)
	})
	viewFails(t, c, control.Request{Op: control.OpContinue, Executor: idA}, control.CodeNotStopped, "not stopped")

	a.stop()
	stoppedOn(ctx, t, c)
	ans = viewAsk(t, c, control.Request{Op: control.OpKnownWorkers, MaxRows: 1})
	if len(ans.Known) != 1 || ans.More != 1 || ans.Known[0].State != control.StateStopped || ans.Known[0].Executor != idA || ans.Counts.Stopped != 1 {
		t.Fatalf("known-workers with a stop: %s", jsonText(ans))
	}
	viewAsk(t, c, control.Request{Op: control.OpContinue, Executor: idA})
	a.waitRequest("continue", nil)
	if _, err := c.WaitEvent(ctx, "continued", nil); err != nil {
		t.Fatalf("the IDE was not told the worker runs again: %v", err)
	}

	viewAsk(t, c, control.Request{Op: control.OpPause, Executor: idB})
	b.waitRequest("pause", func(m Message) bool { return m.Arguments()["threadId"] == "*" })
	stoppedOn(ctx, t, c) // the fake reports the pause's stop
	waitFor(t, "the paused worker stopped", func() (bool, string) {
		st := p.hub.Executors()
		return st[1].Stopped, jsonText(st)
	})
	if ans := viewAsk(t, c, control.Request{Op: control.OpContinueAll}); ans.Sent != 1 {
		t.Fatalf("continue-all: %+v, want 1 resumed", ans)
	}
	b.waitRequest("continue", nil)

	a.stop()
	stoppedOn(ctx, t, c)
	viewAsk(t, c, control.Request{Op: control.OpDetach, Executor: idA})
	waitFor(t, "the detached worker resumed", func() (bool, string) { return a.Count("continue") == 2, a.commands() })
	a.stop() // nobody shows it now: resumed at once
	waitFor(t, "a stop of the detached worker resumed unseen", func() (bool, string) { return a.Count("continue") == 3, a.commands() })

	viewFails(t, c, map[string]any{"op": "continue"}, control.CodeBadRequest, "continue needs an executor")
	viewFails(t, c, map[string]any{"op": "workers", "thread": 1}, control.CodeBadRequest, `unknown field "thread"`)
	viewFails(t, c, nil, control.CodeBadRequest, `unknown op ""`)
	viewFails(t, c, control.Request{Op: control.OpPause, Executor: 999}, control.CodeUnknownExecutor, "executor 999")
}

// sparkdapWatch sends the known-workers answer at once, and again after a
// worker stops; after off, nothing more.
func TestViewWatchEvents(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	ctx := p.ctx
	var ok struct {
		Version int `json:"version"`
	}
	if err := c.Call(ctx, WatchCommand, map[string]any{"maxRows": 50}, &ok); err != nil || ok.Version != 1 {
		t.Fatalf("sparkdapWatch: %+v, %v", ok, err)
	}
	first, _ := nextWorkers(t, c, func(control.Answer) bool { return true })
	if first.Counts == nil || first.Counts.Workers != 0 || !first.AsSubmitted {
		t.Fatalf("first event %+v", first)
	}
	f := p.viewWorker(101, 7)
	id := p.executorID(101)
	f.stop()
	stoppedOn(ctx, t, c)
	ev, raw := nextWorkers(t, c, func(a control.Answer) bool { return a.Counts != nil && a.Counts.Stopped == 1 })
	t.Logf("sparkdapWorkers body: %s", raw)
	if k := ev.Known[0]; k.State != control.StateStopped || k.Executor != id || k.Stopped == nil || k.Stopped.Line != 5 ||
		k.Task == nil || k.Task.Partition != 7 || k.Host != "worker-1" || k.PID != 101 {
		t.Errorf("stopped row %s", jsonText(k))
	}

	if err := c.Call(ctx, WatchCommand, map[string]any{"off": true}, nil); err != nil {
		t.Fatal(err)
	}
	n := workersEvents(c)
	none := selection.None()
	controlAnswer(t, p.hub, control.Request{Op: control.OpSelect, Selection: &none})
	controlAnswer(t, p.hub, control.Request{Op: control.OpContinue, Executor: id})
	p.viewWorker(202, 8)
	time.Sleep(4 * watchInterval)
	if got := workersEvents(c); got != n {
		t.Errorf("%d sparkdapWorkers events after off", got-n)
	}
}

// Many changes close together make few events (at most one per
// watchInterval, where each change apart would make one), the last one
// showing the last change; a change that leaves the body as it was sends
// nothing.
func TestViewWatchCoalesces(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	if err := c.Call(p.ctx, WatchCommand, nil, nil); err != nil {
		t.Fatal(err)
	}
	nextWorkers(t, c, func(control.Answer) bool { return true })
	before := workersEvents(c)
	const changes = 30
	start := time.Now()
	for i := range changes {
		sel := selection.Selection{Partitions: []int64{int64(i)}, SampleRate: 1}
		controlAnswer(t, p.hub, control.Request{Op: control.OpSelect, Selection: &sel})
		time.Sleep(watchInterval / 10) // far longer than a build
	}
	elapsed := time.Since(start)
	nextWorkers(t, c, func(a control.Answer) bool {
		return a.Selection != nil && slices.Equal(a.Selection.Partitions, []int64{changes - 1})
	})
	got := workersEvents(c) - before
	if limit := int(elapsed/watchInterval) + 3; got > limit || got >= changes {
		t.Errorf("%d changes in %s made %d events, want at most %d", changes, elapsed, got, limit)
	}
	settled := workersEvents(c)
	same := selection.Selection{Partitions: []int64{changes - 1}, SampleRate: 1}
	controlAnswer(t, p.hub, control.Request{Op: control.OpSelect, Selection: &same})
	time.Sleep(4 * watchInterval)
	if n := workersEvents(c) - settled; n != 0 {
		t.Errorf("%d events with the same body as the last one", n)
	}
}

// A child session refuses both requests; the root serves them beside it,
// its pause of a running worker lists that worker as a child session,
// and its detach ends a worker's child session alone.
func TestViewChildSessionRefuses(t *testing.T) {
	p := startProxy(t, nil)
	root, children := p.childRoot(nil, nil)
	f := p.viewWorker(101, 7)
	f.stop()
	child := p.nextChild(children)
	for _, cmd := range []string{ControlCommand, WatchCommand} {
		resp, err := child.Client.Request(p.ctx, cmd, map[string]any{"op": "selection"})
		if err != nil || resp.Success || !strings.Contains(resp.Message, "child session does not serve it") {
			t.Errorf("%s in a child session: %+v, %v; want a refusal", cmd, resp, err)
		}
	}
	if ans := viewAsk(t, root, control.Request{Op: control.OpKnownWorkers}); ans.Counts == nil || ans.Counts.Stopped != 1 {
		t.Fatalf("known-workers on the root: %s", jsonText(ans))
	}

	g := p.viewWorker(202, 8)
	viewAsk(t, root, control.Request{Op: control.OpPause, Executor: p.executorID(202)})
	g.waitRequest("pause", nil)
	if paused := p.nextChild(children); !strings.Contains(string(paused.Config.Configuration), "pid 202") {
		t.Errorf("the paused worker's session is %s", paused.Config.Configuration)
	}

	viewAsk(t, root, control.Request{Op: control.OpDetach, Executor: p.executorID(101)})
	if _, err := child.Client.WaitEvent(p.ctx, "terminated", nil); err != nil {
		t.Fatalf("the detached worker's session was not ended: %v", err)
	}
	f.waitRequest("continue", nil)
	if ans := viewAsk(t, root, control.Request{Op: control.OpSelection}); !ans.AsSubmitted {
		t.Errorf("the root after a detach: %+v", ans)
	}
}

// A client refused at attach (a wrong IDE token) or not attached gets no
// sparkdapWorkers event, while the root attached with the token does.
func TestViewWatchNeedsAttach(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.IDEToken = testIDEToken })
	ctx := p.ctx
	dial := func() *dapclient.Client {
		c, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Initialize(ctx, false); err != nil {
			t.Fatal(err)
		}
		return c
	}
	wrong := dial()
	// The watch comes right behind the refused attach, before its answer.
	if _, err := wrong.Send(ctx, "attach", map[string]any{IDETokenArg: "guess"}); err != nil {
		t.Fatal(err)
	}
	_, _ = wrong.Send(ctx, WatchCommand, nil)
	waitClosedByProxy(t, wrong)

	unattached := dial()
	resp, err := unattached.Request(ctx, WatchCommand, nil)
	if err != nil || resp.Success || !strings.Contains(resp.Message, "before attach") {
		t.Fatalf("sparkdapWatch before attach: %+v, %v", resp, err)
	}
	resp, err = unattached.Request(ctx, ControlCommand, map[string]any{"op": "known-workers"})
	if err != nil || resp.Success || !strings.Contains(resp.Message, "before attach") {
		t.Fatalf("sparkdap before attach: %+v, %v", resp, err)
	}

	good, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	if _, err := good.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := good.Attach(ctx, map[string]any{IDETokenArg: testIDEToken}, nil); err != nil {
		t.Fatal(err)
	}
	if err := good.Call(ctx, WatchCommand, nil, nil); err != nil {
		t.Fatal(err)
	}
	f := p.viewWorker(101, 7)
	f.stop()
	nextWorkers(t, good, func(a control.Answer) bool { return a.Counts != nil && a.Counts.Stopped == 1 })
	for name, c := range map[string]*dapclient.Client{"refused at attach": wrong, "not attached": unattached} {
		if n := workersEvents(c); n != 0 {
			t.Errorf("a client %s got %d sparkdapWorkers events", name, n)
		}
	}
}

// The root's leaving ends its subscription, timer and all: nothing is
// built for a session that is gone.
func TestViewWatchEndsWithRoot(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	if err := c.Call(p.ctx, WatchCommand, nil, nil); err != nil {
		t.Fatal(err)
	}
	nextWorkers(t, c, func(control.Answer) bool { return true })
	none := selection.None()
	controlAnswer(t, p.hub, control.Request{Op: control.OpSelect, Selection: &none}) // a build armed
	if err := c.Disconnect(p.ctx, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the subscription ended with the root", func() (bool, string) {
		p.hub.watch.mu.Lock()
		defer p.hub.watch.mu.Unlock()
		return p.hub.watch.sub == nil && !p.hub.watch.on.Load(), "still subscribed"
	})
}
