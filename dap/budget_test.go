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
// connections to the executor port as fast as it can. It holds its
// source's share of the port's budget and no more, so the IDE still
// attaches (the IDE port has a budget of its own) and a worker from
// another host is still admitted; the flood's refusals log one warning,
// not one each.
func TestNoTokenPeerCannotLockOut(t *testing.T) {
	var log syncbuf.Buffer
	const total, perSource, flood = 8, 3, 40
	p := startProxy(t, func(c *Config) {
		c.MaxUnadmitted = total
		c.MaxUnadmittedPerSource = perSource
		c.RefusalLogInterval = time.Hour // no sum comes during the test
		c.HandshakeTimeout = time.Minute // the flood's places stay held
		c.Log = zerolog.New(&log).Level(zerolog.InfoLevel)
	})
	exe := p.srv.ExecutorAddr().String()
	served := 0
	for range flood {
		r := &rawPeer{t: t, conn: dialFrom(t, "127.0.0.1", exe)}
		r.fr = dapwire.NewFrameReader(r.conn, 0)
		// The proxy speaks first to a connection it serves (it asks
		// for the token); one over budget is closed unread.
		if m := r.read(); m != nil {
			served++
		}
	}
	if served != perSource {
		t.Errorf("the flood holds %d of the executor port's places, want its share %d", served, perSource)
	}
	if n, _ := p.hub.exeBudget.InUse(); n != perSource {
		t.Errorf("executor port budget in use: %d, want %d", n, perSource)
	}

	p.ide(false, nil) // fails the test if the attach is refused
	f := newFake(t, dialFrom(t, "127.0.0.2", exe), testToken, 4242, nil)
	f.waitRequest("configurationDone", nil)
	p.waitExecutors(1)

	warned := strings.Count(log.String(), "closing this one unread")
	if warned != 1 {
		t.Errorf("%d warnings for %d refused connections of one cause, want 1:\n%s", warned, flood-perSource, log.String())
	}
	if !strings.Contains(log.String(), connbudget.CausePerSource) {
		t.Errorf("the warning does not name its cause:\n%s", log.String())
	}
}

// TestIDEPortBudget: connections to the IDE port that never attach are
// bounded by the IDE port's own budget, and filling it leaves the
// executor port alone.
func TestIDEPortBudget(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxUnattached = 2 })
	for range 2 {
		dialRaw(t, p.srv.IDEAddr().String())
	}
	// A third is closed at once: it reads EOF, not the 30 s attach timeout.
	if m := dialRaw(t, p.srv.IDEAddr().String()).read(); m != nil {
		t.Fatalf("the proxy spoke to an IDE connection over budget: %v", m)
	}
	p.executor(77, nil)
	p.waitExecutors(1)
}
