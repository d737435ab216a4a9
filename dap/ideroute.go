package dap

import (
	"sync"

	"github.com/sparkdap/sparkdap/admission"
)

// broadcast sends a settings request to every executor and answers with the
// first executor's response.
func (s *IDESession) broadcast(req Message) {
	h := s.hub
	tx := h.lock()
	targets := tx.ready()
	tx.unlock()
	if len(targets) == 0 {
		s.reply(newResponse(req, nil))
		return
	}
	var once sync.Once
	for _, es := range targets {
		es.request(req.Command(), deepCopy(req.Arguments()), h.cfg.FanoutTimeout, func(m Message, err error) {
			once.Do(func() { s.relay(req, es, m, err) })
		})
	}
}

// route forwards a request to the executor that owns the ids it names (or,
// naming none, to the session's executor, the one that stopped last, or the
// only one) and relays the answer.
func (s *IDESession) route(req Message) {
	h := s.hub
	var args any
	if a := req.Arguments(); a != nil {
		args = deepCopy(a)
	}
	sid, found, err := h.ids.localize(args)
	if err != nil {
		s.fail(req, "%s: %v", req.Command(), err)
		return
	}
	tx := h.lock()
	var es *ExecutorSession
	switch {
	case found:
		es = tx.executors[sid]
		if s.executor.Load() != nil && s.executor.Load() != es {
			tx.unlock()
			s.fail(req, "%s: that id belongs to another executor's session", req.Command())
			return
		}
	case s.executor.Load() != nil:
		es = s.executor.Load()
	case tx.focused != nil:
		es = tx.focused
	default:
		if ready := tx.ready(); len(ready) == 1 {
			es = ready[0]
		}
	}
	if es == nil || !tx.exec(es).ready {
		n := len(tx.ready())
		tx.unlock()
		if n == 0 {
			s.fail(req, "%s: no executor is connected", req.Command())
		} else {
			s.fail(req, "%s: %d executors are connected and none is stopped: pick a thread first", req.Command(), n)
		}
		return
	}
	tx.noteAsked(es)
	tx.remotizePaths(es, args)
	tx.unlock()
	out := Message{}
	for k, v := range req {
		out[k] = v
	}
	if args != nil {
		out["arguments"] = args
	}
	delete(out, "seq")
	es.request(req.Command(), out["arguments"], h.cfg.RequestTimeout, func(m Message, err error) {
		s.relay(req, es, m, err)
	})
}

// relay passes an executor's response back to the IDE under the IDE's seq
// and the global ids, and keeps the stop/resume bookkeeping.
func (s *IDESession) relay(req Message, es *ExecutorSession, m Message, err error) {
	h := s.hub
	if err != nil {
		s.fail(req, "executor %d: %s: %v", es.id, req.Command(), err)
		return
	}
	out := allowedResponse(req, m)
	if err := h.ids.globalize(es.id, out["body"]); err != nil {
		s.fail(req, "executor %d: %s: %v", es.id, req.Command(), err)
		return
	}
	if req.Command() == "stackTrace" {
		markPlumbingFrames(out["body"]) // before mapping: it reads executor paths
	}
	tx := h.lock()
	tx.mapPaths(es, out["body"])
	if req.Command() == "threads" && !s.isRoot() {
		if ts, ok := out.Body()["threads"].([]any); ok {
			for _, t := range ts {
				if th, ok := t.(map[string]any); ok {
					name, _ := th["name"].(string)
					th["name"] = tx.exec(es).childThreadName(name)
				}
			}
		}
	}
	tx.unlock()
	if m.Success() {
		tx := h.lock()
		switch req.Command() {
		case "continue":
			tx.resumed(s, es, out)
			h.watch.changed()
		case "next", "stepIn", "stepOut", "goto":
			if tid, ok := toInt(req.Arguments()["threadId"]); ok {
				if o, ok := h.ids.Local(kindThread, tid); ok {
					delete(tx.exec(es).stopped, o.local)
				}
			}
			h.watch.changed()
		}
		tx.unlock()
	}
	s.reply(out)
}

// resumed records that continue resumed es. pydevd resumes every
// thread of the process; a root session that shows other executors too
// must hear that only this executor's threads run again.
func (tx *held) resumed(s *IDESession, es *ExecutorSession, out Message) {
	h := tx.h
	x := tx.exec(es)
	var others []int64
	for tid := range x.stopped {
		others = append(others, tid)
	}
	clear(x.stopped)
	h.ids.Release(es.id, kindFrame, kindVariables)
	if !s.isRoot() {
		return
	}
	if b, ok := out["body"].(map[string]any); ok {
		b["allThreadsContinued"] = false
	}
	for _, tid := range others {
		if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
			_ = s.w.send(newEvent("continued", map[string]any{"threadId": g, "allThreadsContinued": false}), nil)
		}
	}
}

// markPlumbingFrames shows the frames of the files that run every worker
// before the user's code (the wrapper, PySpark's daemon.py: see
// admission.IsPlumbingFile) as library frames: the frame subtle, its source
// deemphasized, so VS Code greys them out and folds them away instead of
// showing remote_debug.py's main and worker as if they were the user's.
// It reads executor paths, so it runs before they are mapped.
func markPlumbingFrames(body any) {
	b, _ := body.(map[string]any)
	frames, _ := b["stackFrames"].([]any)
	for _, f := range frames {
		fr, _ := f.(map[string]any)
		src, _ := fr["source"].(map[string]any)
		if p, _ := src["path"].(string); fr != nil && admission.IsPlumbingFile(p) {
			fr["presentationHint"] = "subtle"
			src["presentationHint"] = "deemphasize"
		}
	}
}
