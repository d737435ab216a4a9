package pycharm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/pycharm"
)

// Through the control protocol, the PyCharm front end resumes a stopped
// worker (the worker and PyCharm both hear its thread run) and every
// stopped one; it names running workers' pids; pause and detach, which
// PyCharm's one session cannot show, answer "unsupported".
func TestSteerThroughControl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	w, tid := suspendWorker(t, ctx, px, ide, 411)

	for _, tc := range []struct {
		req  control.Request
		code string
	}{
		{control.Request{Op: control.OpPause, Executor: 411}, control.CodeUnsupported},
		{control.Request{Op: control.OpDetach, Executor: 411}, control.CodeUnsupported},
		{control.Request{Op: control.OpContinue, Executor: 999}, control.CodeUnknownExecutor},
	} {
		if ans, err := control.Ask(ctx, px, tc.req); err != nil || ans.Code != tc.code {
			t.Errorf("%s %d: %+v, %v; want code %s", tc.req.Op, tc.req.Executor, ans, err, tc.code)
		}
	}
	if ans, err := control.Ask(ctx, px, control.Request{Op: control.OpContinue, Executor: 411}); err != nil || ans.Error != "" {
		t.Fatalf("continue: %+v, %v", ans, err)
	}
	if m := w.waitFor(t, pycharm.CmdThreadRun); m.Payload != tid {
		t.Fatalf("worker resumed %q, want %q", m.Payload, tid)
	}
	run, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadRun })
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _ := strings.Cut(pycharm.PyUnquote(run.Payload), "\t"); id != tid {
		t.Fatalf("PyCharm heard %q run, want %q", run.Payload, tid)
	}
	if st := px.Stopped(); len(st) != 0 {
		t.Fatalf("still listed as stopped: %+v", st)
	}
	if ans, _ := control.Ask(ctx, px, control.Request{Op: control.OpContinue, Executor: 411}); ans.Code != control.CodeNotStopped {
		t.Errorf("continue of a running worker: %+v, want not-stopped", ans)
	}
	if ans, err := control.Ask(ctx, px, control.Request{Op: control.OpContinueAll}); err != nil || ans.Sent != 0 {
		t.Errorf("continue-all with nothing stopped: %+v, %v", ans, err)
	}
	if ids := px.Sessions(); len(ids) != 1 {
		t.Errorf("sessions %v, want worker 411's", ids)
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
}
