package pycharm_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
)

// TestLossReportToldToPyCharm: a worker whose output could not all reach
// the proxy before its task ended says how much on a connection of its
// own; serve's log (Warn) and PyCharm's console say it once, naming the
// worker its hello described. A report with a wrong proof tells PyCharm
// nothing.
func TestLossReportToldToPyCharm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	var log, summary syncbuf.Buffer
	px, err := pycharm.Listen(pycharm.Config{PyCharm: ide.Addr(), Token: "tok", Summary: &summary,
		Log: zerolog.New(&log).Level(zerolog.DebugLevel)}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.Serve(ctx)
	t.Cleanup(px.Close)
	addr := px.Addr().String()
	accepted := make(chan error, 1)
	go func() { accepted <- ide.Accept(ctx) }()

	hc := dialFrom(t, "", addr)
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	reply, _, wn, pn, err := admission.IntroduceWithNonces(hc, "tok", admission.Hello{TaskInfo: admission.TaskInfo{
		PID: 404, Host: "node-4", ExecutorID: "2", Label: "stage 0 · partition 1 · attempt 0"}})
	hc.Close()
	if err != nil || !strings.HasPrefix(reply, "OK ") {
		t.Fatalf("hello reply %q, %v", reply, err)
	}
	send := func(line string) {
		t.Helper()
		c := dialFrom(t, "", addr)
		defer c.Close()
		if _, err := io.WriteString(c, line); err != nil {
			t.Fatal(err)
		}
	}
	waitText := func(what string, b *syncbuf.Buffer, text string) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !strings.Contains(b.String(), text); {
			if time.Now().After(end) {
				t.Fatalf("%s never said %q: %q", what, text, b.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A wrong proof first: refused in serve's terminal, nothing for PyCharm.
	send(admission.LossLine("not-the-token", wn, pn, 999, 9))
	waitText("serve's terminal", &summary, "refused: "+admission.ErrLossProof.Error())

	line := admission.LossLine("tok", wn, pn, 65536, 1024)
	send(line)
	send(line) // the same report again: told once
	msg := "worker exec 2 · node-4 · pid 404: 65536 bytes (1024 lines) of output did not reach the debugger " +
		"before the task ended; the executor's log has them"
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	isLoss := func(m pycharm.Message) bool {
		return m.ID == pycharm.CmdWriteToConsole && strings.Contains(pycharm.PyUnquote(pycharm.PyUnquote(m.Payload)), "did not reach")
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	out, err := ide.WaitFor(wctx, isLoss)
	if err != nil {
		t.Fatal(err)
	}
	if s := pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)); !strings.Contains(s, `s="sparkdap: `+msg+"\n"+`" ctx="2"`) {
		t.Fatalf("console output %q: want %q on stderr", s, msg)
	}
	// A last, different report, so that the repeat has been read by the
	// time it is told.
	send(admission.LossLine("tok", wn, pn, 1, 1))
	if out, err = ide.WaitFor(wctx, isLoss); err != nil {
		t.Fatal(err)
	} else if s := pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)); !strings.Contains(s, "1 bytes (1 lines)") {
		t.Fatalf("second report: %q, want the last one (a repeat is told once)", s)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if out, err := ide.WaitFor(short, isLoss); err == nil {
		t.Errorf("PyCharm was told more: %q", pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)))
	}

	waitText("serve's log", &log, "1 bytes (1 lines)")
	if n := strings.Count(log.String(), "did not reach the debugger"); n != 2 {
		t.Errorf("serve's log told %d reports, want 2: %s", n, log.String())
	}
	var entry struct {
		Level, Message, Worker string
		Bytes, Lines           int64
	}
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "65536 bytes") {
			if err := json.Unmarshal([]byte(l), &entry); err != nil {
				t.Fatal(err)
			}
		}
	}
	if entry.Level != "warn" || entry.Message != msg || entry.Worker != "exec 2 · node-4 · pid 404" ||
		entry.Bytes != 65536 || entry.Lines != 1024 {
		t.Errorf("serve's log line %+v: want at warn %q", entry, msg)
	}
	if strings.Contains(log.String()+summary.String(), "999 bytes") {
		t.Errorf("the report with a wrong proof was told: %s", log.String())
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
}
