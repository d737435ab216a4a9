// Package connbudget bounds the connections a port serves before they are
// admitted (before an executor proved it holds the token, before an IDE
// attached), and keeps the log lines of the ones it refuses from flooding.
// Both front ends use it: package dap for its IDE and executor ports,
// package pycharm for its executor port.
//
// Design. A Place is taken as a connection is accepted, before anything is
// read from it or allocated for it, and given back once the connection is
// admitted or gone; each port has its own Budget, so nothing on one port
// can starve another. Admission is decided by proof (the token), never by
// address: every worker may share one address (one host in local mode, a
// NAT, a Kubernetes node's SNAT, every worker behind `serve --ssh`), so a
// per-source share would let one peer on that address shut out all of
// them. It is off unless asked for.
//
// What keeps a flood of connections that prove nothing from shutting the
// port, as OpenSSH's MaxStartups and LoginGraceTime do for sshd:
//   - When the budget is full, a newcomer takes the place of another,
//     and is never refused itself: the oldest connection silent for the
//     silent grace; else the oldest that has sent bytes for the silent
//     grace but no whole message of its protocol (the front end says when
//     one did: Place.Progressed); else the oldest silent one; else the
//     oldest that sent bytes; else the oldest not admitted. Whether a
//     connection sent anything is what its reader saw or, for the oldest
//     silent ones, what waits unread in the kernel (a flood keeps readers
//     from being scheduled). An honest peer sends a whole message at once
//     and proves itself in one round trip, so it is never the oldest of
//     its kind for long.
//   - A worker whose hello was accepted connects its debugger next, and
//     pydevd speaks only when spoken to: as many connections from an
//     address as the caller awaits there (Take's expected) are never taken
//     to make room. The proof is the hello's; a budget full of them
//     refuses the newcomer.
//   - Under pressure (more than half the budget in use), a connection that
//     has sent nothing within the silent grace is closed, and one not
//     admitted within the admission grace too. Silence counts only where
//     unread bytes can be seen (a socket on Unix): a tunnel stream's
//     bytes wait in the multiplexer's buffer, out of a peek's reach,
//     behind goroutines a flood keeps waiting, so such a connection has
//     the admission grace alone. Without pressure nothing is cut short: a
//     peer over a slow tunnel keeps its time, up to the front end's own
//     handshake timeout.
//
// A source is a connection's remote IP, an IPv6 one taken by its /64 (one
// host can hold a whole /64). A connection carried from elsewhere (an SSH
// tunnel stream) must report the address its carrier saw as its
// RemoteAddr, or all its connections share one source.
//
// A Limiter lets the first refusal of each cause through per interval and
// counts the rest, which it reports as one line per cause at the end of the
// interval: a flood of refusals logs a few lines every interval, not one
// per connection.
package connbudget

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults for a port: enough for a large job's workers all connecting at
// once (a hello or a handshake takes milliseconds, and a host's workers
// start together: one host with 64 cores makes up to 128 connections at
// once, a hello and a pydevd connection each), few enough that idle
// connections cannot exhaust the proxy's memory.
const (
	DefaultTotal = 1024
	// DefaultPerSource is no per-source share: addresses are shared by
	// honest workers.
	DefaultPerSource = 0
	// DefaultSilentGrace is how long a connection may send nothing while
	// the budget is under pressure: a peer that means to talk sends its
	// first bytes (a hello, pydevd's answer to the proxy's first request)
	// within a round trip.
	DefaultSilentGrace = 500 * time.Millisecond
	// DefaultAdmitGrace is how long a connection may stay unadmitted while
	// the budget is under pressure: a hello takes two round trips.
	DefaultAdmitGrace = 3 * time.Second
)

// Causes of a refusal or a shed connection, as Budget reports them.
const (
	CausePerSource  = "source address over its share"
	CauseTotal      = "budget full of expected connections"
	CauseSilent     = "sent nothing"
	CauseUnadmitted = "was not admitted"
)

// Options are a Budget's limits; zero values take the defaults.
type Options struct {
	// Total bounds the connections not yet admitted.
	Total int
	// PerSource, if over zero, bounds those of them from one source;
	// a newcomer over it is refused.
	PerSource int
	// SilentGrace and AdmitGrace bound a connection's time without a byte
	// and without admission while the budget is under pressure.
	SilentGrace, AdmitGrace time.Duration
	// Shed, if set, is told of each connection closed to make room or for
	// its time (why: CauseSilent or CauseUnadmitted, how: "to make room"
	// or "past its grace"). It runs after the Budget's lock is released,
	// on the goroutine of the Take or of the grace's timer; it must not
	// block.
	Shed func(remote net.Addr, why, how string)
}

