package dap

import (
	"fmt"
	"time"
)

// Config.MaxStop resumes a worker left stopped too long: a developer who hit a
// breakpoint and went home must not hold the task (and with Spark's
// barrier or --wait, the stage) overnight. Config.MaxStop is the limit;
// the clock restarts with each stop and with each IDE request about the
// worker (noteAsked).

// armMaxStop starts es's clock at a new stop, and its timer unless
// one runs (a running timer re-reads the deadline when it fires).
func (tx *held) armMaxStop(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	if h.cfg.MaxStop <= 0 {
		return
	}
	x.stopSince = h.now()
	x.maxStopResumed = false
	if x.maxStop == nil {
		x.maxStop = time.AfterFunc(h.cfg.MaxStop, func() { es.checkMaxStop() })
	}
}

// noteAsked restarts es's clock: an IDE asked something about it
// (a request routed to it, a capture of its frame), so someone is there.
func (tx *held) noteAsked(es *ExecutorSession) {
	h := tx.h
	if h.cfg.MaxStop > 0 {
		tx.exec(es).lastAsked = h.now()
	}
}

// stopMaxStop stops es's timer (its connection ended).
func (x *executorState) stopMaxStop() {
	if x.maxStop != nil {
		x.maxStop.Stop()
		x.maxStop = nil
	}
}

// checkMaxStop runs on es's timer: it resumes es if it has been stopped
// for MaxStop with no IDE request about it since, and otherwise waits for
// the new deadline. A worker no longer stopped lets the timer lapse.
func (es *ExecutorSession) checkMaxStop() {
	h := es.hub
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	x.maxStop = nil
	if tx.executors[es.id] != es || !x.ready || len(x.stopped) == 0 {
		return
	}
	since := x.stopSince
	if x.lastAsked.After(since) {
		since = x.lastAsked
	}
	if left := h.cfg.MaxStop - h.now().Sub(since); left > 0 {
		x.maxStop = time.AfterFunc(left, func() { es.checkMaxStop() })
		return
	}
	tx.maxStopExpired(es)
}

// maxStopExpired resumes es and says so: to the IDE session that
// shows it (a console line, then the stopped threads' continued:
// resumeTold), in the log and on serve's terminal.
func (tx *held) maxStopExpired(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	stoppedFor := h.now().Sub(x.stopSince).Round(time.Second)
	label := x.label()
	why := fmt.Sprintf("executor %d [%s] resumed: stopped %s with no request from the IDE about it (serve --max-stop %s)",
		es.id, label, stoppedFor, h.cfg.MaxStop)
	tx.resumeTold(es, "sparkdap: "+why+"\n")
	x.maxStopResumed = true
	es.logger().Warn().Dur("stopped", stoppedFor).Dur("max_stop", h.cfg.MaxStop).
		Msg("executor stopped too long with no request from the IDE; resumed it")
	h.summary("%s", why)
}
