package connbudget

import (
	"net"
	"sync/atomic"
	"time"
)

const (
	placeSilent = iota + 1
	placeTalking
	placeProgressed
	placeExpected
	placeGone
)

// Place is one connection's hold on its Budget, from accept until it is
// admitted or gone.
type Place struct {
	b     *Budget
	src   string
	conn  net.Conn  // closed when the place is taken from it
	since time.Time // when it was taken
	// lookable: what conn's peer sent can be seen before its reader takes
	// it (Budget.lookable), so silence past the silent grace means the
	// peer sent nothing, not that its reader was not scheduled yet.
	lookable bool

	// spoke is set by the first read that returned bytes: the fast path of
	// every later read, without the Budget's lock.
	spoke atomic.Bool
	// timer fires the graces (graceOver); set by Take before p is listed,
	// never replaced.
	timer *time.Timer

	// Guarded by b.mu.
	state      int
	phase      int       // graces over so far
	spokeAt    time.Time // when it was first seen to have sent bytes
	prev, next *Place
}

// Release gives the place back: the connection was admitted or is gone.
// It may be called more than once, from any goroutine.
func (p *Place) Release() {
	if p == nil {
		return
	}
	p.b.mu.Lock()
	p.b.dropLocked(p)
	p.b.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
}

// Spoke marks the connection as one that sent bytes: it is no longer
// taken for an idle one.
func (p *Place) Spoke() {
	if p.spoke.Swap(true) {
		return
	}
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.state != placeSilent {
		return // an expected one stays expected
	}
	b.silent.remove(p)
	b.talking.pushBack(p)
	p.state = placeTalking
	p.spokeAt = time.Now()
}

// graceOver runs on the timer's goroutine, first after SilentGrace, then
// after AdmitGrace. Under pressure, a connection that has sent nothing by
// the first (as far as can be seen: see lookable), or is not admitted by
// the second, goes. Without pressure it keeps its place until the front
// end's own timeouts end it: there is nothing to relieve.
func (p *Place) graceOver() {
	b := p.b
	b.mu.Lock()
	p.phase++
	var why string
	switch {
	case p.state == placeGone || !b.underPressureLocked():
	case p.state == placeExpected && p.phase == 1:
		// Its peer may speak only when spoken to (pydevd), and the proxy
		// proved to be busy: only the admission grace holds for it.
	case p.state == placeSilent && p.phase == 1 && !p.lookable:
		// Its bytes may wait where no peek reaches (a tunnel stream's
		// buffer, behind the agent's and the multiplexer's goroutines,
		// or a socket off Unix) for a reader a busy proxy has not
		// scheduled: silence proves nothing, only the admission grace
		// holds for it.
	case p.state == placeSilent && b.peekLocked(p, time.Now()):
		// Its bytes wait for a reader not yet scheduled: it spoke.
	case p.state == placeSilent:
		why = CauseSilent
	case p.phase > 1: // spoke, or progressed, but is not admitted yet
		why = CauseUnadmitted
	}
	if why != "" {
		b.dropLocked(p)
	}
	again := p.phase == 1 && p.state != placeGone && b.opt.AdmitGrace > b.opt.SilentGrace
	b.mu.Unlock()
	switch {
	case why != "":
		b.shed(p, why, "past its grace")
	case again:
		p.timer.Reset(b.opt.AdmitGrace - b.opt.SilentGrace)
	}
}

// Progressed marks the connection as one that sent a whole first message
// of its protocol (a hello line, a DAP message): it goes only after every
// connection that did not.
func (p *Place) Progressed() {
	p.spoke.Store(true)
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch p.state {
	case placeSilent:
		b.silent.remove(p)
	case placeTalking:
		b.talking.remove(p)
	default:
		return // progressed already, or expected
	}
	b.progressed.pushBack(p)
	p.state = placeProgressed
}

// watchedConn is a connection whose reads tell its Place it spoke.
type watchedConn struct {
	net.Conn
	p *Place
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.p.spoke.Load() {
		c.p.Spoke()
	}
	return n, err
}

// placeList is an intrusive list of places in the order they came.
type placeList struct{ head, tail *Place }

func (l *placeList) front() *Place { return l.head }

func (l *placeList) pushBack(p *Place) {
	p.prev, p.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = p
	} else {
		l.head = p
	}
	l.tail = p
}

func (l *placeList) remove(p *Place) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		l.head = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		l.tail = p.prev
	}
	p.prev, p.next = nil, nil
}