// RefusedError is why Take refused a connection; the caller closes it
// unread.
type RefusedError struct{ Cause string }

func (e *RefusedError) Error() string { return "connection refused: " + e.Cause }

// Budget counts the unadmitted connections of one port. Its methods are
// safe for concurrent use.
type Budget struct {
	opt Options
	// peek is pendingBytes: this platform's look at what waits unread;
	// lookable is lookableConn: whether peek can see into a connection.
	peek     func(net.Conn) (some, line bool)
	lookable func(net.Conn) bool

	// mu guards everything below and every Place's state and links. No
	// callback and no Close of a connection runs under it.
	mu    sync.Mutex
	n     int
	bySrc map[string]int // only sources holding a place
	// silent, talking and progressed list the held places in the order
	// they came: those that have sent nothing yet, those that sent bytes
	// but no whole message, and the rest. expected lists those that are
	// never closed to make room (Take's expected).
	silent, talking, progressed, expected placeList
	// expectedBySrc counts expected places per source.
	expectedBySrc map[string]int
}

// New returns a Budget of total places, at most perSource of them per
// source address (perSource ≤ 0 or ≥ total: no per-source limit), with
// the default graces. total ≤ 0 takes DefaultTotal.
func New(total, perSource int) *Budget {
	return NewWith(Options{Total: total, PerSource: perSource})
}

// NewWith returns a Budget of o's limits.
func NewWith(o Options) *Budget {
	if o.Total <= 0 {
		o.Total = DefaultTotal
	}
	if o.PerSource <= 0 || o.PerSource > o.Total {
		o.PerSource = o.Total
	}
	if o.SilentGrace <= 0 {
		o.SilentGrace = DefaultSilentGrace
	}
	if o.AdmitGrace <= 0 {
		o.AdmitGrace = DefaultAdmitGrace
	}
	return &Budget{opt: o, peek: pendingBytes, lookable: lookableConn, bySrc: map[string]int{}, expectedBySrc: map[string]int{}}
}

// Total and PerSource are the limits b enforces.
func (b *Budget) Total() int     { return b.opt.Total }
func (b *Budget) PerSource() int { return b.opt.PerSource }

// Take holds a place for conn, making room if the budget is full (see
// victimLocked). It returns the connection to serve in conn's stead (its
// reads mark the place as spoken) and the place, which the caller
// releases once the connection is admitted or gone.
//
// expected is how many connections from conn's address the caller awaits
// from peers that proved themselves already (a worker whose hello was
// accepted connects its debugger next, and pydevd speaks only when spoken
// to, so it looks like a flood's idle connection): up to that many places
// from the source are never closed to make room, and only the admission
// grace holds for them. Only a per-source share, or a budget full of such
// places, refuses a newcomer (a *RefusedError): the caller closes conn
// unread.
func (b *Budget) Take(conn net.Conn, expected int) (*Place, net.Conn, error) {
	src := Source(conn.RemoteAddr())
	p := &Place{b: b, src: src, conn: conn, since: time.Now(), lookable: b.lookable(conn)}
	p.timer = time.AfterFunc(b.opt.SilentGrace, p.graceOver)
	b.mu.Lock()
	if b.opt.PerSource < b.opt.Total && b.bySrc[src] >= b.opt.PerSource {
		b.mu.Unlock()
		p.timer.Stop()
		return nil, nil, &RefusedError{Cause: CausePerSource}
	}
	var victim *Place
	var why string
	if b.n >= b.opt.Total {
		victim, why = b.victimLocked(p.since)
		if victim == nil {
			b.mu.Unlock()
			p.timer.Stop()
			return nil, nil, &RefusedError{Cause: CauseTotal}
		}
		b.dropLocked(victim)
	}
	b.n++
	b.bySrc[src]++
	if b.expectedBySrc[src] < expected {
		b.expectedBySrc[src]++
		b.expected.pushBack(p)
		p.state = placeExpected
	} else {
		b.silent.pushBack(p)
		p.state = placeSilent
	}
	b.mu.Unlock()
	if victim != nil {
		b.shed(victim, why, "to make room")
	}
	return p, &watchedConn{Conn: conn, p: p}, nil
}

