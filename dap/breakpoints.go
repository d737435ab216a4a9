package dap

import (
	"encoding/json"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sparkdap/sparkdap/pathmap"
)

// Breakpoints: the registry of what the IDE asked for, its fan-out to the
// executors, what each executor was sent and what it refused, and the one
// merged answer the IDE sees.

// bpEntry is the latest breakpoint request of one kind for one source (or the
// only one, for function and exception breakpoints), with the global ids the
// IDE knows its breakpoints by and the merged state shown to the IDE.
type bpEntry struct {
	key     string
	command string
	args    map[string]any
	owner   *ExecutorSession // nil: set from the root IDE for every executor
	// answered: the IDE has had the response, so it knows the ids and may get
	// breakpoint events about them.
	answered bool
	ids      []int64
	merged   []map[string]any // position → breakpoint as the IDE sees it
	// told is the message of each unverified position as the IDE last got
	// it (in the response or an event), so a new reason is sent once.
	told []string
	// why is pydevd's own reason behind merged's message, per position,
	// so a more telling reason can replace a less telling one.
	why []string
}

// breakpointRegistry keeps what the IDE asked for so it can be fanned out to
// executors present and replayed to those that connect later. It is guarded
// by the Hub's lock.
type breakpointRegistry struct {
	entries map[string]*bpEntry // global entries by key
	order   []string            // replay in the order the IDE set them
	byID    map[int64]bpRef     // global breakpoint id → where it lives
	nextID  int64
}

type bpRef struct {
	entry *bpEntry
	index int
}

func newBreakpointRegistry() *breakpointRegistry {
	return &breakpointRegistry{entries: map[string]*bpEntry{}, byID: map[int64]bpRef{}}
}

// bpKey identifies what a breakpoint request replaces: all breakpoints of one
// source, or all function or exception breakpoints.
func bpKey(command string, args map[string]any) string {
	if command != "setBreakpoints" {
		return command
	}
	src, _ := args["source"].(map[string]any)
	if p, ok := src["path"].(string); ok && p != "" {
		return command + "\x00" + p
	}
	if ref, ok := toInt(src["sourceReference"]); ok {
		return command + "\x00ref:" + strconv.FormatInt(ref, 10)
	}
	return command + "\x00"
}

// newEntry records a breakpoint request. owner nil makes it the global entry
// for its key, replacing the previous one.
func (r *breakpointRegistry) newEntry(command string, args map[string]any, owner *ExecutorSession) *bpEntry {
	withListPresent(command, args)
	e := &bpEntry{key: bpKey(command, args), command: command, args: args, owner: owner}
	if bps, ok := args["breakpoints"].([]any); ok {
		for i := range bps {
			line := any(nil)
			if b, ok := bps[i].(map[string]any); ok {
				line = b["line"]
			}
			e.grow(r, i+1)
			if line != nil {
				e.merged[i]["line"] = line
			}
		}
	}
	if owner == nil {
		if old := r.entries[e.key]; old != nil {
			r.drop(old)
		} else {
			r.order = append(r.order, e.key)
		}
		r.entries[e.key] = e
	}
	return e
}

// withListPresent gives a breakpoint request the list DAP lets a client
// leave out when it clears (go-dap's clients omit an empty one): pydevd
// before debugpy 1.8.8 iterates arguments.breakpoints (filters) without
// a check, and a missing list kills its reader thread, which ends the
// worker's debug session.
func withListPresent(command string, args map[string]any) {
	field := "breakpoints"
	switch command {
	case "setBreakpoints", "setFunctionBreakpoints":
	case "setExceptionBreakpoints":
		field = "filters"
	default:
		return
	}
	if _, ok := args[field].([]any); !ok {
		args[field] = []any{}
	}
}

// grow makes room for n positions, giving each new one a global id.
func (e *bpEntry) grow(r *breakpointRegistry, n int) {
	for len(e.ids) < n {
		r.nextID++
		id := r.nextID
		e.ids = append(e.ids, id)
		e.why = append(e.why, "")
		e.told = append(e.told, "")
		e.merged = append(e.merged, map[string]any{
			"id": json.Number(strconv.FormatInt(id, 10)), "verified": false,
			"reason": "pending", "message": pendingMessage(e)})
		r.byID[id] = bpRef{e, len(e.ids) - 1}
	}
}

