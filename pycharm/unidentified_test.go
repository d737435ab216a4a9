package pycharm_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
)

// TestUnidentifiedPydevdHoldsLittle: a connection that has not yet said
// which hello it belongs to (no answer to the proxy's probe) is hung up on
// once it sent more than a pydevd connection sends before that answer,
// whether in one endless line or in many lines kept for later; a worker
// that says hello and connects afterwards is served, long lines included. The identify timeout
// is made long, so that only the bound can end those connections.
func TestUnidentifiedPydevdHoldsLittle(t *testing.T) {
	defer pycharm.SetIdentifyTimeout(5 * time.Minute)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	px, ide := startProxy(t, ctx, pycharm.Config{})
	addr := px.Addr().String()

	over := pycharm.MaxUnidentifiedBytes + 1
	thread := pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2,
		Payload: pycharm.PyQuote(`<xml><thread name="t" id="pid_7_id_1" /></xml>`, "/")}.Marshal()
	for _, tt := range []struct {
		name string
		send []byte
	}{
		{"one endless line", []byte(fmt.Sprintf("%d\t2\t%s", pycharm.CmdThreadCreate, strings.Repeat("x", over)))},
		{"many lines before the answer", []byte(strings.Repeat(string(thread), over/len(thread)+1))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 8 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				// The proxy may hang up before it has read everything.
				if _, err := c.Write(tt.send); isTimeout(err) {
					t.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, c); isTimeout(err) {
					t.Fatalf("connection %d sent %d bytes without saying which process it is: the proxy did not hang up",
						i, len(tt.send))
				}
			}
		})
	}
	// A worker that says hello is served, and once joined its lines may
	// be far larger.
	w := startWorker(t, ctx, addr, 301, 0, pathmap.Roots{})
	if err := ide.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)
	long := "t" + strings.Repeat("x", 4*pycharm.MaxUnidentifiedBytes)
	w.send(pycharm.Message{ID: pycharm.CmdThreadCreate, Seq: 2,
		Payload: pycharm.PyQuote(`<xml><thread name="`+long+`" id="pid_301_id_1" /></xml>`, `/<>_=" `)})
	if _, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadCreate }); err != nil {
		t.Fatalf("a joined worker's long line: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