// victimLocked picks the connection that makes room at now: the oldest
// that has sent nothing for the silent grace; else the oldest that has
// sent bytes for the silent grace but no whole message; else the oldest
// silent one; else the oldest that sent bytes; else the oldest of all.
// Whether a connection sent something is what its reader saw or, for the
// oldest silent ones, what waits in the kernel for a reader not yet
// scheduled (a flood keeps the machine busy). An honest peer sends its
// whole first message at once, so it is found talking only between the
// read of its first bytes and the parse of its message: that moment must
// not make it the first to go under a flood that renews itself faster
// than the grace, which is what the grace on talking ones is for. A
// connection silent for less than the grace may be an honest one whose
// first bytes are on their way.
func (b *Budget) victimLocked(now time.Time) (*Place, string) {
	for range maxPeeks {
		if s := b.silent.front(); s == nil || !b.peekLocked(s, now) {
			break
		}
	}
	s, t := b.silent.front(), b.talking.front()
	switch {
	case s != nil && now.Sub(s.since) >= b.opt.SilentGrace:
		return s, CauseSilent
	case t != nil && now.Sub(t.spokeAt) >= b.opt.SilentGrace:
		return t, CauseUnadmitted
	case s != nil:
		return s, CauseSilent
	case t != nil:
		return t, CauseUnadmitted
	default:
		return b.progressed.front(), CauseUnadmitted
	}
}

// peekLocked looks in silent p's kernel buffer and, if bytes wait there
// unread, files p as it will be once they are read: progressed if they
// hold a line end, talking if not. It reports whether p had bytes.
func (b *Budget) peekLocked(p *Place, now time.Time) bool {
	some, line := b.peek(p.conn)
	if !some {
		return false
	}
	p.spoke.Store(true)
	p.spokeAt = now
	b.silent.remove(p)
	if line {
		b.progressed.pushBack(p)
		p.state = placeProgressed
	} else {
		b.talking.pushBack(p)
		p.state = placeTalking
	}
	return true
}

// noPeek is pendingBytes where the kernel buffer cannot be looked at
// without taking the bytes (off Unix): a connection counts as silent
// until its reader sees bytes.
func noPeek(net.Conn) (some, line bool) { return false, false }

// notLookable is lookableConn where nothing can be looked into.
func notLookable(net.Conn) bool { return false }

// maxPeeks bounds the kernel buffers one newcomer has looked at, and
// peekBytes how much of each.
const (
	maxPeeks  = 4
	peekBytes = 512
)

// underPressureLocked: more than half the budget held.
func (b *Budget) underPressureLocked() bool { return 2*b.n > b.opt.Total }

// dropLocked gives p's place back and unlinks it.
func (b *Budget) dropLocked(p *Place) {
	switch p.state {
	case placeSilent:
		b.silent.remove(p)
	case placeTalking:
		b.talking.remove(p)
	case placeProgressed:
		b.progressed.remove(p)
	case placeExpected:
		b.expected.remove(p)
		if b.expectedBySrc[p.src]--; b.expectedBySrc[p.src] <= 0 {
			delete(b.expectedBySrc, p.src)
		}
	default:
		return
	}
	p.state = placeGone
	b.n--
	if b.bySrc[p.src]--; b.bySrc[p.src] <= 0 {
		delete(b.bySrc, p.src)
	}
}

// shed closes a connection whose place was taken from it (outside b.mu).
func (b *Budget) shed(p *Place, why, how string) {
	if p.timer != nil {
		p.timer.Stop()
	}
	_ = p.conn.Close()
	if b.opt.Shed != nil {
		b.opt.Shed(p.conn.RemoteAddr(), why, how)
	}
}

// InUse is how many places are held, and by how many sources.
func (b *Budget) InUse() (places, sources int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, len(b.bySrc)
}

// Source is the key a connection from addr counts under: its IP, an IPv6
// one masked to its /64, or "unknown" for an address without an IP (a
// pipe). An IPv4-mapped IPv6 address counts as the IPv4 one.
func Source(addr net.Addr) string {
	var ip netip.Addr
	switch a := addr.(type) {
	case nil:
		return "unknown"
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return "unknown"
		}
		ip = ap.Addr()
	}
	if !ip.IsValid() {
		return "unknown"
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// String describes b's limits for a log line.
func (b *Budget) String() string {
	if b.opt.PerSource >= b.opt.Total {
		return fmt.Sprintf("%d unadmitted connections", b.opt.Total)
	}
	return fmt.Sprintf("%d unadmitted connections, %d per source", b.opt.Total, b.opt.PerSource)
}
