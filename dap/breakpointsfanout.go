package dap

import (
	"encoding/json"
	"slices"
	"sync/atomic"
)

// The fan-out: breakpoint requests go out to executors and their answers
// are folded into the one the IDE gets.

// setBreakpoints records a breakpoint request from the IDE, fans it out and
// answers with the merged result. owner nil means every executor (the root
// session); otherwise only owner (a child session).
func (h *Hub) setBreakpoints(ide *IDESession, req Message, owner *ExecutorSession) {
	args := req.Arguments()
	if args == nil {
		args = map[string]any{}
	}
	tx := h.lock()
	e := tx.bps.newEntry(req.Command(), deepCopy(args).(map[string]any), owner)
	var targets []*ExecutorSession
	if owner != nil {
		if old := tx.exec(owner).overrides[e.key]; old != nil {
			tx.bps.drop(old)
		}
		if tx.exec(owner).overrides == nil {
			tx.exec(owner).overrides = map[string]*bpEntry{}
		}
		tx.exec(owner).overrides[e.key] = e
		if tx.exec(owner).ready {
			targets = []*ExecutorSession{owner}
		}
	} else {
		for _, es := range tx.ready() {
			if !tx.exec(es).detached && tx.exec(es).overrides[e.key] == nil {
				targets = append(targets, es)
			}
		}
	}
	answer := func() {
		tx := h.lock()
		if owner == nil {
			tx.absorbOverrides(e)
		}
		e.answered = true
		body := e.body()
		tx.unlock()
		if req.Command() == "setExceptionBreakpoints" && len(e.ids) == 0 {
			body = nil
		}
		ide.reply(newResponse(req, body))
	}
	var left atomic.Int64
	left.Store(int64(len(targets)))
	for _, es := range targets {
		tx.sendBreakpoints(es, e, func() {
			if left.Add(-1) == 0 {
				answer()
			}
		})
	}
	tx.unlock()
	if len(targets) == 0 {
		answer()
	}
}

// sendBreakpoints sends entry e to one executor and folds the
// answers into the merged view. With a PathMapper, a source's breakpoints
// go to every executor path the local file may have there. done, if set,
// runs once every request has been answered or has failed.
func (tx *held) sendBreakpoints(es *ExecutorSession, e *bpEntry, done func()) {
	h := tx.h
	x := tx.exec(es)
	var requests []map[string]any
	paths := tx.breakpointTargets(es, e)
	switch {
	case e.command == "setExceptionBreakpoints" && x.task.PostMortem:
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
	x.expectAnswers(e, len(requests))
	var left atomic.Int64
	left.Store(int64(len(requests)))
	for _, args := range requests {
		x.recordSent(e.key, e.command, args)
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
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	if e.command == "setBreakpoints" {
		bps = boundOnlyWhereLoaded(es.paths.Roots(), executorPath(e, sentTo), bps)
	}
	complete := x.answered(e, sentTo, bps)
	live := tx.bpCurrent(e)
	if len(bps) > 0 {
		e.grow(tx.bps, len(bps))
	}
	for i, item := range bps {
		bp, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if local, ok := toInt(bp["id"]); ok {
			if x.bpIDs == nil {
				x.bpIDs = map[int64]int64{}
			}
			x.bpIDs[local] = e.ids[i]
		}
		if e.absorb(i, bp) && live {
			tx.breakpointChanged(e, i)
		}
	}
	if complete && live {
		// Every candidate path of this executor has answered: a new
		// reason why nothing bound (it was pending when the IDE got its
		// response) is news, sent once.
		for i := range e.merged {
			if msg, _ := e.merged[i]["message"].(string); e.merged[i]["verified"] != true && msg != e.told[i] {
				tx.breakpointChanged(e, i)
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

// What pydevd says about breakpoints later (a breakpoint event, a stop that
// hit one) is folded into the merged view under the global ids.

// breakpointEvent relays pydevd's news about one breakpoint under the
// breakpoint's global id, merged with the other executors' view.
func (tx *held) breakpointEvent(es *ExecutorSession, m Message) {
	x := tx.exec(es)
	bp, _ := m.Body()["breakpoint"].(map[string]any)
	local, ok := toInt(bp["id"])
	if !ok {
		return
	}
	global, ok := x.bpIDs[local]
	if !ok {
		return
	}
	ref, ok := tx.bps.byID[global]
	if !ok || !tx.bpCurrent(ref.entry) {
		return
	}
	if v, _ := bp["verified"].(bool); v {
		x.verified(ref.entry, ref.index)
	}
	if ref.entry.absorb(ref.index, bp) {
		tx.breakpointChanged(ref.entry, ref.index)
	}
}

// breakpointChanged tells the IDE session that owns e about position i.
// A child session's breakpoint that bound is news for the root too: its
// own request for that source skipped the executor (the child's
// breakpoints replace the root's there), so the root's entry learns the
// binding from the child's (mirrorToGlobal).
func (tx *held) breakpointChanged(e *bpEntry, i int) {
	if e.owner != nil && e.merged[i]["verified"] == true {
		tx.mirrorToGlobal(e, i)
	}
	target := tx.root
	if e.owner != nil {
		target = tx.children[e.owner.id]
	}
	if target == nil || !e.answered {
		return
	}
	e.told[i], _ = e.merged[i]["message"].(string)
	_ = target.w.send(newEvent("breakpoint", map[string]any{
		"reason": "changed", "breakpoint": deepCopy(e.merged[i])}), nil)
}

// hitBreakpoints marks verified the breakpoints a stop names as hit
// (pydevd's ids, before globalization): a breakpoint that stopped a task is
// bound, whatever its paths said. The IDE hears it before the stop.
func (tx *held) hitBreakpoints(es *ExecutorSession, m Message) {
	x := tx.exec(es)
	hits, _ := m.Body()["hitBreakpointIds"].([]any)
	for _, v := range hits {
		local, ok := toInt(v)
		if !ok {
			continue
		}
		ref, ok := tx.bps.byID[x.bpIDs[local]]
		if !ok || !tx.bpCurrent(ref.entry) {
			continue
		}
		x.verified(ref.entry, ref.index)
		if ref.entry.hit(ref.index) {
			tx.breakpointChanged(ref.entry, ref.index)
		}
	}
}

// globalBreakpointIDs names the breakpoints a stop hit by the ids
// the IDE session target knows them by. A child session that set
// breakpoints of its own for a source knows those ids, not the root's: a
// stop at one of the root's breakpoints (pydevd hit it before the child's
// replaced it) is named by the child's breakpoint at the same place. Ids
// the session does not know (a breakpoint since replaced) are left out.
func (tx *held) globalBreakpointIDs(es *ExecutorSession, ev Message, target *IDESession) {
	x := tx.exec(es)
	b, _ := ev["body"].(map[string]any)
	hits, ok := b["hitBreakpointIds"].([]any)
	if !ok {
		return
	}
	out := make([]any, 0, len(hits))
	for _, v := range hits {
		local, ok := toInt(v)
		if !ok {
			continue
		}
		g, ok := x.bpIDs[local]
		if !ok {
			continue
		}
		ref, ok := tx.bps.byID[g]
		if !ok {
			continue
		}
		if own := x.overrides[ref.entry.key]; own != nil && own != ref.entry && target != nil && target.executor.Load() == es {
			i := own.samePlace(ref.entry, ref.index)
			if i < 0 {
				continue
			}
			g = own.ids[i]
		}
		if !slices.Contains(out, any(json.Number(itoa(g)))) {
			out = append(out, json.Number(itoa(g)))
		}
	}
	b["hitBreakpointIds"] = out
}
