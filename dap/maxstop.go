package dap

import (
	"fmt"
	"sort"
	"time"
)

// This file resumes a worker left stopped too long: a developer who hit a
// breakpoint and went home must not hold the task (and with Spark's
// barrier or --wait, the stage) overnight. Config.MaxStop is the limit;
// the clock restarts with each stop and with each IDE request about the
// worker (noteAskedLocked).

// armMaxStopLocked starts es's clock at a new stop, and its timer unless
// one runs (a running timer re-reads the deadline when it fires).
func (h *Hub) armMaxStopLocked(es *ExecutorSession) {
	if h.cfg.MaxStop <= 0 {
		return
	}
	es.stopSince = h.now()
	es.maxStopResumed = false
	if es.maxStop == nil {
		es.maxStop = time.AfterFunc(h.cfg.MaxStop, func() { h.checkMaxStop(es) })
	}
}

// noteAskedLocked restarts es's clock: an IDE asked something about it
// (a request routed to it, a capture of its frame), so someone is there.
func (h *Hub) noteAskedLocked(es *ExecutorSession) {
	if h.cfg.MaxStop > 0 {
		es.lastAsked = h.now()
	}
}

// stopMaxStopLocked stops es's timer (its connection ended).
func (es *ExecutorSession) stopMaxStopLocked() {
	if es.maxStop != nil {
		es.maxStop.Stop()
		es.maxStop = nil
	}
}

// checkMaxStop runs on es's timer: it resumes es if it has been stopped
// for MaxStop with no IDE request about it since, and otherwise waits for
// the new deadline. A worker no longer stopped lets the timer lapse.
func (h *Hub) checkMaxStop(es *ExecutorSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	es.maxStop = nil
	if h.executors[es.id] != es || !es.ready || len(es.stopped) == 0 {
		return
	}
	since := es.stopSince
	if es.lastAsked.After(since) {
		since = es.lastAsked
	}
	if left := h.cfg.MaxStop - h.now().Sub(since); left > 0 {
		es.maxStop = time.AfterFunc(left, func() { h.checkMaxStop(es) })
		return
	}
	h.maxStopExpiredLocked(es)
}

// maxStopExpiredLocked resumes es and says so: to the IDE session that
// shows it (a console line, then the stopped threads' continued, as an
// adapter tells a client of a resume it did not ask for), in the log and
// on serve's terminal.
func (h *Hub) maxStopExpiredLocked(es *ExecutorSession) {
	tids := make([]int64, 0, len(es.stopped))
	for tid := range es.stopped {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(i, j int) bool { return tids[i] < tids[j] })
	stoppedFor := h.now().Sub(es.stopSince).Round(time.Second)
	label := es.labelLocked()
	h.resumeLocked(es)
	es.stoppedAt = ""
	es.maxStopResumed = true
	why := fmt.Sprintf("executor %d [%s] resumed: stopped %s with no request from the IDE about it (serve --max-stop %s)",
		es.id, label, stoppedFor, h.cfg.MaxStop)
	if target := h.eventTargetLocked(es); target != nil && target.configured {
		_ = target.w.send(newEvent("output", map[string]any{"category": "console", "output": "sparkdap: " + why + "\n"}), nil)
		// A child session shows this process alone: all its threads run.
		all := target != h.root
		for _, tid := range tids {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				_ = target.w.send(newEvent("continued", map[string]any{"threadId": g, "allThreadsContinued": all}), nil)
			}
		}
	}
	h.ids.Release(es.id, kindFrame, kindVariables)
	es.logger().Warn().Dur("stopped", stoppedFor).Dur("max_stop", h.cfg.MaxStop).
		Msg("executor stopped too long with no request from the IDE; resumed it")
	h.summary("%s", why)
}
