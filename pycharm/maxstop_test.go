package pycharm_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
)

// suspendWorker starts worker pid behind px, attaches PyCharm and stops
// the worker's main thread; it returns the worker and its thread id.
func suspendWorker(t *testing.T, ctx context.Context, px *pycharm.Proxy, ide *pycharmtest.Server, pid int64) (*fakeWorker, string) {
	t.Helper()
	w := startWorker(t, ctx, px.Addr().String(), pid, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	tid := "pid_" + strconv.FormatInt(pid, 10) + "_id_1"
	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: q(`<xml><thread name="MainThread" id="` + tid + `" /></xml>`)})
	w.send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: q(`<xml><thread id="` + tid +
		`" stop_reason="111"><frame id="77" name="f" file="/spark/job.py" line="1"></frame></thread></xml>`)})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err != nil {
		t.Fatal(err)
	}
	return w, tid
}

// A worker left stopped with PyCharm attached but idle is resumed after
// MaxStop: PyCharm's console says which worker and why, then hears its
// thread run, and serve's terminal gets the line too.
func TestMaxStopResumesAForgottenStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var summary syncbuf.Buffer
	px, ide := startProxy(t, ctx, pycharm.Config{MaxStop: 100 * time.Millisecond, Summary: &summary})
	w, tid := suspendWorker(t, ctx, px, ide, 401)
	if m := w.waitFor(t, pycharm.CmdThreadRun); m.Payload != tid {
		t.Fatalf("worker resumed %q, want %q", m.Payload, tid)
	}
	out, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdWriteToConsole })
	if err != nil {
		t.Fatal(err)
	}
	if s := pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)); !strings.Contains(s, "pid 401") || !strings.Contains(s, "--max-stop") {
		t.Fatalf("console line %q: want the worker and --max-stop named", s)
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
	if s := summary.String(); !strings.Contains(s, "resumed: stopped") {
		t.Fatalf("serve's terminal was not told: %q", s)
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
}

// The clock restarts with each command PyCharm sends about the stopped
// worker.
func TestMaxStopClockRestartsOnCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var clock atomic.Int64
	px, ide := startProxy(t, ctx, pycharm.Config{MaxStop: 30 * time.Minute})
	pycharm.SetClock(px, func() time.Time { return time.Unix(0, clock.Load()) })
	w, tid := suspendWorker(t, ctx, px, ide, 402)
	check := func(at time.Duration, wantStopped bool) {
		t.Helper()
		clock.Store(int64(at))
		pycharm.CheckMaxStop(px, 402)
		if stopped := len(px.Stopped()) > 0; stopped != wantStopped {
			t.Fatalf("at %s after the stop: stopped %v, want %v", at, stopped, wantStopped)
		}
	}
	check(29*time.Minute, true)
	clock.Store(int64(20 * time.Minute))
	if _, err := ide.Request(ctx, pycharm.CmdGetFrame, tid, "77", "FRAME", "0"); err != nil {
		t.Fatal(err)
	}
	check(49*time.Minute, true)
	check(51*time.Minute, false)
	if m := w.waitFor(t, pycharm.CmdThreadRun); m.Payload != tid {
		t.Fatalf("worker resumed %q, want %q", m.Payload, tid)
	}
}

// A worker that cannot load a debugger says why in its hello: PyCharm's
// console and serve's terminal show it, though no worker ever connected.
func TestWorkerWithoutDebuggerIsToldToPyCharm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var summary syncbuf.Buffer
	px, ide := startProxy(t, ctx, pycharm.Config{Summary: &summary})
	accepted := make(chan error, 1)
	go func() { accepted <- ide.Accept(ctx) }()
	why := "pydevd_pycharm is not installed in /usr/bin/python3 (No module named 'pydevd_pycharm')"
	hc := dialFrom(t, "", px.Addr().String())
	defer hc.Close()
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	reply, _, err := admission.IntroduceHello(hc, "tok", admission.Hello{
		TaskInfo: admission.TaskInfo{PID: 403, Host: "node-2"}, Undebugged: why})
	if err != nil || reply != "REFUSED "+admission.ErrUndebugged.Error() {
		t.Fatalf("hello reply %q, %v", reply, err)
	}
	want := "sparkdap: worker node-2 pid 403 runs undebugged: " + why + "\n"
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	out, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdWriteToConsole })
	if err != nil {
		t.Fatal(err)
	}
	if s := pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)); !strings.Contains(s, `s="`+want+`" ctx="2"`) {
		t.Fatalf("console output %q: want %q on stderr", s, want)
	}
	if s := summary.String(); !strings.Contains(s, "worker node-2 pid 403 runs undebugged: "+why) {
		t.Fatalf("serve's terminal was not told: %q", s)
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
}