// pendingMessage is what a breakpoint says until an executor that loads its
// code has bound it: pydevd's "verified" only means the file exists where it
// was sent, so nothing is claimed before then.
func pendingMessage(e *bpEntry) string {
	what := "this code"
	if src, ok := e.args["source"].(map[string]any); ok {
		if p, _ := src["path"].(string); p != "" {
			what = path.Base(p)
		} else if n, _ := src["name"].(string); n != "" {
			what = n
		}
	}
	return "pending: no executor has loaded " + what + " yet; the breakpoint turns verified when one does " +
		"(if it stays pending while tasks run, `sparkdap paths` shows where the executors load code from)"
}

// drop forgets an entry's ids.
func (r *breakpointRegistry) drop(e *bpEntry) {
	for _, id := range e.ids {
		delete(r.byID, id)
	}
}

// current reports whether e is still in force (not replaced by a newer
// request), so late answers to old requests are ignored.
func (tx *held) bpCurrent(e *bpEntry) bool {
	if e.owner != nil {
		return tx.exec(e.owner).overrides[e.key] == e
	}
	return tx.bps.entries[e.key] == e
}

// global returns the entries to replay, in the order they were first set.
func (r *breakpointRegistry) global() []*bpEntry {
	out := make([]*bpEntry, 0, len(r.order))
	for _, k := range r.order {
		out = append(out, r.entries[k])
	}
	return out
}

// clear forgets every global entry and returns the requests that remove them
// from an executor (empty lists), for when the IDE goes away.
func (r *breakpointRegistry) clear() []Message {
	undo := clearRequests(r.global())
	for _, e := range r.global() {
		r.drop(e)
	}
	r.entries, r.order = map[string]*bpEntry{}, nil
	return undo
}

// absorb folds one executor's answer for position i into the merged view:
// verified if any executor verified it. It reports whether the breakpoint
// just became verified.
func (e *bpEntry) absorb(i int, bp map[string]any) bool {
	cur := e.merged[i]
	verified, _ := bp["verified"].(bool)
	if cur["verified"] == true {
		return false
	}
	next := pick(bp, breakpointFields) // an executor says no more than this (allow.go)
	next["id"] = json.Number(strconv.FormatInt(e.ids[i], 10))
	delete(next, "source") // never a path of the executor's choosing
	if src, ok := e.args["source"]; ok {
		next["source"] = deepCopy(src) // the IDE's path, not whichever executor path bound
	}
	if !verified {
		// Keep the executor's most telling reason, with what to do about
		// it, so a rejected breakpoint says why; it reaches the IDE with
		// the response. No event: with several candidate paths per
		// executor most attempts fail, and only a binding is news.
		msg, _ := next["message"].(string)
		if refusalRank(msg) <= refusalRank(e.why[i]) {
			return false
		}
		e.why[i] = msg
		next["message"] = explainRefusal(msg)
		next["reason"] = "failed"
		if next["line"] == nil {
			next["line"] = cur["line"]
		}
		e.merged[i] = next
		return false
	}
	delete(next, "reason")
	delete(next, "message")
	e.merged[i] = next
	return true
}

// hit marks position i verified because an executor stopped on it: whatever
// was known of its paths, it is bound. It reports whether that is news.
func (e *bpEntry) hit(i int) bool {
	cur := e.merged[i]
	if cur["verified"] == true {
		return false
	}
	next := map[string]any{"id": cur["id"], "verified": true}
	for _, k := range []string{"line", "column", "endLine", "endColumn"} {
		if v, ok := cur[k]; ok {
			next[k] = v
		}
	}
	if src, ok := e.args["source"]; ok {
		next["source"] = deepCopy(src)
	}
	e.merged[i] = next
	return true
}

// body is the merged response body the IDE gets; it records what the IDE
// is told.
func (e *bpEntry) body() map[string]any {
	bps := make([]any, len(e.merged))
	for i, b := range e.merged {
		bps[i] = deepCopy(b)
		e.told[i], _ = b["message"].(string)
	}
	return map[string]any{"breakpoints": bps}
}

