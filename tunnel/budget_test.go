package tunnel

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// TestAgentFloodCannotLockOutOtherHosts: through the agent, a host
// without the token that floods the gateway's port holds only its own
// share of the proxy's executor budget, because the proxy counts each
// stream under the address the executor came from; a worker on another
// host is still admitted.
func TestAgentFloodCannotLockOutOtherHosts(t *testing.T) {
	h := startAgentHarness(t)
	const perSource, flood = 3, 12
	hub := dap.NewHub(dap.Config{Token: "tok", MaxUnadmitted: 8, MaxUnadmittedPerSource: perSource,
		HandshakeTimeout: time.Minute, Log: zerolog.Nop()})
	defer hub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for st := range h.streams {
			go hub.ServeExecutor(ctx, st)
		}
	}()
	dial := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: testWait}
		c, err := d.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	served := 0
	for range flood {
		c := dial("127.0.0.1")
		// The proxy asks a connection it serves for its token at once;
		// one over budget is closed unread, and the agent closes the
		// executor's side.
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			served++
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a flood connection was neither served nor closed")
		}
	}
	if served != perSource {
		t.Errorf("the flooding host holds %d places, want its share %d", served, perSource)
	}
	w := fakepydevd.New(dial("127.0.0.2"), fakepydevd.Config{Token: "tok", PID: 4242})
	select {
	case <-w.Configured():
	case <-w.Done():
		t.Fatalf("a worker from another host was refused: %v", w.Err())
	case <-time.After(30 * time.Second):
		t.Fatal("a worker from another host was not admitted within 30s")
	}
}
