// Package connbudget bounds the connections a port serves before they are
// admitted (before an executor proved it holds the token, before an IDE
// attached), and keeps the log lines of the ones it refuses from flooding.
// Both front ends use it: package dap for its IDE and executor ports,
// package pycharm for its executor port.
//
// Design. A Budget is taken as a connection is accepted, before anything is
// read from it or allocated for it, and given back once the connection is
// admitted or gone. It has a total and, per source address, a share of it,
// so one host (a peer without the token, opening idle connections) can hold
// at most its share and never the whole port; each port has its own Budget,
// so nothing on one port can starve another. A source is a connection's
// remote IP, an IPv6 one taken by its /64 (one host can hold a whole /64).
// A connection carried from elsewhere (an SSH tunnel stream) must report
// the address its carrier saw as its RemoteAddr, or all its connections
// share one source.
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
)

// Defaults for an executor port: enough for a large job's workers all
// connecting at once (a hello or a handshake takes milliseconds, and a
// host's workers start together: one host with 64 cores makes up to 128
// connections at once, a hello and a pydevd connection each), few enough
// that idle connections cannot exhaust the proxy, and one host may hold a
// quarter at most.
const (
	DefaultTotal     = 1024
	DefaultPerSource = 256
)

// Causes of a refusal, as Take reports them.
const (
	CauseTotal     = "port budget full"
	CausePerSource = "source address over its share"
)

// Budget counts the unadmitted connections of one port. Its methods are
// safe for concurrent use; mu guards the counts.
type Budget struct {
	total, perSource int

	mu    sync.Mutex
	n     int
	bySrc map[string]int // only sources holding a place
}

// New returns a Budget of total places, at most perSource of them per
// source address (perSource ≤ 0 or ≥ total: no per-source limit). total ≤ 0
// takes DefaultTotal.
func New(total, perSource int) *Budget {
	if total <= 0 {
		total = DefaultTotal
	}
	if perSource <= 0 || perSource > total {
		perSource = total
	}
	return &Budget{total: total, perSource: perSource, bySrc: map[string]int{}}
}

// Total and PerSource are the limits b enforces.
func (b *Budget) Total() int     { return b.total }
func (b *Budget) PerSource() int { return b.perSource }

// Take holds a place for a connection from remote. ok false means the
// connection is over budget (cause says which limit) and must be closed
// unread. release gives the place back; it may be called more than once,
// from any goroutine.
func (b *Budget) Take(remote net.Addr) (release func(), cause string, ok bool) {
	src := Source(remote)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.n >= b.total:
		return nil, CauseTotal, false
	case b.bySrc[src] >= b.perSource:
		return nil, CausePerSource, false
	}
	b.n++
	b.bySrc[src]++
	var once sync.Once
	return func() { once.Do(func() { b.put(src) }) }, "", true
}

func (b *Budget) put(src string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.bySrc[src]--; b.bySrc[src] <= 0 {
		delete(b.bySrc, src)
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
	return fmt.Sprintf("%d unadmitted connections, %d per source", b.total, b.perSource)
}
