package dap

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sparkdap/sparkdap/worker"
)

// This file relays pydevd's events to the IDE session that shows their
// executor, translated, and keeps what is needed to replay or describe them
// (stops, threads, the task label).

// eventTargetLocked is the IDE session that shows es's events, or nil.
func (tx *held) eventTarget(es *ExecutorSession) *IDESession {
	if c := tx.children[es.id]; c != nil {
		return c
	}
	if tx.root != nil && !tx.ide(tx.root).childMode {
		return tx.root
	}
	return nil
}

// executorEvent relays an event from pydevd, translated, to whichever IDE
// session shows that executor, and keeps the state needed to replay it.
func (h *Hub) executorEvent(es *ExecutorSession, m Message) {
	ev := m.Event()
	switch ev {
	case "initialized", "process":
		return // the proxy already did the handshake; the IDE had its own
	case "terminated":
		// pydevd is shutting down; the EOF that follows cleans up. Forwarding
		// it would end the IDE's whole session.
		es.logger().Debug().Msg("debuggee terminated")
		return
	case "sparkdapTask":
		h.taskEvent(es, m)
		return
	}
	m = allowedEvent(m)
	if m == nil {
		es.logger().Debug().Str("event", truncate(ev, 64)).Msg("dropping event the IDE has no use for")
		return
	}
	body := m.Body()
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	if !x.ready {
		// Still in its handshake: pydevd has nothing to show yet, and the
		// IDE nothing to see of an executor it does not know.
		es.logger().Debug().Str("event", truncate(m.Event(), 64)).Msg("dropping event sent during the handshake")
		return
	}
	tid, hasTid := toInt(body["threadId"])
	switch m.Event() {
	case "stopped", "continued", "thread":
		if !hasTid {
			// Without its thread the IDE cannot tell which executor's
			// thread it is about; pydevd always names one.
			es.logger().Warn().Str("event", m.Event()).Msg("dropping event without an integer threadId")
			return
		}
	}
	switch m.Event() {
	case "stopped":
		if !tx.watched(es) {
			tx.unwatchedStop(es, tid)
			return
		}
		if !x.learnThread(tid) {
			// Not shown, so resumed: a stop no one sees must not hold
			// the task.
			es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
			return
		}
		if x.stopped == nil {
			x.stopped = map[int64]Message{}
		}
		x.stopped[tid] = deepCopy(m).(Message)
		tx.focused = es
		tx.armMaxStop(es)
		tx.learnStopLocation(es, tid)
		tx.hitBreakpoints(es, m)
	case "output":
		if text, ok := body["output"].(string); ok {
			x.outputBytes += int64(len(text))
		}
	case "continued":
		if all, _ := body["allThreadsContinued"].(bool); all {
			clear(x.stopped)
			h.ids.Release(es.id, kindFrame, kindVariables)
		} else {
			delete(x.stopped, tid)
		}
	case "thread":
		if body["reason"] == "exited" {
			x.forgetThread(tid)
			delete(x.stopped, tid)
		} else if !x.learnThread(tid) {
			return
		}
	case "breakpoint":
		tx.breakpointEvent(es, m)
		return
	}
	target := tx.eventTarget(es)
	if m.Event() == "output" && tx.holdOutput(es, target, m) {
		return
	}
	if target == nil {
		if !x.unshownLogged {
			x.unshownLogged = true
			es.logger().Debug().Str("event", m.Event()).
				Msg("dropping events while no IDE session shows this executor (said once per executor)")
		}
		return
	}
	if !tx.ide(target).configured && (m.Event() == "stopped" || m.Event() == "continued") {
		// Held until the session's configurationDone, which replays the
		// stops still current (ideConfigured): sent now as well, a stop
		// would reach the session twice, and a client that continues once
		// per stopped event would resume the worker's next stop unseen.
		es.logger().Debug().Str("event", m.Event()).Int64("thread", tid).
			Msg("held until the IDE session's configurationDone")
		return
	}
	tx.relayEvent(es, m, target)
	if m.Event() == "thread" && body["reason"] == "exited" {
		h.ids.ReleaseOne(kindThread, es.id, tid)
	}
}

