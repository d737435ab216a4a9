package dap

import "sort"

// This file lets executors go when no IDE session watches them any more:
// every breakpoint ever sent to them is cleared where it was sent (the
// executor's paths, not the IDE's), and they are resumed.

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

// recordSentLocked remembers that args went to es under key.
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

// clearSentLocked removes from es every breakpoint sent under a key that
// keep does not claim (nil keeps none), at every path it went to, and
// forgets those keys.
func (tx *held) clearSent(es *ExecutorSession, keep func(key string) bool) {
	h := tx.h
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
		paths := make([]string, 0, len(sb.sources))
		for p := range sb.sources {
			paths = append(paths, p)
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
			es.request(sb.command, args, h.cfg.FanoutTimeout, ignoreAnswer(es))
		}
	}
}

// releaseLocked lets an executor that no IDE session shows run on
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

// watchedLocked reports whether some IDE session shows es, now or once
// its child session is up: its own child session, or a root session it has
// not been detached from (merged, or announcing executors as children).
func (tx *held) watched(es *ExecutorSession) bool {
	if tx.children[es.id] != nil {
		return true
	}
	return tx.root != nil && !tx.exec(es).detached
}

// unwatchedStopLocked handles a stop nobody can see, whatever let it
// happen: a worker must never wait for a human who is not there.
func (tx *held) unwatchedStop(es *ExecutorSession, tid int64) {
	h := tx.h
	es.logger().Warn().Int64("thread", tid).
		Msg("executor stopped with no IDE session to show it; clearing its breakpoints and resuming it")
	tx.release(es)
	es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
}
