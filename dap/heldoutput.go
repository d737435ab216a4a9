package dap

import "fmt"

// This file holds an executor's output while the IDE session that will
// show it is not there yet. In child-session mode an executor is in
// service (its breakpoints set, its task running) from the end of the
// proxy's own handshake, but its child session opens only after the IDE
// has answered startDebugging, connected and configured: tens to hundreds
// of milliseconds in which a task's first print() lines would otherwise
// reach nobody. They are held, in order and up to a cap, and sent to the
// child session when it is configured, before the stops it replays (which
// came after them). Output nobody will show (no IDE, a detached executor,
// a child session that never came) is not held: the worker's own logs
// still have it.

const (
	// heldOutputMaxBytes bounds the output text held per executor: enough
	// for a task's first lines, small beside a session's other state.
	heldOutputMaxBytes = 64 << 10
	// heldOutputMaxEvents bounds the events held, whatever their size.
	heldOutputMaxEvents = 1024
)

// heldOutput is an executor's output waiting for its IDE session. Guarded
// by hub.mu.
type heldOutput struct {
	events  []Message // allowedEvent's output events, executor-local, in order
	bytes   int       // output text in events
	dropped int64     // output text that came past the cap
}

// holdOutputLocked takes the output event m (allowedEvent's) if it must
// wait: no session shows es yet but one will, or the session that shows
// it is not configured and earlier output is held (it must not overtake
// that). Reports whether it took m.
func (tx *held) holdOutput(es *ExecutorSession, target *IDESession, m Message) bool {
	x := tx.exec(es)
	switch {
	case target == nil && tx.watched(es):
	case target != nil && !tx.ide(target).configured && x.held != nil:
	default:
		return false
	}
	if x.held == nil {
		x.held = &heldOutput{}
	}
	held := x.held
	text, _ := m.Body()["output"].(string)
	// Once something was dropped, later output is too: the note that says
	// so stands after what was kept, and nothing after it is missing.
	if held.dropped > 0 || held.bytes+len(text) > heldOutputMaxBytes || len(held.events) >= heldOutputMaxEvents {
		held.dropped += int64(len(text))
		return true
	}
	held.events = append(held.events, m)
	held.bytes += len(text)
	return true
}

// sendHeldOutputLocked sends s, configured now, the output es held for it,
// and a line saying how much the cap dropped, if any.
func (tx *held) sendHeldOutput(es *ExecutorSession, s *IDESession) {
	x := tx.exec(es)
	held := x.held
	if held == nil {
		return
	}
	x.held = nil
	for _, m := range held.events {
		tx.relayEvent(es, m, s)
	}
	if held.dropped > 0 {
		note := fmt.Sprintf("[sparkdap: %d bytes of output dropped: the executor printed more than %d KiB before its debug session was ready]\n",
			held.dropped, heldOutputMaxBytes>>10)
		tx.relayEvent(es, newEvent("output", map[string]any{"category": "console", "output": note}), s)
	}
	es.logger().Debug().Int("events", len(held.events)).Int("bytes", held.bytes).Int64("dropped", held.dropped).
		Msg("sent the output held until the IDE session was ready")
}

// dropHeldOutputLocked forgets what es held: no session will show it.
func (x *executorState) dropHeldOutput() {
	es := x.es
	if x.held == nil {
		return
	}
	es.logger().Debug().Int("bytes", x.held.bytes).Int64("dropped", x.held.dropped).
		Msg("dropping held output: no IDE session will show this executor")
	x.held = nil
}
