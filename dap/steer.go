package dap

import (
	"context"
	"fmt"
	"sort"

	"github.com/sparkdap/sparkdap/control"
)

// The Hub steers workers for the control protocol (control.Steerer): the
// view's continue, pause and detach of one worker and continue of all,
// from the root session's sparkdap request or the control socket. Each
// does what the IDE's own request or a child session's detach does, and
// tells the IDE session that shows the worker, as an adapter tells a
// client of what it did not ask for itself.

var (
	_ control.Steerer       = (*Hub)(nil)
	_ control.SessionLister = (*Hub)(nil)
)

// steered is the executor executor names, in service, or why not.
func (tx *held) steered(executor uint64) (*ExecutorSession, error) {
	es := tx.executors[executor]
	if es == nil || !tx.exec(es).ready {
		return nil, fmt.Errorf("executor %d: %w", executor, control.ErrUnknownExecutor)
	}
	return es, nil
}

// Continue resumes the stopped executor, all its threads (pydevd resumes
// every thread of the process), and tells the IDE session that shows it
// (control.Steerer).
func (h *Hub) Continue(_ context.Context, executor uint64) error {
	tx := h.lock()
	defer tx.unlock()
	es, err := tx.steered(executor)
	if err != nil {
		return err
	}
	if len(tx.exec(es).stopped) == 0 {
		return fmt.Errorf("executor %d: %w", executor, control.ErrNotStopped)
	}
	tx.resumeTold(es, "")
	es.logger().Info().Msg("resumed through the control protocol")
	return nil
}

// ContinueAll resumes every stopped executor, as Continue does each, and
// says how many (control.Steerer).
func (h *Hub) ContinueAll(context.Context) (int, error) {
	tx := h.lock()
	defer tx.unlock()
	n := 0
	for _, es := range tx.ready() {
		if len(tx.exec(es).stopped) > 0 {
			tx.resumeTold(es, "")
			n++
		}
	}
	if n > 0 {
		h.log.Info().Int("executors", n).Msg("resumed every stopped executor through the control protocol")
	}
	return n, nil
}

// Pause pauses every thread of the executor, as pauseAll does each
// executor's, and returns once pydevd has taken the request (bounded by
// Config.RequestTimeout and ctx); its stop then reaches the IDE as any
// stop does (a child session, in child-session mode). An executor that
// is stopped already is left as it is. One that no IDE session shows is
// refused: its stop would be resumed at once (unwatchedStop).
// (control.Steerer).
func (h *Hub) Pause(ctx context.Context, executor uint64) error {
	tx := h.lock()
	es, err := tx.steered(executor)
	switch {
	case err != nil:
		tx.unlock()
		return err
	case !tx.watched(es):
		tx.unlock()
		return fmt.Errorf("executor %d: no IDE session shows it (none attached, or it was detached), so it is not paused", executor)
	case len(tx.exec(es).stopped) > 0:
		tx.unlock()
		return nil
	}
	tx.unlock()
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	es.request("pause", map[string]any{"threadId": "*"}, h.cfg.RequestTimeout, func(m Message, err error) { ch <- result{m, err} })
	select {
	case r := <-ch:
		switch {
		case r.err != nil:
			return fmt.Errorf("executor %d: pause: %w", executor, r.err)
		case !r.m.Success():
			return fmt.Errorf("executor %d: pause: %w", executor, &errExecutorRefused{r.m.ErrorMessage()})
		}
		es.logger().Info().Msg("paused through the control protocol")
		return nil
	case <-ctx.Done():
		return fmt.Errorf("executor %d: pause: %w", executor, ctx.Err())
	}
}

// Detach lets the executor run on undebugged, as its child session's
// disconnect with "terminateDebuggee": false does (Hub.ideGone): its
// breakpoints are cleared, it is resumed and not announced again to this
// root. Its child session, if it has one, is told terminated, as when the
// proxy ends one itself (unlist): the root and the other sessions stay
// (control.Steerer).
func (h *Hub) Detach(_ context.Context, executor uint64) error {
	tx := h.lock()
	defer tx.unlock()
	es, err := tx.steered(executor)
	if err != nil {
		return err
	}
	x := tx.exec(es)
	if child := tx.children[es.id]; child != nil {
		tx.childGone(child, false)
		tx.ide(child).ended = true
		_ = child.w.send(newEvent("terminated", nil), nil)
		child.leave()
	} else {
		// An announced child session that has not attached yet must not
		// open; the merged view hears that its stopped threads run.
		x.stopChildWait()
		tx.resumeTold(es, "")
		x.detached = true
		tx.release(es)
	}
	h.watch.changed()
	es.logger().Info().Str("label", x.label()).Msg("detached through the control protocol: it runs on undebugged")
	h.summary("executor %d detached [%s]: it runs on undebugged", es.id, x.label())
	return nil
}

// Sessions is the id of each executor in service, by its worker's host
// and pid (control.SessionLister).
func (h *Hub) Sessions() map[control.WorkerID]uint64 {
	tx := h.lock()
	defer tx.unlock()
	out := make(map[control.WorkerID]uint64, len(tx.executors))
	for _, es := range tx.readyView() {
		x := tx.exec(es)
		out[control.WorkerID{Host: x.task.Host, PID: x.proc.PID}] = es.id
	}
	return out
}

// resumeTold resumes a stopped executor and tells the IDE session that
// shows it, once configured, that its stopped threads run again: first
// say (if not "") on its console, then each thread's continued, as an
// adapter tells a client of a resume it did not ask for. A child session
// shows that process alone: all its threads run.
func (tx *held) resumeTold(es *ExecutorSession, say string) {
	h := tx.h
	x := tx.exec(es)
	tids := make([]int64, 0, len(x.stopped))
	for tid := range x.stopped {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(i, j int) bool { return tids[i] < tids[j] })
	tx.resume(es)
	x.stoppedAt = ""
	if target := tx.eventTarget(es); target != nil && tx.ide(target).configured {
		if say != "" {
			_ = target.w.send(newEvent("output", map[string]any{"category": "console", "output": say}), nil)
		}
		all := target != tx.root
		for _, tid := range tids {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				_ = target.w.send(newEvent("continued", map[string]any{"threadId": g, "allThreadsContinued": all}), nil)
			}
		}
	}
	h.ids.Release(es.id, kindFrame, kindVariables)
}
