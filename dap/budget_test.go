package dap

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/connbudget"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// dialFrom connects to addr from the loopback address src (any of
// 127.0.0.0/8 is this host's), so that a test can play several hosts.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNoTokenPeerCannotLockOut: a peer without the token opens idle
// connections to the executor port as fast as it can, from the workers'
// own address, many times the port's budget. Each newcomer takes the
// place of the oldest connection that sent nothing, so a worker from that
// same address is still admitted, the IDE still attaches (the IDE port
// has a budget of its own), the budget never holds more than its total,
// and the flood logs one warning, not one per connection.
func TestNoTokenPeerCannotLockOut(t *testing.T) {
	var log syncbuf.Buffer
	const total, flood = 8, 40
	p := startProxy(t, func(c *Config) {
		c.MaxUnadmitted = total
		c.RefusalLogInterval = time.Hour // no sum comes during the test
		c.HandshakeTimeout = time.Minute // the flood's places stay held
		c.Log = zerolog.New(&log).Level(zerolog.InfoLevel)
	})
	exe := p.srv.ExecutorAddr().String()
	for range flood {
		r := &rawPeer{t: t, conn: dialFrom(t, "127.0.0.1", exe)}
		r.fr = dapwire.NewFrameReader(r.conn, 0)
		// The proxy speaks first to a connection it serves (it asks for
		// the token): every newcomer is served.
		if m := r.read(); m == nil {
			t.Fatal("a newcomer to the full budget was closed unread")
		}
	}
	if n, _ := p.hub.exeBudget.InUse(); n > total {
		t.Errorf("executor port budget in use: %d, over its %d", n, total)
	}

	p.ide(false, nil) // fails the test if the attach is refused
	f := newFake(t, dialFrom(t, "127.0.0.1", exe), testToken, 4242, nil)
	f.waitRequest("configurationDone", nil)
	p.waitExecutors(1)

	const shed = "closed a connection that " + connbudget.CauseSilent
	if warned := strings.Count(log.String(), shed); warned != 1 {
		t.Errorf("%d warnings for %d connections closed to make room, want 1:\n%s", warned, flood-total, log.String())
	}
}

// TestIDEPortBudget: idle connections to the IDE port, many times its
// budget, cannot keep an IDE from attaching, and filling it leaves the
// executor port alone.
func TestIDEPortBudget(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxUnattached = 2 })
	for range 20 {
		dialRaw(t, p.srv.IDEAddr().String())
	}
	p.ide(false, nil)
	p.executor(77, nil)
	p.waitExecutors(1)
	if n, _ := p.hub.ideBudget.InUse(); n > 2 {
		t.Errorf("IDE port budget in use: %d, over its 2", n)
	}
}
