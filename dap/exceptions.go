package dap

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/sparkdap/sparkdap/admission"
)

// Stops at exceptions, grouped across workers. When many tasks raise the
// same exception at the same place, the user needs one of them stopped,
// not each in turn: a worker's stop at an exception is held until the
// proxy knows its type (pydevd's stopped event says it) and its place
// (the innermost frame, one stackTrace away). The first stop of each
// (type, place) is shown as any stop; the others of it are held, counted
// in the selection Board's groups (which `sparkdap workers` lists), and
// after Config.ExceptionHold continued unseen, so the exception goes on
// as it would without a debugger and Spark's retries see it. `sparkdap
// select --task` asks for a task's stop to be shown instead.

// heldException is a stop at an exception held back from the IDE.
type heldException struct {
	m           Message
	typ, place  string
	timer       *time.Timer
	taskAttempt int64 // -1 when the worker did not say
}

// groupException asks pydevd where the stop m on thread tid is, then shows
// it or holds it (exceptionPlaced). Called under the Hub's lock.
func (tx *held) groupException(es *ExecutorSession, m Message, tid int64) {
	h := tx.h
	m = deepCopy(m).(Message)
	typ, _ := m.Body()["text"].(string)
	if typ == "" {
		typ = "an exception"
	}
	args := map[string]any{"threadId": tid, "startFrame": 0, "levels": 1}
	es.request("stackTrace", args, h.cfg.RequestTimeout, func(r Message, err error) {
		place := "an unknown place"
		if err == nil && r.Success() {
			if frames, _ := r.Body()["stackFrames"].([]any); len(frames) > 0 {
				top, _ := frames[0].(map[string]any)
				line, _ := toInt(top["line"])
				src, _ := top["source"].(map[string]any)
				path, _ := src["path"].(string)
				if admission.IsPlumbingFile(path) {
					// Raised in the wrapper or PySpark's daemon, as the
					// SystemExit a reused worker leaves through when the
					// JVM closes its socket: never the user's, never
					// shown, no group (pycharm.holdException alike).
					es.logger().Debug().Str("exception", typ).Str("file", filepath.Base(path)).Int64("thread", tid).
						Msg("a stop at an exception in the worker's plumbing runs on unseen")
					es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
					return
				}
				if h.cfg.Paths != nil && path != "" {
					tx := h.lock()
					if r := tx.mapRemote(es, path); r.Err == nil {
						path = r.Mapping.Local
					}
					tx.unlock()
				}
				place = fmt.Sprintf("%s:%d", filepath.Base(path), line)
			}
		}
		es.exceptionPlaced(m, tid, admission.Clean(typ, admission.MaxTextRunes), admission.Clean(place, admission.MaxTextRunes))
	})
}

// exceptionPlaced shows the stop m, or holds it when its group's first
// stop was shown already. Runs on no lock.
func (es *ExecutorSession) exceptionPlaced(m Message, tid int64, typ, place string) {
	h := es.hub
	tx := h.lock()
	if _, ok := tx.executors[es.id]; !ok {
		tx.unlock()
		return
	}
	x := tx.exec(es)
	task := int64(-1)
	if x.task.TaskAttemptID != nil {
		task = *x.task.TaskAttemptID
	}
	tx.unlock()
	show := h.board.Raised(typ, place, task)
	h.watch.changed() // the groups changed
	if show {
		es.relay(m, true)
		return
	}
	he := &heldException{m: m, typ: typ, place: place, taskAttempt: task}
	tx = h.lock()
	if x.heldExceptions == nil {
		x.heldExceptions = map[int64]*heldException{}
	}
	x.heldExceptions[tid] = he
	he.timer = time.AfterFunc(h.cfg.ExceptionHold, func() { es.releaseException(tid, false) })
	tx.unlock()
	es.logger().Debug().Str("exception", typ).Str("place", place).Int64("thread", tid).
		Dur("hold", h.cfg.ExceptionHold).Msg("held a stop at an exception the user has seen stop already")
}

// releaseException ends the hold of thread tid's stop: shown, or
// continued so the exception goes on. It reports whether one was held.
func (es *ExecutorSession) releaseException(tid int64, show bool) bool {
	h := es.hub
	tx := h.lock()
	x := tx.exec(es)
	he := x.heldExceptions[tid]
	if he == nil {
		tx.unlock()
		return false
	}
	delete(x.heldExceptions, tid)
	he.timer.Stop()
	_, live := tx.executors[es.id]
	tx.unlock()
	h.board.Unhold(he.typ, he.place)
	h.watch.changed()
	switch {
	case !live:
	case show:
		es.relay(he.m, true)
	default:
		es.logger().Debug().Str("exception", he.typ).Str("place", he.place).Int64("thread", tid).
			Msg("a held stop at an exception runs on")
		es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
	}
	return true
}

// showWantedException shows the held stop of the task taskAttempt, if a
// worker holds one (the Board's OnWant).
func (h *Hub) showWantedException(taskAttempt int64) bool {
	tx := h.lock()
	var es *ExecutorSession
	var tid int64
	for _, e := range tx.executors {
		for t, he := range tx.exec(e).heldExceptions {
			if he.taskAttempt == taskAttempt {
				es, tid = e, t
			}
		}
	}
	tx.unlock()
	return es != nil && es.releaseException(tid, true)
}
