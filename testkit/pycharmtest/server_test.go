package pycharmtest

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/pycharm"
)

// TestServerActsLikePyCharm checks the double against what PyCharm sends
// and how it treats what it gets (shared notes: pycharm-ide-side-facts).
func TestServerActsLikePyCharm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := s.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	send := func(m pycharm.Message) {
		if _, err := c.Write(m.Marshal()); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan error, 1)
	go func() {
		_, err := s.Start(ctx, Breakpoint{File: "/src/job.py", Line: 7, Func: "main"})
		started <- err
	}()
	var got []pycharm.Message
	for len(got) < 4 {
		m, err := pycharm.ReadMessage(br, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
		if m.ID == pycharm.CmdVersion {
			send(pycharm.Message{ID: pycharm.CmdVersion, Seq: m.Seq, Payload: "263.7307.50"})
		}
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	want := []pycharm.Message{
		{ID: pycharm.CmdVersion, Seq: 1, Payload: "1.1\tUNIX"},
		{ID: pycharm.CmdSetBreak, Seq: 3, Payload: "python-line\t/src/job.py\t7\tmain\tALL\tNone\tNone"},
		{ID: pycharm.CmdShowReturnValues, Seq: 5, Payload: "SHOW_RETURN_VALUES\t0"},
		{ID: pycharm.CmdRun, Seq: 7},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d: got %v, want %v", i, got[i], want[i])
		}
	}

	q := func(s string) string { return pycharm.PyQuote(s, `/<>_=" `) }
	send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2, Payload: q(`<xml><thread name="Main%20Thread" id="pid_1_id_1" /></xml>`)})
	send(pycharm.Message{ID: pycharm.CmdThreadSuspend, Seq: 4, Payload: q(`<xml><thread id="pid_1_id_9" stop_reason="111"></thread></xml>`)})
	send(pycharm.Message{ID: pycharm.CmdReturn, Seq: 99, Payload: "answer to nothing"})
	send(pycharm.Message{ID: 129, Seq: 6})
	_, err = s.WaitFor(ctx, func(pycharm.Message) bool { return false })
	if !errors.Is(err, ErrSessionDropped) || !s.Dropped() {
		t.Errorf("after CMD_EXIT: %v, dropped %v; want the session dropped", err, s.Dropped())
	}
	if _, err := s.Send(pycharm.CmdRun); !errors.Is(err, ErrSessionDropped) {
		t.Errorf("send after CMD_EXIT: %v", err)
	}
	if n := s.ThreadName("pid_1_id_1"); n != "Main Thread" {
		t.Errorf("thread name %q", n)
	}
	if a := s.Anomalies(); len(a) != 1 {
		t.Errorf("anomalies %q; want the suspend of the never-created pid_1_id_9", a)
	}
	if st := s.Strays(); len(st) != 1 || st[0].Seq != 99 {
		t.Errorf("strays %v; want the answer to nothing", st)
	}
}
