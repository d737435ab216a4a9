package dap

import "sync/atomic"

// This file fans breakpoint requests out to executors and folds their
// answers into the one the IDE gets (see breakpointRegistry).

// setBreakpoints records a breakpoint request from the IDE, fans it out and
// answers with the merged result. owner nil means every executor (the root
// session); otherwise only owner (a child session).
func (h *Hub) setBreakpoints(ide *IDESession, req Message, owner *ExecutorSession) {
	args := req.Arguments()
	if args == nil {
		args = map[string]any{}
	}
	h.mu.Lock()
	e := h.bps.newEntry(req.Command(), deepCopy(args).(map[string]any), owner)
	var targets []*ExecutorSession
	if owner != nil {
		if old := owner.overrides[e.key]; old != nil {
			h.bps.drop(old)
		}
		if owner.overrides == nil {
			owner.overrides = map[string]*bpEntry{}
		}
		owner.overrides[e.key] = e
		if owner.ready {
			targets = []*ExecutorSession{owner}
		}
	} else {
		for _, es := range h.readyLocked() {
			if !es.detached && es.overrides[e.key] == nil {
				targets = append(targets, es)
			}
		}
	}
	answer := func() {
		h.mu.Lock()
		e.answered = true
		body := e.body()
		h.mu.Unlock()
		if req.Command() == "setExceptionBreakpoints" && len(e.ids) == 0 {
			body = nil
		}
		ide.reply(newResponse(req, body))
	}
	var left atomic.Int64
	left.Store(int64(len(targets)))
	for _, es := range targets {
		h.sendBreakpointsLocked(es, e, func() {
			if left.Add(-1) == 0 {
				answer()
			}
		})
	}
	h.mu.Unlock()
	if len(targets) == 0 {
		answer()
	}
}

// sendBreakpointsLocked sends entry e to one executor and folds the
// answers into the merged view. With a PathMapper, a source's breakpoints
// go to every executor path the local file may have there. done, if set,
// runs once every request has been answered or has failed.
func (h *Hub) sendBreakpointsLocked(es *ExecutorSession, e *bpEntry, done func()) {
	var requests []map[string]any
	paths := h.breakpointTargetsLocked(es, e)
	switch {
	case e.command == "setExceptionBreakpoints" && es.task.PostMortem:
		requests = []map[string]any{withPostMortem(e.args)}
	case paths != nil:
		for _, p := range paths {
			args := deepCopy(e.args).(map[string]any)
			args["source"].(map[string]any)["path"] = p
			requests = append(requests, args)
		}
	default:
		requests = []map[string]any{deepCopy(e.args).(map[string]any)}
	}
	es.expectAnswersLocked(e, len(requests))
	var left atomic.Int64
	left.Store(int64(len(requests)))
	for _, args := range requests {
		es.recordSentLocked(e.key, e.command, args)
		sentTo := ""
		if src, ok := args["source"].(map[string]any); ok {
			sentTo, _ = src["path"].(string)
		}
		es.request(e.command, args, h.cfg.FanoutTimeout, func(m Message, err error) {
			if err != nil {
				es.logger().Warn().Err(err).Str("command", e.command).Msg("breakpoints not set on executor")
			}
			h.absorbBreakpoints(es, e, sentTo, m, err)
			if left.Add(-1) == 0 && done != nil {
				done()
			}
		})
	}
}

// absorbBreakpoints folds one executor's answer to a breakpoint request
// sent to path sentTo into the merged view and the executor's own record.
func (h *Hub) absorbBreakpoints(es *ExecutorSession, e *bpEntry, sentTo string, m Message, err error) {
	if err == nil && !m.Success() {
		es.logger().Warn().Str("command", e.command).Str("error", m.ErrorMessage()).Msg("executor refused breakpoints")
	}
	var bps []any
	if err == nil && m.Success() {
		bps, _ = m.Body()["breakpoints"].([]any)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.command == "setBreakpoints" {
		bps = boundOnlyWhereLoaded(es.paths.Roots(), executorPath(e, sentTo), bps)
	}
	complete := es.answeredLocked(e, sentTo, bps)
	live := h.bps.current(e)
	if len(bps) > 0 {
		e.grow(h.bps, len(bps))
	}
	for i, item := range bps {
		bp, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if local, ok := toInt(bp["id"]); ok {
			if es.bpIDs == nil {
				es.bpIDs = map[int64]int64{}
			}
			es.bpIDs[local] = e.ids[i]
		}
		if e.absorb(i, bp) && live {
			h.breakpointChangedLocked(e, i)
		}
	}
	if complete && live {
		// Every candidate path of this executor has answered: a new
		// reason why nothing bound (it was pending when the IDE got its
		// response) is news, sent once.
		for i := range e.merged {
			if msg, _ := e.merged[i]["message"].(string); e.merged[i]["verified"] != true && msg != e.told[i] {
				h.breakpointChangedLocked(e, i)
			}
		}
	}
}

// executorPath is the path a source breakpoint request went to on the
// executor: sentTo, or the IDE's own path when paths pass unchanged.
func executorPath(e *bpEntry, sentTo string) string {
	if sentTo != "" {
		return sentTo
	}
	src, _ := e.args["source"].(map[string]any)
	p, _ := src["path"].(string)
	return p
}

// withPostMortem adds the userUnhandled filter to exception breakpoint
// arguments, for a worker started with --post-mortem.
func withPostMortem(args map[string]any) map[string]any {
	out := deepCopy(args).(map[string]any)
	filters, _ := out["filters"].([]any)
	for _, f := range filters {
		if f == "userUnhandled" {
			return out
		}
	}
	out["filters"] = append(filters, "userUnhandled")
	return out
}
