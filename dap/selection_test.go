package dap

import (
	"context"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

// A worker's watch connection outlives the pydevd handshake the proxy
// starts on every executor connection, gets each new selection at once,
// and its reports make the worker listed with its task; it holds no
// session: the one session slot stays free. Once gone, it is finished.
func TestWatchFollowsSelectionAndListsWorker(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxSessions = 1; c.HandshakeTimeout = 300 * time.Millisecond })
	addr := p.srv.ExecutorAddr().String()
	f, err := watchtest.Dial(addr, testToken, admission.TaskInfo{ExecutorID: "3", Host: "node-3", PID: 41})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if sel, err := f.Next(5 * time.Second); err != nil || sel != nil {
		t.Fatalf("first selection %v, %v; want null (as submitted)", sel, err)
	}
	if err := f.Task(4, 37, 0, 912, false); err != nil {
		t.Fatal(err)
	}
	// Past the handshake timeout: the connection must still be served.
	time.Sleep(3 * 300 * time.Millisecond)
	want := selection.Selection{Partitions: []int64{37}, Stages: []int64{4}, SampleRate: 1}
	ans := controlAnswer(t, p.hub, control.Request{Op: control.OpSelect, Selection: &want})
	if ans.Error != "" || ans.Sent != 1 {
		t.Fatalf("select: %+v", ans)
	}
	sel, err := f.Next(5 * time.Second)
	if err != nil || sel == nil || sel.String() != want.String() {
		t.Fatalf("pushed selection %v, %v; want %v", sel, err, want)
	}
	waitKnown(t, p.hub, func(ws []control.KnownWorker) bool {
		return len(ws) == 1 && ws[0].ExecutorID == "3" && ws[0].Host == "node-3" && ws[0].PID == 41 &&
			ws[0].Running && ws[0].Task != nil && ws[0].Task.Stage == 4 && ws[0].Task.Partition == 37 && ws[0].Tasks == 1
	})
	if err := f.Idle(); err != nil {
		t.Fatal(err)
	}
	waitKnown(t, p.hub, func(ws []control.KnownWorker) bool {
		return len(ws) == 1 && !ws[0].Running && ws[0].Task != nil && ws[0].Task.Partition == 37
	})
	if got := sayHello(t, addr, map[string]any{"token": testToken, "pid": 42}); got != "OK" {
		t.Errorf("a debugging worker's hello beside the watch: %q, want OK (the watch holds no session)", got)
	}
	f.Close()
	// Gone, it is listed as finished, with its last task.
	waitKnown(t, p.hub, func(ws []control.KnownWorker) bool {
		return len(ws) == 1 && ws[0].State == control.StateFinished && ws[0].PID == 41 && ws[0].Task != nil && ws[0].Task.Partition == 37
	})
}

// A watch hello with the wrong token is refused like any hello.
func TestWatchNeedsTheToken(t *testing.T) {
	p := startProxy(t, nil)
	_, err := watchtest.Dial(p.srv.ExecutorAddr().String(), "wrong", admission.TaskInfo{PID: 7})
	if err == nil {
		t.Fatal("a watch hello with the wrong token was accepted")
	}
	if ws := p.hub.Board().Workers(); len(ws) != 0 {
		t.Errorf("refused watcher listed: %+v", ws)
	}
}

func controlAnswer(t *testing.T, h *Hub, req control.Request) control.Answer {
	t.Helper()
	ans, err := control.Ask(context.Background(), h, req)
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

func waitKnown(t *testing.T, h *Hub, ok func([]control.KnownWorker) bool) {
	t.Helper()
	var ws []control.KnownWorker
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ans := controlAnswer(t, h, control.Request{Op: control.OpKnownWorkers})
		if ws = ans.Known; ok(ws) {
			return
		}
	}
	t.Fatalf("workers listed: %+v", ws)
}
