package pycharm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/watchtest"
)

// raiseIn has w's thread tid stop at a raised KeyError at /job/udf.py:5,
// as pydevd does: the exception's trace, then the suspend.
func raiseIn(w *fakeWorker, tid string, seq int) {
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	suspend := `<xml><thread id="` + tid + `" stop_reason="137" message="BaseException"><frame id="1" name="lookup" file="/job/udf.py" line="5"></frame></thread></xml>`
	w.send(pycharm.Message{ID: pycharm.CmdSendCurrExceptionTrace, Seq: seq, Payload: q("1\t&lt;class 'KeyError'&gt;\t'missing'\t" + suspend)})
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: seq + 2, Payload: q(suspend)})
}

// TestExceptionsGroupedAcrossWorkers: three workers stop at the same
// KeyError at the same place; PyCharm is shown one suspend, the other two
// are resumed after the hold without PyCharm hearing of them, and the
// group counts three, by the raised type (not the breakpoint's
// BaseException).
func TestExceptionsGroupedAcrossWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{ExceptionHold: 200 * time.Millisecond})
	var ws []*fakeWorker
	for i := range 3 {
		ws = append(ws, startWorker(t, ctx, px.Addr().String(), int64(70+i), int64(i), pathmap.Roots{}))
	}
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		w.waitFor(t, pycharm.CmdRun)
		tid := fmt.Sprintf("pid_%d_id_1", 70+i)
		w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(tid, "MainThread")})
	}
	for i, w := range ws {
		raiseIn(w, fmt.Sprintf("pid_%d_id_1", 70+i), 4)
		if i == 0 {
			if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, w := range ws[1:] {
		tid := fmt.Sprintf("pid_%d_id_1", 71+i)
		if m := w.waitFor(t, pycharm.CmdThreadRun); m.Payload != tid {
			t.Errorf("resumed %q, want %s", m.Payload, tid)
		}
		w.send(pycharm.Message{ID: pycharm.CmdThreadRun, Seq: 8, Payload: tid + "\t-1"})
	}
	want := []selection.ExceptionGroup{{Type: "KeyError", Place: "udf.py:5", Tasks: 3}}
	var got []selection.ExceptionGroup
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = px.Board().Groups(); len(got) == 1 && got[0] == want[0] {
			break
		}
	}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("groups %+v, want %+v", got, want)
	}
	for {
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		m, err := ide.WaitFor(short, func(m pycharm.Message) bool {
			return m.ID == pycharm.CmdThreadSuspend || m.ID == pycharm.CmdThreadRun
		})
		cancelShort()
		if err != nil {
			break
		}
		if !strings.Contains(pycharm.PyUnquote(m.Payload), "pid_70_") {
			t.Errorf("PyCharm heard of a held worker: %v", m)
		}
	}
}

// TestIdleWorkerSaysIdle: a connected worker's watch says its task ended,
// then that it runs a task that is not debugged; PyCharm's thread names
// say so, and its next debugged task names that task again.
func TestIdleWorkerSaysIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	w := startWorker(t, ctx, px.Addr().String(), 79, 2, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	tid := "pid_79_id_1"
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: pycharm.ThreadCreatePayload(tid, "MainThread")})
	watch, err := watchtest.Dial(px.Addr().String(), "tok", admission.TaskInfo{ExecutorID: "1", Host: "node-1", PID: 79})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	named := func(want string) {
		t.Helper()
		var n string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if n = ide.ThreadName(tid); n == want {
				return
			}
		}
		t.Fatalf("PyCharm shows %q, want %q", n, want)
	}
	named("[exec 1 · node-1 · pid 79 · stage 0 · partition 2 · attempt 0] MainThread")
	_ = watch.Task(0, 2, 0, 20, true)
	_ = watch.Idle()
	named("[exec 1 · node-1 · pid 79 · idle · last partition 2 · stage 0] MainThread")
	_ = watch.Task(1, 6, 0, 61, false)
	named("[exec 1 · node-1 · pid 79 · partition 6 · stage 1 · not debugged] MainThread")
	_ = watch.Task(1, 7, 0, 62, true)
	task, _ := json.Marshal(map[string]any{"executorId": "1", "host": "node-1", "pid": 79, "label": "stage 1 · partition 7 · attempt 0"})
	w.send(pycharm.Message{ID: pycharm.CmdSparkdapTask, Payload: pycharm.PyQuote(string(task), `/<>_=" `)})
	named("[exec 1 · node-1 · pid 79 · stage 1 · partition 7 · attempt 0] MainThread")
}
