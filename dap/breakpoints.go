package dap

import (
	"encoding/json"
	"path"
	"strconv"
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

// handBack re-points es's pydevd ids for own, a child session's entry
// being dropped because its session ended (unlist), at the root's
// breakpoint at the same place, which the root's set sent in its stead
// replaces it with: until that set reaches pydevd, own's breakpoints stay
// armed there, and a worker whose new task gets to the line first stops
// naming own's id. Forgotten, that id would make the stop (which lists
// the worker again) name no breakpoint in the new child session; handed
// back, globalBreakpointIDs names it by the new session's own breakpoint
// at that place. Ids with no root breakpoint at their place are forgotten.
func (tx *held) handBack(es *ExecutorSession, own *bpEntry) {
	x := tx.exec(es)
	g := tx.bps.entries[own.key]
	for local, id := range x.bpIDs {
		ref, ok := tx.bps.byID[id]
		if !ok || ref.entry != own {
			continue
		}
		if g != nil {
			if j := g.samePlace(own, ref.index); j >= 0 {
				x.bpIDs[local] = g.ids[j]
				continue
			}
		}
		delete(x.bpIDs, local)
	}
}
