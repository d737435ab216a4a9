package dap

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
)

// The root session's merged view of threads, and its continue-all and
// pause-all.
//
// Merged threads come from what the proxy knows, not from a round trip to
// every executor: each ExecutorSession keeps its thread list current from
// pydevd's thread events and its last threads answer (threadsKnown says the
// list is complete). A merged threads request asks only the executors whose
// list is not known, and requests that arrive while such a request is in
// flight wait for the same answer instead of sending another. A client that
// refreshes threads on every stopped event (nvim-dap, VS Code) thus costs a
// copy of the cached entries, not one round trip per executor per stop.

// mergedThreads answers threads for the root session: every executor's
// threads, named with its label. In child-session mode the root has none.
func (s *IDESession) mergedThreads(req Message) {
	h := s.hub
	tx := h.lock()
	if tx.ide(s).childMode {
		tx.unlock()
		s.reply(newResponse(req, map[string]any{"threads": []any{}}))
		return
	}
	var unknown []*ExecutorSession
	for _, es := range tx.readyView() {
		if !tx.exec(es).threadsKnown {
			unknown = append(unknown, es)
		}
	}
	if len(unknown) == 0 {
		body := tx.mergedThreadsBody()
		tx.unlock()
		s.replyEncoded(req, body)
		return
	}
	var left atomic.Int64
	left.Store(int64(len(unknown)))
	finish := func() {
		if left.Add(-1) != 0 {
			return
		}
		// Built from the executors ready now: one that left meanwhile
		// had its threads' exits sent already.
		tx := h.lock()
		body := tx.mergedThreadsBody()
		tx.unlock()
		s.replyEncoded(req, body)
	}
	for _, es := range unknown {
		tx.fetchThreads(es, finish)
	}
	tx.unlock()
}

