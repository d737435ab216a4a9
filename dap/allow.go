package dap

import (
	"encoding/json"
	"path"
)

// This file is the allowlist of what an executor may say to the IDE. An
// executor is not trusted (anyone holding the token can pose as one), and
// some IDEs act on what they are told: VS Code's Python extension turns a
// debugpyAttach event into a new debug session of the event's choosing. So
// only the events pydevd legitimately sends are relayed, each with only the
// fields the IDE needs.

// relayedEvents maps each event relayed to the IDE to the body fields kept.
var relayedEvents = map[string][]string{
	"stopped":      {"reason", "description", "threadId", "preserveFocusHint", "text", "allThreadsStopped", "hitBreakpointIds"},
	"continued":    {"threadId", "allThreadsContinued"},
	"thread":       {"reason", "threadId"},
	"output":       {"category", "output", "group", "variablesReference", "source", "line", "column"},
	"breakpoint":   {"reason", "breakpoint"},
	"module":       {"reason", "module"},
	"loadedSource": {"reason", "source"},
}

// relayedOutput lists the output categories relayed; pydevd sends no other
// (telemetry is debugpy's adapter's, and goes to whoever runs it).
var relayedOutput = map[string]bool{"": true, "console": true, "important": true, "stdout": true, "stderr": true}

// sourceFields are the fields of a Source object the IDE gets. Nested
// sources, adapterData and checksums are dropped.
var sourceFields = []string{"name", "path", "sourceReference", "presentationHint", "origin"}

// moduleFields are the fields of a Module object the IDE gets.
var moduleFields = []string{"id", "name", "path", "isOptimized", "isUserCode", "version", "symbolStatus"}

// breakpointFields are the fields of a Breakpoint object the IDE gets.
var breakpointFields = []string{"id", "verified", "message", "source", "line", "column", "endLine", "endColumn", "reason"}

// pick returns a deep copy of m's fields named in keep.
func pick(m map[string]any, keep []string) map[string]any {
	out := make(map[string]any, len(keep))
	for _, k := range keep {
		if v, ok := m[k]; ok {
			out[k] = deepCopy(v)
		}
	}
	return out
}

// allowedEvent returns the event the IDE may get for m, reduced to the
// allowed fields, or nil if m is not relayed at all.
func allowedEvent(m Message) Message {
	keep, ok := relayedEvents[m.Event()]
	if !ok {
		return nil
	}
	body := pick(m.Body(), keep)
	if m.Event() == "output" {
		cat, isStr := body["category"].(string)
		if body["category"] != nil && (!isStr || !relayedOutput[cat]) {
			return nil
		}
	}
	for k, fields := range map[string][]string{"source": sourceFields, "module": moduleFields, "breakpoint": breakpointFields} {
		if v, ok := body[k]; ok {
			obj, isObj := v.(map[string]any)
			if !isObj {
				delete(body, k)
				continue
			}
			obj = pick(obj, fields)
			if src, ok := obj["source"].(map[string]any); ok {
				obj["source"] = pick(src, sourceFields)
			}
			body[k] = obj
		}
	}
	return newEvent(m.Event(), body)
}

// allowedResponse is the executor's answer to req as the IDE gets it: a
// response to the IDE's own request, whatever type, command or extra
// fields the executor put in.
func allowedResponse(req, m Message) Message {
	out := Message{"type": "response", "request_seq": json.Number(itoa(req.Seq())), "command": req.Command(), "success": m.Success()}
	if msg, ok := m["message"].(string); ok {
		out["message"] = truncate(msg, 4096)
	} else if !m.Success() {
		out["message"] = "request failed"
	}
	if b, ok := m["body"].(map[string]any); ok {
		// Taken, not copied: m is this answer's own decoding, which
		// nothing else holds (the relay is its one pending call), and
		// a copy of a deep stack cost as much as a third of decoding it.
		out["body"] = b
	}
	return out
}

// confineSource removes from a source object its executor path when
// the mapper does not map it to a file under the roots (mapPaths
// walks to the sources nested in it). The executor chooses its paths, and
// one naming a laptop file (~/.ssh/id_rsa) would make the IDE open it.
// Such a source is shown by name, its text fetched from the executor
// through the sourceReference pydevd gives every path it cannot map.
func (tx *held) confineSource(es *ExecutorSession, src map[string]any) {
	p, has := src["path"]
	if !has || tx.mappable(es, p) {
		return
	}
	delete(src, "path")
	if s, ok := p.(string); ok && s != "" {
		if name, _ := src["name"].(string); name == "" {
			src["name"] = path.Base(s)
		}
		// Where it lives, for people: origin is shown, never opened.
		src["origin"] = "executor file " + truncate(s, 512)
	}
}

// mappable reports whether p is an executor path with a local file.
func (tx *held) mappable(es *ExecutorSession, p any) bool {
	s, ok := p.(string)
	return ok && s != "" && tx.mapRemote(es, s).Err == nil
}