// clearRequests returns the requests that remove entries' breakpoints from
// an executor.
func clearRequests(entries []*bpEntry) []Message {
	var out []Message
	for _, e := range entries {
		args := map[string]any{}
		switch e.command {
		case "setBreakpoints":
			args["source"] = deepCopy(e.args["source"])
			args["breakpoints"] = []any{}
		case "setFunctionBreakpoints":
			args["breakpoints"] = []any{}
		case "setExceptionBreakpoints":
			args["filters"] = []any{}
		}
		out = append(out, newRequest(e.command, args))
	}
	return out
}

// samePlace returns the position in e of the breakpoint that asks for
// what position i of other (an entry of the same key) asks for: the same
// line of a source, the same function. -1 if e has none, or for kinds
// whose positions name no place (exception filters).
func (e *bpEntry) samePlace(other *bpEntry, i int) int {
	field := ""
	switch e.command {
	case "setBreakpoints":
		field = "line"
	case "setFunctionBreakpoints":
		field = "name"
	default:
		return -1
	}
	want, ok := bpField(other.args, i, field)
	if !ok {
		return -1
	}
	for j := range e.ids {
		if got, ok := bpField(e.args, j, field); ok && got == want {
			return j
		}
	}
	return -1
}

// bpField is field of the i-th breakpoint requested in args, as text.
func bpField(args map[string]any, i int, field string) (string, bool) {
	bps, _ := args["breakpoints"].([]any)
	if i < 0 || i >= len(bps) {
		return "", false
	}
	b, _ := bps[i].(map[string]any)
	if s, ok := b[field].(string); ok {
		return s, true
	}
	if n, ok := toInt(b[field]); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

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

// What each executor was sent, so that letting it go (held.release) clears
// every breakpoint ever sent to it where it was sent: the executor's
// paths, not the IDE's.

// sentBreakpoints is what one breakpoint key has been sent to an executor
// as. Guarded by the Hub's lock.
type sentBreakpoints struct {
	command string
	// sources maps each executor path a source breakpoint request went to
	// (with a PathMapper, every candidate path of the local file) to the
	// source object sent; "" holds the one request of a key without a path
	// (function and exception breakpoints, sourceReference sources).
	sources map[string]map[string]any
}

// recordSent remembers that args went to es under key.
func (x *executorState) recordSent(key, command string, args map[string]any) {
	if x.sent == nil {
		x.sent = map[string]*sentBreakpoints{}
	}
	sb := x.sent[key]
	if sb == nil {
		sb = &sentBreakpoints{command: command, sources: map[string]map[string]any{}}
		x.sent[key] = sb
	}
	src, _ := args["source"].(map[string]any)
	p, _ := src["path"].(string)
	var keep map[string]any
	if src != nil {
		keep = deepCopy(src).(map[string]any)
	}
	sb.sources[p] = keep
}

// clearSent removes from es every breakpoint sent under a key that
// keep does not claim (nil keeps none), at every path it went to, and
// forgets those keys.
func (tx *held) clearSent(es *ExecutorSession, keep func(key string) bool) {
	x := tx.exec(es)
	keys := make([]string, 0, len(x.sent))
	for k := range x.sent {
		if keep == nil || !keep(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		sb := x.sent[k]
		delete(x.sent, k)
		delete(x.refusals, k)
		tx.clearAt(es, sb, nil)
	}
}

// clearAt sends es the empty set of sb's kind at every path sb went to
// that keep does not claim (nil keeps none).
func (tx *held) clearAt(es *ExecutorSession, sb *sentBreakpoints, keep func(path string) bool) {
	paths := make([]string, 0, len(sb.sources))
	for p := range sb.sources {
		if keep == nil || !keep(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		args := map[string]any{}
		switch sb.command {
		case "setBreakpoints":
			if sb.sources[p] == nil {
				continue
			}
			args["source"] = deepCopy(sb.sources[p])
			args["breakpoints"] = []any{}
		case "setFunctionBreakpoints":
			args["breakpoints"] = []any{}
		case "setExceptionBreakpoints":
			args["filters"] = []any{}
		default:
			continue
		}
		es.request(sb.command, args, tx.h.cfg.FanoutTimeout, ignoreAnswer(es))
	}
}

// Refusals: per executor, what pydevd answered to the source
// breakpoints sent to it, so that a breakpoint no candidate path could bind
// is reported: in the IDE with pydevd's reason and what to do, and in
// `sparkdap paths`.

// bpAnswers is one executor's answers to the latest request of one
// breakpoint key. Guarded by the Hub's lock.
type bpAnswers struct {
	entry   *bpEntry
	pending int      // requests not answered yet
	tried   []string // executor paths the request went to
	pos     []bpPosAnswer
}

// bpPosAnswer is the best answer for one breakpoint position over every
// candidate path: bound anywhere, else the most telling reason.
type bpPosAnswer struct {
	line     int64
	verified bool
	message  string
}

// expectAnswers starts a new record for e on es: n requests are on
// their way.
func (x *executorState) expectAnswers(e *bpEntry, n int) {
	if e.command != "setBreakpoints" {
		return
	}
	if x.refusals == nil {
		x.refusals = map[string]*bpAnswers{}
	}
	x.refusals[e.key] = &bpAnswers{entry: e, pending: n}
}

// answered folds one answer (bps nil: failed or timed out) into es's
// record for e, if it is still the latest, and reports whether it was the
// last answer awaited.
func (x *executorState) answered(e *bpEntry, sentTo string, bps []any) bool {
	a := x.refusals[e.key]
	if a == nil || a.entry != e {
		return false
	}
	a.pending--
	if sentTo != "" {
		a.tried = append(a.tried, sentTo)
	}
	for len(a.pos) < len(bps) {
		a.pos = append(a.pos, bpPosAnswer{})
	}
	for i, item := range bps {
		bp, _ := item.(map[string]any)
		if bp == nil {
			continue
		}
		p := &a.pos[i]
		if line, ok := toInt(bp["line"]); ok && p.line == 0 {
			p.line = line
		}
		if v, _ := bp["verified"].(bool); v {
			p.verified = true
			continue
		}
		if msg, _ := bp["message"].(string); refusalRank(msg) > refusalRank(p.message) {
			p.message = msg
		}
	}
	return a.pending == 0
}

// notLoaded starts the reason given for a breakpoint pydevd set at a path
// the executor loads no code from.
const notLoaded = "Breakpoint in a file this executor loads no code from:"

// boundOnlyWhereLoaded returns pydevd's answer for breakpoints sent to
// executor path p, with every "verified" taken back when p is under none of
// the directories the executor loads code from. pydevd verifies a line in
// any file that exists: the developer's own checkout on a shared machine, a
// driver script whose functions run from another path. Such a breakpoint
// is set but would never stop, so the IDE must not show it bound. An
// executor that named no roots (not started by sparkdap's wrapper) leaves
// pydevd's word as it is.
func boundOnlyWhereLoaded(r pathmap.Roots, p string, bps []any) []any {
	if p == "" || loadsFrom(r, p) {
		return bps
	}
	out := make([]any, len(bps))
	for i, item := range bps {
		out[i] = item
		bp, ok := item.(map[string]any)
		if !ok || bp["verified"] != true {
			continue
		}
		bp = deepCopy(bp).(map[string]any)
		bp["verified"] = false
		bp["message"] = notLoaded + " " + truncate(p, 512) + "."
		out[i] = bp
	}
	return out
}

// loadsFrom reports whether executor path p is under one of roots' code
// directories (library ones included: code there is importable), or
// whether roots are unknown.
func loadsFrom(r pathmap.Roots, p string) bool {
	dirs := append(append([]string{r.DriverDir, r.SparkFiles, r.Cwd}, r.CodeDirs...), r.SysPath...)
	known := false
	p = path.Clean(p)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		known = true
		if !path.IsAbs(d) && r.Cwd != "" {
			d = path.Join(r.Cwd, d)
		}
		d = path.Clean(d)
		if d == "/" || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return !known
}

// verified records a breakpoint pydevd bound later (a breakpoint
// event).
func (x *executorState) verified(e *bpEntry, i int) {
	if a := x.refusals[e.key]; a != nil && a.entry == e && i < len(a.pos) {
		a.pos[i].verified = true
	}
}

// refusalRank orders pydevd's reasons by how much they tell: "does not
// exist" is what every wrong candidate path answers, so any other reason
// from the path that does exist wins over it.
func refusalRank(msg string) int {
	switch {
	case msg == "":
		return 0
	case strings.Contains(msg, "does not exist"):
		return 1
	case strings.HasPrefix(msg, notLoaded):
		return 2
	}
	return 3
}

// driverAdvice is what to do about a breakpoint in the driver's script:
// its functions reach executors pickled, under the driver's path.
const driverAdvice = "If it is the driver's script, its breakpoints bind when a task runs a function defined in it; " +
	"to bind them before, start the job with `sparkdap submit`, or pass the SPARKDAP_DRIVER_DIR setting `sparkdap conf` prints."

// explainRefusal adds to pydevd's reason what the developer can do about it.
func explainRefusal(msg string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	switch {
	case strings.Contains(msg, "does not exist"):
		return first + " The executor has this file at none of the paths sparkdap tried. " + driverAdvice +
			" Otherwise run `sparkdap paths` to see where the executors load code from, and fix `sparkdap serve --root DIR` or add --map REMOTE=LOCAL."
	case strings.HasPrefix(msg, notLoaded):
		return first + " pydevd can set it there, but the executor runs no code from that path. " + driverAdvice +
			" Otherwise ship the file (--py-files) or fix the mapping: `sparkdap paths` shows where the executors load code from; see `sparkdap serve --root DIR` and --map REMOTE=LOCAL."
	case strings.Contains(msg, "excluded by filters"):
		return first + " The executor counts this file as library code: set \"justMyCode\": false in your attach configuration."
	case strings.Contains(msg, "invalid line"):
		return first + " Put the breakpoint on a line with code."
	}
	return first
}

// BreakpointRefusal is a source breakpoint an executor could not set at any
// path, for `sparkdap paths`.
type BreakpointRefusal struct {
	Source  string   `json:"source"` // the IDE's (local) path
	Line    int64    `json:"line"`
	Message string   `json:"message"` // pydevd's reason, and what to do
	Tried   []string `json:"tried"`   // the executor paths it was sent to
}

// refusals lists es's refused source breakpoints, once every answer
// is in.
func (x *executorState) refused() []BreakpointRefusal {
	out := []BreakpointRefusal{}
	for _, a := range x.refusals {
		if a.pending > 0 {
			continue
		}
		src, _ := a.entry.args["source"].(map[string]any)
		local, _ := src["path"].(string)
		asked, _ := a.entry.args["breakpoints"].([]any)
		for i, p := range a.pos {
			if p.verified || p.message == "" {
				continue
			}
			if p.line == 0 && i < len(asked) {
				if b, ok := asked[i].(map[string]any); ok {
					p.line, _ = toInt(b["line"])
				}
			}
			tried := append([]string(nil), a.tried...)
			sort.Strings(tried)
			out = append(out, BreakpointRefusal{Source: local, Line: p.line, Message: explainRefusal(p.message), Tried: tried})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Line < out[j].Line
	})
	return out
}

// mirrorToGlobal folds position i of own, a child session's entry that
// bound there, into the root's entry for the same source and place: the
// executor that bound it gets the child's breakpoints instead of the
// root's, and without this the root would say "pending" for a breakpoint
// that stops the worker.
func (tx *held) mirrorToGlobal(own *bpEntry, i int) {
	g := tx.bps.entries[own.key]
	if g == nil {
		return
	}
	j := g.samePlace(own, i)
	if j < 0 || g.merged[j]["verified"] == true {
		return
	}
	if g.absorb(j, deepCopy(own.merged[i]).(map[string]any)) {
		tx.breakpointChanged(g, j)
	}
}

// absorbOverrides folds into the root's entry e what the executors that
// replace it with a child session's own entry have bound at the same
// places: they were not sent e, so their answers would never reach it.
func (tx *held) absorbOverrides(e *bpEntry) {
	for _, es := range tx.readyView() {
		own := tx.exec(es).overrides[e.key]
		if own == nil {
			continue
		}
		for i := range own.merged {
			if own.merged[i]["verified"] == true {
				if j := e.samePlace(own, i); j >= 0 {
					e.absorb(j, deepCopy(own.merged[i]).(map[string]any))
				}
			}
		}
	}
}