// relayEventLocked sends target the allowed event m of es, translated:
// global ids, local paths, and in the merged view its executor's label.
func (tx *held) relayEvent(es *ExecutorSession, m Message, target *IDESession) {
	h := tx.h
	out := deepCopy(m).(Message)
	if err := h.ids.globalize(es.id, out["body"]); err != nil {
		es.logger().Warn().Err(err).Str("event", m.Event()).Msg("dropping event")
		return
	}
	tx.mapPaths(es, out["body"])
	if m.Event() == "stopped" {
		tx.globalBreakpointIDs(es, out, target)
	}
	if target == tx.root {
		tx.mergedView(es, out)
	}
	_ = target.w.send(out, nil)
}

// learnStopLocationLocked asks pydevd where a thread stopped (its top
// frame), for the status view: the stopped event does not say.
func (tx *held) learnStopLocation(es *ExecutorSession, tid int64) {
	h := tx.h
	tx.exec(es).stoppedAt = ""
	args := map[string]any{"threadId": tid, "startFrame": 0, "levels": 1}
	es.request("stackTrace", args, h.cfg.RequestTimeout, func(m Message, err error) {
		if err != nil || !m.Success() {
			return
		}
		frames, _ := m.Body()["stackFrames"].([]any)
		if len(frames) == 0 {
			return
		}
		top, _ := frames[0].(map[string]any)
		line, _ := toInt(top["line"])
		src, _ := top["source"].(map[string]any)
		path, _ := src["path"].(string)
		tx := h.lock()
		defer tx.unlock()
		if h.cfg.Paths != nil && path != "" {
			if r := tx.mapRemote(es, path); r.Err == nil {
				path = r.Mapping.Local
			}
		}
		if _, still := tx.exec(es).stopped[tid]; still {
			tx.exec(es).stoppedAt = worker.Clean(fmt.Sprintf("%s:%d", filepath.Base(path), line), worker.MaxTextRunes)
		}
	})
}

// globalBreakpointIDsLocked names the breakpoints a stop hit by the ids
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

// mergedViewLocked adapts one executor's event to a session that shows all
// executors at once: a stop or resume concerns that process only, and its
// output is prefixed with its label.
func (tx *held) mergedView(es *ExecutorSession, out Message) {
	b, _ := out["body"].(map[string]any)
	if b == nil {
		return
	}
	switch out.Event() {
	case "stopped":
		b["allThreadsStopped"] = false
	case "continued":
		b["allThreadsContinued"] = false
	case "output":
		if s, ok := b["output"].(string); ok && b["category"] != "telemetry" {
			b["output"] = tx.exec(es).prefixLines(s)
		}
	}
}

// prefixLines puts the executor's label before each line of output, keeping
// track of lines split across events.
func (x *executorState) prefixLines(s string) string {
	var sb strings.Builder
	prefix := "[" + x.label() + "] "
	for len(s) > 0 {
		if !x.midLine {
			sb.WriteString(prefix)
		}
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			sb.WriteString(s)
			x.midLine = true
			break
		}
		sb.WriteString(s[:i+1])
		s = s[i+1:]
		x.midLine = false
	}
	return sb.String()
}

// taskEvent takes the wrapper's report of which Spark task this worker runs.
func (h *Hub) taskEvent(es *ExecutorSession, m Message) {
	var ti TaskInfo
	if err := fromMap(m.Body(), &ti); err != nil {
		es.logger().Warn().Err(err).Msg("ignoring malformed sparkdapTask event")
		return
	}
	ti = ti.Clean() // the cluster's words, shown to people
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	if ti.Roots == nil {
		ti.Roots = x.task.Roots
	}
	x.task = ti
	x.threadsChanged() // its label names its threads
	if ti.Roots != nil && es.paths.SetRoots(*ti.Roots) {
		if !x.ready {
			// executorReady sends them all, to the new roots.
			return
		}
		// New roots, new candidate paths: send again what this executor
		// is meant to have (none once its child session has left).
		if !x.detached {
			for _, e := range tx.bps.global() {
				if x.overrides[e.key] == nil {
					tx.sendBreakpoints(es, e, nil)
				}
			}
		}
		for _, e := range x.overrides {
			tx.sendBreakpoints(es, e, nil)
		}
	}
	es.logger().Info().Str("label", x.label()).Msg("executor task")
	tx.announce(es)
}

// breakpointEventLocked relays pydevd's news about one breakpoint under the
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

// breakpointChangedLocked tells the IDE session that owns e about position i.
func (tx *held) breakpointChanged(e *bpEntry, i int) {
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

// hitBreakpointsLocked marks verified the breakpoints a stop names as hit
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