// threadsJSON is es's entries of a merged threads answer, encoded and
// comma-separated: global ids, names prefixed with its label. It is kept
// until something it shows changes.
func (tx *held) threadsJSON(es *ExecutorSession) []byte {
	h := tx.h
	x := tx.exec(es)
	if x.threadsJSON != nil {
		return x.threadsJSON
	}
	out := []byte{}
	prefix := "[" + x.label() + "] "
	for _, tid := range x.threadOrder {
		g, err := h.ids.Global(kindThread, es.id, tid)
		if err != nil {
			continue
		}
		name := x.threads[tid]
		if name == "" {
			name = "thread " + strconv.FormatInt(tid, 10)
		}
		nb, _ := json.Marshal(prefix + name) // a string always encodes
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"id":`...)
		out = strconv.AppendInt(out, g, 10)
		out = append(out, `,"name":`...)
		out = append(out, nb...)
		out = append(out, '}')
	}
	x.threadsJSON = out
	return out
}

// mergedThreadsBody is the body of a merged threads answer: every
// ready executor's threads, in executor order.
func (tx *held) mergedThreadsBody() []byte {
	body := append(make([]byte, 0, 256), `{"threads":[`...)
	first := true
	for _, es := range tx.readyView() {
		if es.w.closedErr() != nil {
			// Its connection ended and its session is being cleaned up
			// (failed requests are answered first): its threads' exits
			// follow.
			continue
		}
		j := tx.threadsJSON(es)
		if len(j) == 0 {
			continue
		}
		if !first {
			body = append(body, ',')
		}
		first = false
		body = append(body, j...)
	}
	return append(body, "]}"...)
}

// fetchThreads makes sure a threads request to es is in flight, and
// has done called (on no lock) once it is answered, failed or timed out.
// Callers that come while one is in flight share it.
func (tx *held) fetchThreads(es *ExecutorSession, done func()) {
	h := tx.h
	x := tx.exec(es)
	x.threadsWaiters = append(x.threadsWaiters, done)
	if x.threadsAsking {
		return
	}
	x.threadsAsking = true
	gen := x.threadsGen
	es.request("threads", nil, h.cfg.FanoutTimeout, func(m Message, err error) {
		if err == nil && !m.Success() {
			err = &errExecutorRefused{m.ErrorMessage()}
		}
		tx := h.lock()
		waiters := tx.exec(es).threadsWaiters
		tx.exec(es).threadsWaiters = nil
		tx.exec(es).threadsAsking = false
		if err == nil {
			tx.exec(es).absorbThreads(m, gen)
		}
		tx.unlock()
		if err != nil {
			es.logger().Debug().Err(err).Msg("threads: no answer; the merged list shows what is known")
		}
		for _, w := range waiters {
			w()
		}
	})
}

// errExecutorRefused is a failed response from pydevd.
type errExecutorRefused struct{ msg string }

func (e *errExecutorRefused) Error() string { return "executor refused: " + truncate(e.msg, 200) }

// replyEncoded answers req with success and an already encoded body.
func (s *IDESession) replyEncoded(req Message, body []byte) {
	head := Message{"type": "response", "request_seq": json.Number(strconv.FormatInt(req.Seq(), 10)),
		"command": req.Command(), "success": true}
	_ = s.w.sendWithBody(head, body)
}

// threadArg classifies a request's threadId: present with a nonzero
// integer (the thread it names is looked up by route), absent or zero
// (names nothing), or "*" (pydevd's "every thread").
func threadArg(args map[string]any) (all, none bool) {
	v, ok := args["threadId"]
	if !ok || v == nil {
		return false, true
	}
	if s, ok := v.(string); ok && s == "*" {
		return true, false
	}
	n, ok := toInt(v)
	return false, ok && n == 0
}

// runControl serves continue, pause and the steps for the root session in
// merged mode. continue with singleThread false (or threadId "*") resumes
// every stopped executor and says allThreadsContinued; pause without a
// thread (or with "*", or singleThread false) pauses every running one.
// A request naming a thread goes to that thread's executor alone, as
// before; one naming none is refused rather than sent to whichever
// executor stopped last.
func (s *IDESession) runControl(req Message) {
	args := req.Arguments()
	if args == nil {
		args = map[string]any{}
	}
	all, none := threadArg(args)
	if single, ok := args["singleThread"].(bool); ok && !single && (req.Command() == "continue" || req.Command() == "pause") {
		all = true
	}
	switch {
	case all && req.Command() == "continue":
		s.continueAll(req)
	case (all || none) && req.Command() == "pause":
		s.pauseAll(req)
	case all:
		s.fail(req, "%s: threadId \"*\" is not supported; name the thread to step", req.Command())
	case none:
		if req.Command() == "continue" {
			s.fail(req, "continue needs the threadId of a stopped thread (each executor's threads are listed under its label); "+
				"to resume every stopped executor, send continue with \"singleThread\": false")
		} else {
			s.fail(req, "%s needs the threadId of a stopped thread (each executor's threads are listed under its label)", req.Command())
		}
	default:
		s.route(req)
	}
}

// continueAll resumes every executor the session shows that is stopped,
// and answers once each has answered (or its time is up).
func (s *IDESession) continueAll(req Message) {
	h := s.hub
	tx := h.lock()
	var targets []*ExecutorSession
	var tids []int64
	for _, es := range tx.ready() {
		if len(tx.exec(es).stopped) == 0 || tx.eventTarget(es) != s {
			continue
		}
		var tid int64
		for t := range tx.exec(es).stopped {
			tid = t
			break
		}
		clear(tx.exec(es).stopped)
		h.ids.Release(es.id, kindFrame, kindVariables)
		h.watch.changed()
		targets = append(targets, es)
		tids = append(tids, tid)
	}
	tx.unlock()
	s.allOf(req, targets, func(i int) any { return map[string]any{"threadId": tids[i]} },
		map[string]any{"allThreadsContinued": true})
}

// pauseAll pauses every executor the session shows that is not stopped.
// pydevd suspends all of a process's threads for threadId "*" (as
// debugpy's adapter always sends it) and reports each stop with a stopped
// event.
func (s *IDESession) pauseAll(req Message) {
	h := s.hub
	tx := h.lock()
	var targets []*ExecutorSession
	for _, es := range tx.ready() {
		if len(tx.exec(es).stopped) == 0 && tx.eventTarget(es) == s {
			targets = append(targets, es)
		}
	}
	tx.unlock()
	s.allOf(req, targets, func(int) any { return map[string]any{"threadId": "*"} }, nil)
}

// allOf sends req's command to each target with args(i) and answers req
// once all have answered: success unless every one of them failed.
func (s *IDESession) allOf(req Message, targets []*ExecutorSession, args func(i int) any, body map[string]any) {
	h := s.hub
	if len(targets) == 0 {
		s.reply(newResponse(req, body))
		return
	}
	var left, failed atomic.Int64
	left.Store(int64(len(targets)))
	var firstErr atomic.Value
	for i, es := range targets {
		es.request(req.Command(), args(i), h.cfg.RequestTimeout, func(m Message, err error) {
			if err == nil && !m.Success() {
				err = &errExecutorRefused{m.ErrorMessage()}
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				es.logger().Warn().Err(err).Str("command", req.Command()).Msg("executor did not take a request for every executor")
			}
			if left.Add(-1) != 0 {
				return
			}
			if n := failed.Load(); n == int64(len(targets)) {
				s.fail(req, "%s: no executor took it (%d tried; first error: %v)", req.Command(), n, firstErr.Load())
				return
			}
			s.reply(newResponse(req, body))
		})
	}
}
