package dap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// disconnectingSession opens the session a case disconnects: the root
// (merged) or an executor's child session.
func disconnectingSession(t *testing.T, p *testProxy, child bool) *dapclient.Client {
	t.Helper()
	if !child {
		return p.ide(false, nil)
	}
	_, children := p.childRoot(nil, nil)
	p.executor(51, nil).stop() // listed once it stops
	return p.nextChild(children).Client
}

// TestClientClosesAfterDisconnect: a client that closes its connection
// once it has read the disconnect answer (nvim-dap, VS Code) gets the
// answer on a connection that is still open: the proxy does not race it
// with a close of its own (nvim-dap then drops the answer and skips its
// disconnect listeners). Requests sent after disconnect
// are refused, not served.
func TestClientClosesAfterDisconnect(t *testing.T) {
	for _, tt := range []struct {
		name  string
		child bool
	}{{"root session", false}, {"child session", true}} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncbuf.Buffer{}
			p := startProxy(t, func(c *Config) {
				// Longer than the test: whatever closes the connection
				// here, it is not the proxy's grace running out.
				c.DisconnectGrace = 10 * time.Minute
				c.Log = zerolog.New(logs).Level(zerolog.DebugLevel)
			})
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("proxy log:\n%s", logs)
				}
			})
			c := disconnectingSession(t, p, tt.child)
			resp, err := c.Request(p.ctx, "disconnect", map[string]any{"terminateDebuggee": false})
			if err != nil {
				t.Fatalf("disconnect: %v", err)
			}
			if !resp.Success {
				t.Fatalf("disconnect answered %+v", resp)
			}
			// The client handles the answer: the connection must still be
			// there while it does.
			select {
			case <-c.Done():
				t.Fatal("the proxy closed the connection right after answering disconnect, before the client could close it")
			case <-time.After(300 * time.Millisecond):
			}
			after, err := c.Request(p.ctx, "threads", nil)
			if err != nil {
				t.Fatalf("threads after disconnect: %v", err)
			}
			if after.Success || !strings.Contains(after.Message, "session has ended") {
				t.Errorf("threads after disconnect answered %+v; want an error saying the session has ended", after)
			}
			if err := c.Close(); err != nil {
				t.Errorf("client close: %v", err)
			}
			waitLog(t, logs, "IDE connection closed after its session ended")
		})
	}
}

// TestProxyClosesAfterDisconnectGrace: a client that keeps its connection
// after its disconnect was answered has it closed by the proxy once
// Config.DisconnectGrace has passed.
func TestProxyClosesAfterDisconnectGrace(t *testing.T) {
	for _, tt := range []struct {
		name  string
		child bool
	}{{"root session", false}, {"child session", true}} {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, func(c *Config) { c.DisconnectGrace = 100 * time.Millisecond })
			c := disconnectingSession(t, p, tt.child)
			ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
			defer cancel()
			resp, err := c.Request(ctx, "disconnect", map[string]any{"terminateDebuggee": false})
			if err != nil || !resp.Success {
				t.Fatalf("disconnect: %+v, %v", resp, err)
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("the proxy never closed the connection of a client that stayed after disconnect")
			}
		})
	}
}

// TestChildDisconnectAnsweredAfterTerminated: when its executor goes away a
// child session is sent terminated, which VS Code answers with disconnect
// (the recorded transcripts show it). That disconnect is answered on a
// connection still open; the client then closes it.
func TestChildDisconnectAnsweredAfterTerminated(t *testing.T) {
	logs := &syncbuf.Buffer{}
	p := startProxy(t, func(c *Config) {
		c.DisconnectGrace = 10 * time.Minute
		c.Log = zerolog.New(logs).Level(zerolog.DebugLevel)
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs)
		}
	})
	_, children := p.childRoot(nil, nil)
	f := p.executor(52, nil)
	f.stop() // listed once it stops
	c := p.nextChild(children).Client
	f.Close() // the worker exits
	if _, err := c.WaitEvent(p.ctx, "terminated", nil); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Request(p.ctx, "disconnect", map[string]any{"restart": false})
	if err != nil {
		t.Fatalf("disconnect after terminated: %v", err)
	}
	if !resp.Success {
		t.Fatalf("disconnect after terminated answered %+v", resp)
	}
	select {
	case <-c.Done():
		t.Fatal("the proxy closed the connection before the client could")
	case <-time.After(300 * time.Millisecond):
	}
	if err := c.Close(); err != nil {
		t.Errorf("client close: %v", err)
	}
	waitLog(t, logs, "IDE connection closed after its session ended")
}
