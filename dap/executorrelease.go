package dap

// Letting it go: when no IDE session watches it any more, every
// breakpoint sent to it is cleared and it is resumed, so it never waits
// for a human who is not there.

// watched reports whether some IDE session shows es, now or once
// its child session is up: its own child session, or a root session it has
// not been detached from (merged, or announcing executors as children).
func (tx *held) watched(es *ExecutorSession) bool {
	if tx.children[es.id] != nil {
		return true
	}
	return tx.root != nil && !tx.exec(es).detached
}

// release lets an executor that no IDE session shows run on
// undebugged: nothing left to stop it, and resumed if it is stopped.
func (tx *held) release(es *ExecutorSession) {
	x := tx.exec(es)
	for key, e := range x.overrides {
		tx.bps.drop(e)
		delete(x.overrides, key)
	}
	tx.clearSent(es, nil)
	tx.resume(es)
	x.dropHeldOutput()
}

// unwatchedStop handles a stop nobody can see, whatever let it
// happen: a worker must never wait for a human who is not there.
func (tx *held) unwatchedStop(es *ExecutorSession, tid int64) {
	h := tx.h
	es.logger().Warn().Int64("thread", tid).
		Msg("executor stopped with no IDE session to show it; clearing its breakpoints and resuming it")
	tx.release(es)
	es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
}

// resume lets a stopped executor run on.
func (tx *held) resume(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	if len(x.stopped) == 0 {
		return
	}
	var tid int64
	for t := range x.stopped {
		tid = t
		break
	}
	clear(x.stopped)
	h.watch.changed()
	es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
}
