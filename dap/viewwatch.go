package dap

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/control"
)

// The sparkdapWorkers events of the root session that asked for them
// (sparkdapWatch): the control protocol's known-workers answer, rebuilt
// after what it shows changed (a worker reported a task, went idle,
// stopped, resumed, joined or left; the selection or the exception
// groups changed), at most once per watchInterval, and sent unless it is
// byte-identical to the last one sent.

// WorkersEvent is the event that carries the workers to a root session
// that asked for them with WatchCommand.
const WorkersEvent = "sparkdapWorkers"

// watchInterval is the least time between two builds of the event's
// body, so between two events: a job's hundreds of workers changing at
// once make a few events a second, not one per change.
const watchInterval = 250 * time.Millisecond

// defaultWatchRows is how many workers an event lists when sparkdapWatch
// does not say.
const defaultWatchRows = 500

// workersWatch is the Hub's one subscription to WorkersEvent: there is one
// root session at a time.
//
// Ownership: mu guards sub and every watchSub's fields. It is a leaf
// lock: it is taken under the Hub's lock (changed is called where
// executors stop and resume, and rootGone ends the subscription) as well
// as under none, and nothing under it takes another lock but the root's
// wire's (a send, which only queues) and a timer's. The body is built on
// the timer's goroutine under no lock: control.Ask asks stopped executors
// for their stacks, and takes the Hub's lock as it needs. on mirrors sub
// != nil, so that a change with nobody subscribed costs one atomic load.
type workersWatch struct {
	h  *Hub
	on atomic.Bool

	mu  sync.Mutex
	sub *watchSub // nil: nobody subscribed
}

// watchSub is one subscription: a sparkdapWatch of the root session s,
// until its off, or the root leaves. Its fields are guarded by
// workersWatch.mu; s and maxRows never change.
type watchSub struct {
	s       *IDESession
	maxRows int
	// timer is the next build, armed (nil: none); building says a build
	// is under way, and dirty that something changed since it began.
	timer           *time.Timer
	building, dirty bool
	lastBuild       time.Time // when the last build began (zero: none yet)
	last            []byte    // the body last sent
}

// changed notes that something an event shows may have changed: a build
// is scheduled, no sooner than watchInterval after the last one. Safe to
// call under the Hub's lock, and from the Board's OnUpdate.
func (w *workersWatch) changed() {
	if !w.on.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scheduleLocked()
}

// scheduleLocked arms the build of the current subscription unless one
// is armed; with a build under way, that build schedules the next one
// when it is done. Callers hold w.mu.
func (w *workersWatch) scheduleLocked() {
	sub := w.sub
	switch {
	case sub == nil || sub.timer != nil:
		return
	case sub.building:
		sub.dirty = true
		return
	}
	wait := watchInterval - time.Since(sub.lastBuild)
	if sub.lastBuild.IsZero() || wait < 0 {
		wait = 0
	}
	sub.timer = time.AfterFunc(wait, func() { w.build(sub) })
}

// subscribe makes s the session that gets the events, listing up to
// maxRows workers each, in place of any earlier subscription: the first
// event is built at once. Call it after queueing the answer to s's
// sparkdapWatch, so the event follows it.
func (w *workersWatch) subscribe(s *IDESession, maxRows int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked()
	w.sub = &watchSub{s: s, maxRows: maxRows}
	w.on.Store(true)
	w.scheduleLocked()
}

// end ends s's subscription, if it has the current one: no event is sent
// to s after end returns.
func (w *workersWatch) end(s *IDESession) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != nil && w.sub.s == s {
		w.endLocked()
	}
}

// close ends any subscription (the Hub is closing).
func (w *workersWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked()
}

// endLocked ends the current subscription: its timer stopped, and a
// build under way drops its body (build checks w.sub). Callers hold w.mu.
func (w *workersWatch) endLocked() {
	if w.sub == nil {
		return
	}
	if w.sub.timer != nil {
		w.sub.timer.Stop()
		w.sub.timer = nil
	}
	w.sub = nil
	w.on.Store(false)
}

// build runs on sub's timer: it builds the body under no lock and sends
// it to the subscribed session unless it is the last one sent, then arms
// the next build if something changed meanwhile.
func (w *workersWatch) build(sub *watchSub) {
	w.mu.Lock()
	if w.sub != sub {
		w.mu.Unlock()
		return
	}
	sub.timer = nil
	sub.building, sub.dirty = true, false
	sub.lastBuild = time.Now()
	w.mu.Unlock()
	body := w.h.workersBody(sub.maxRows)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != sub {
		return
	}
	sub.building = false
	if body != nil && !bytes.Equal(body, sub.last) {
		sub.last = body
		_ = sub.s.w.sendWithBody(Message{"type": "event", "event": WorkersEvent}, body)
	}
	if sub.dirty {
		sub.dirty = false
		w.scheduleLocked()
	}
}

// workersBody is the body of a WorkersEvent: the control protocol's
// known-workers answer for maxRows rows, encoded (nil if it did not
// encode). Call it on no lock: it asks stopped executors for their
// stacks. Its times are absolute (when a worker started its task), so
// the body does not change as time passes.
func (h *Hub) workersBody(maxRows int) []byte {
	ans, err := control.Ask(context.Background(), h, control.Request{Op: control.OpKnownWorkers, MaxRows: maxRows})
	if err != nil {
		h.log.Warn().Err(err).Msg("building the sparkdapWorkers event failed")
		return nil
	}
	body, err := json.Marshal(ans)
	if err != nil {
		h.log.Warn().Err(err).Msg("encoding the sparkdapWorkers event failed")
		return nil
	}
	return body
}
