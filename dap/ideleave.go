package dap

import (
	"fmt"
	"sort"
	"time"
)

func (s *IDESession) gone(how leaveKind) {
	s.goneOnce.Do(func() { s.hub.ideGone(s, how) })
}

// leaveKind is how an IDE session left, which decides what its leaving
// ends (see Hub.ideGone).
type leaveKind int

const (
	// leaveDropped: the connection ended without a disconnect.
	leaveDropped leaveKind = iota
	// leaveDetach: a child session's disconnect with an explicit
	// "terminateDebuggee": false: that one executor is let go.
	leaveDetach
	// leaveStopAll: any other disconnect (or terminate): the debugging of
	// the whole job stops.
	leaveStopAll
	// leaveStopAllTerminate: a child session's disconnect with
	// "terminateDebuggee": true: the same, and its worker is terminated.
	leaveStopAllTerminate
)

// leaveKindOf reads what a disconnect or terminate request asks for.
// VS Code's toolbar Disconnect and Stop both send a plain disconnect
// ({"restart": false}) since the proxy does not advertise
// supportTerminateDebuggee; only a client that says "terminateDebuggee":
// false on purpose detaches one executor.
func (s *IDESession) leaveKindOf(m Message) leaveKind {
	if m.Command() != "disconnect" || s.isRoot() {
		return leaveStopAll
	}
	v, present := m.Arguments()["terminateDebuggee"]
	term, isBool := v.(bool)
	switch {
	case present && isBool && !term:
		return leaveDetach
	case term:
		return leaveStopAllTerminate
	}
	return leaveStopAll
}

// leave ends the connection of a session that has ended: its disconnect
// has been answered, or it was sent terminated (its executor went away),
// which clients answer with disconnect. The client closes the connection
// once it has the answer (VS Code, nvim-dap); a proxy that closed first
// would race that answer: VS Code reports "connection closed", and nvim-dap,
// seeing the connection end before it handled the response, drops it ("No
// callback found … duplicate responses?") and skips its disconnect
// listeners. So the proxy closes it only if the client has not within
// Config.DisconnectGrace. Until then requests other than disconnect are
// refused.
func (s *IDESession) leave() {
	if !s.leaving.CompareAndSwap(false, true) {
		return
	}
	grace := s.hub.cfg.DisconnectGrace
	s.grace.Store(time.AfterFunc(grace, func() {
		s.w.closeAfterFlush(fmt.Errorf("%w: the client kept its connection %s after its session ended", errClosed, grace))
	}))
}

// ideGone handles the end of an IDE session (disconnect or dropped
// connection). Stopping any session stops the debugging of the whole job,
// as debugpy's own subprocess debugging does: every other session the
// proxy owns gets terminated and is closed, the breakpoints are forgotten
// and every executor is let go. Two departures end less: a child session
// that says "terminateDebuggee": false detaches its executor only, and a
// child session whose connection drops without a disconnect loses only its
// executor (a crashed window must not end the others). Executors are never
// killed for it (unless a child session asked for terminateDebuggee):
// every executor no session shows any more has each breakpoint ever sent
// to it cleared at the executor paths it was sent to, and is resumed, so
// jobs run on while nobody watches.
func (h *Hub) ideGone(ide *IDESession, how leaveKind) {
	tx := h.lock()
	defer tx.unlock()
	isChild := ide.executor.Load() != nil && tx.children[ide.executor.Load().id] == ide
	switch {
	case ide != tx.root && !isChild:
		return // already let go: the job's debugging was stopped from elsewhere
	case isChild && (how == leaveDropped || how == leaveDetach):
		tx.childGone(ide, false)
		return
	}
	tx.stopDebugging(ide, how == leaveStopAllTerminate)
}

// stopDebugging ends every IDE session of the job because from (the
// root or a child) stopped: child sessions first (each releases its
// executor), then the root (which releases the rest and forgets the
// breakpoints, so no executor stops again and none is announced). Every
// session but from is told terminated, as an adapter tells a client whose
// debuggee ended; VS Code answers it with its own disconnect, which is
// answered before the connection closes (IDESession.leave).
func (tx *held) stopDebugging(from *IDESession, terminateFrom bool) {
	h := tx.h
	ids := make([]uint64, 0, len(tx.children))
	for id := range tx.children {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var others []*IDESession
	for _, id := range ids {
		c := tx.children[id]
		tx.childGone(c, terminateFrom && c == from)
		if c != from {
			others = append(others, c)
		}
	}
	if root := tx.root; root != nil {
		tx.rootGone()
		if root != from {
			others = append(others, root)
		}
	}
	for _, s := range others {
		tx.ide(s).ended = true
		_ = s.w.send(newEvent("terminated", nil), nil)
		// The client answers terminated with disconnect: answered, it
		// closes the connection itself (IDESession.leave).
		s.leave()
	}
	if len(others) > 0 {
		h.summary("debugging stopped from the IDE: %d other session(s) terminated", len(others))
	}
}

// rootGone lets the root session go: its breakpoints are forgotten
// and every executor no child session shows is released.
func (tx *held) rootGone() {
	h := tx.h
	h.watch.end(tx.root) // its timer stopped: no event outlives the root
	tx.root = nil
	tx.attachArgs = nil
	global := map[string]bool{}
	for _, e := range tx.bps.global() {
		global[e.key] = true
	}
	tx.bps.clear()
	released := 0
	for _, es := range tx.ready() {
		tx.exec(es).announced = false
		tx.exec(es).stopChildWait()
		if tx.children[es.id] != nil {
			// Its child session still shows it: only the root's
			// breakpoints go, those the child set stay.
			tx.clearSent(es, func(key string) bool { return !global[key] || tx.exec(es).overrides[key] != nil })
			continue
		}
		tx.release(es)
		released++
	}
	h.summary("IDE detached; %d executor(s) resumed and keep running", released)
}

// childGone lets a child session go: its executor runs on undebugged
// (terminated first if terminate) and is not announced again to this root.
func (tx *held) childGone(ide *IDESession, terminate bool) {
	h := tx.h
	es := ide.executor.Load()
	delete(tx.children, es.id)
	tx.exec(es).detached = true
	tx.release(es)
	if terminate {
		// Released first all the same: if the worker outlives the
		// request, it must not wait at a breakpoint for nobody.
		es.request("disconnect", map[string]any{"terminateDebuggee": true}, h.cfg.RequestTimeout, ignoreAnswer(es))
	}
}
