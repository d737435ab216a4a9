package dap

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// What an executor says, and what the proxy does with it: pydevd's events
// are relayed to the IDE session that shows their executor, translated,
// and what is needed to replay or describe them is kept (stops, threads,
// the task label); its thread list is kept current, for the root session's
// merged threads; and its output is held while the IDE session that will
// show it is not there yet.

// event relays an event from pydevd, translated, to whichever IDE
// session shows that executor, and keeps the state needed to replay it.
// A stop at an exception is first grouped (exceptions.go).
func (es *ExecutorSession) event(m Message) { es.relay(m, false) }

// relay is event; grouped says m, a stop at an exception, was grouped and
// is to be shown.
func (es *ExecutorSession) relay(m Message, grouped bool) {
	h := es.hub
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
		es.taskEvent(m)
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
		if !grouped && body["reason"] == "exception" {
			tx.groupException(es, m, tid)
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
		tx.renewLease(es)
		tx.focused = es
		tx.armMaxStop(es)
		tx.learnStopLocation(es, tid)
		tx.hitBreakpoints(es, m)
		tx.announce(es) // a stopped worker is listed (child-session mode)
		h.watch.changed()
	case "output":
		x.outputBytes += int64(outputLen(body["output"]))
	case "continued":
		if all, _ := body["allThreadsContinued"].(bool); all {
			clear(x.stopped)
			h.ids.Release(es.id, kindFrame, kindVariables)
		} else {
			delete(x.stopped, tid)
		}
		h.watch.changed()
	case "thread":
		if body["reason"] == "exited" {
			x.forgetThread(tid)
			delete(x.stopped, tid)
			h.watch.changed()
		} else if !x.learnThread(tid) {
			return
		}
	case "breakpoint":
		tx.breakpointEvent(es, m)
		return
	}
	target := tx.eventTarget(es)
	if m.Event() == "output" {
		target = tx.outputTarget(es)
		if tx.holdOutput(es, target, m) {
			return
		}
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
		// stops still current (IDESession.configurationDone): sent now as well, a stop
		// would reach the session twice, and a client that continues once
		// per stopped event would resume the worker's next stop unseen.
		es.logger().Debug().Str("event", m.Event()).Int64("thread", tid).
			Msg("held until the IDE session's configurationDone")
		return
	}
	tx.relayEvent(es, m, target)
	if m.Event() == "output" {
		es.paceOn = target.w // waited on by handle once the lock is released (pace)
	}
	if m.Event() == "thread" && body["reason"] == "exited" {
		h.ids.ReleaseOne(kindThread, es.id, tid)
	}
}

// eventTarget is the IDE session that shows es's events, or nil.
func (tx *held) eventTarget(es *ExecutorSession) *IDESession {
	if c := tx.children[es.id]; c != nil {
		return c
	}
	if tx.root != nil && !tx.ide(tx.root).childMode {
		return tx.root
	}
	return nil
}

// outputTarget is the IDE session that shows es's output: its event
// target, or in child-session mode, while it has no child session (it is
// not listed, or its child is being opened), the root, with its label
// before each line as in the merged view.
func (tx *held) outputTarget(es *ExecutorSession) *IDESession {
	if t := tx.eventTarget(es); t != nil {
		return t
	}
	if tx.root != nil && tx.ide(tx.root).childMode && !tx.exec(es).detached {
		return tx.root
	}
	return nil
}

// relayEvent sends target the allowed event m of es, translated:
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
		tx.exec(es).describeStop(out)
	}
	if target == tx.root {
		tx.mergedView(es, out)
	}
	if body, ok := quotedOutputBody(out); ok {
		_ = target.w.sendWithBody(out, body)
		return
	}
	_ = target.w.send(out, nil)
}

// quotedOutputBody encodes the body of m if m is an output event whose
// text is kept as pydevd sent it (decodeExecutorMessage): the text goes
// out as it came, where Encode would check and quote it all again.
func quotedOutputBody(m Message) ([]byte, bool) {
	body := m.Body()
	if _, quoted := body["output"].(dapwire.QuotedString); !quoted {
		return nil, false
	}
	enc, err := dapwire.AppendObject(nil, body)
	return enc, err == nil
}

// learnStopLocation asks pydevd where a thread stopped (its top
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
			tx.exec(es).stoppedAt = admission.Clean(fmt.Sprintf("%s:%d", filepath.Base(path), line), admission.MaxTextRunes)
		}
	})
}

// describeStop names the task the worker stopped in in a stopped
// event's description (and text, if pydevd gave one): VS Code's CALL STACK
// shows the text, or else the description, beside the session's name
// (whose end it cuts) and hides the thread row of a one-thread session,
// so without it three workers stopped at once look the same there. The
// task comes first: at VS Code's default side bar width (300 px) the row
// shows some 34 characters of it, and the session's name not at all.
func (x *executorState) describeStop(ev Message) {
	b, _ := ev["body"].(map[string]any)
	if b == nil || x.task.Label == "" {
		return
	}
	task := x.task.Label
	desc, _ := b["description"].(string)
	if desc == "" {
		reason, _ := b["reason"].(string)
		desc = "Paused"
		if reason != "" {
			desc = "Paused on " + reason
		}
	}
	b["description"] = task + " · " + desc
	if text, _ := b["text"].(string); text != "" {
		b["text"] = task + " · " + text
	}
}

// mergedView adapts one executor's event to a session that shows all
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
		if b["category"] != "telemetry" {
			tx.exec(es).labelOutput(b)
		}
	}
}

// labelOutput puts the executor's label before each line of an output
// event body's text, however the text is kept (prefixLines).
func (x *executorState) labelOutput(b map[string]any) {
	switch s := b["output"].(type) {
	case string:
		b["output"] = x.prefixLines(s)
	case dapwire.QuotedString:
		b["output"], x.midLine = s.PrefixLines("["+x.label()+"] ", x.midLine)
	}
}

// outputLen is the length in bytes of an output event's text, kept as
// a string or, as pydevd sent it, quoted (decodeExecutorMessage).
func outputLen(v any) int {
	switch t := v.(type) {
	case string:
		return len(t)
	case dapwire.QuotedString:
		return t.Len()
	}
	return 0
}

// prefixLines puts the executor's label before each line of output, keeping
// track of lines split across events. It runs for every output event of
// every worker under the Hub's lock, so it builds the result in one
// allocation and names the worker (admission.Label cleans and joins its
// parts) only when a line starts here, once per call.
func (x *executorState) prefixLines(s string) string {
	if s == "" {
		return s
	}
	mid := x.midLine
	x.midLine = s[len(s)-1] != '\n'
	// A prefix for each line that starts in s: after each newline but a
	// final one, and at the start unless s goes on the previous line.
	starts := strings.Count(s, "\n")
	if x.midLine {
		starts++
	}
	if mid {
		starts--
	}
	if starts == 0 {
		return s
	}
	label := x.label()
	var sb strings.Builder
	sb.Grow(len(s) + starts*(len(label)+len("[] ")))
	prefix := func() {
		sb.WriteByte('[')
		sb.WriteString(label)
		sb.WriteString("] ")
	}
	if !mid {
		prefix()
	}
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || i == len(s)-1 {
			sb.WriteString(s)
			return sb.String()
		}
		sb.WriteString(s[:i+1])
		s = s[i+1:]
		prefix()
	}
}

// Its threads: pydevd's thread events and its last threads answer keep
// the list current (threadsKnown says it is complete), so the root
// session's merged threads need no round trip (IDESession.mergedThreads).

// ownThreadPrefix starts the names of the worker wrapper's own threads
// (its connect guard, its lease): pydevd may list them, but they are no
// thread of the user's job and never reach a client.
const ownThreadPrefix = "sparkdap-"

// maxThreadsPerExecutor bounds the threads the proxy remembers for one
// executor (its thread list and their global ids). A Python worker has a
// handful; an executor that names more is broken or hostile, and without
// a bound one that holds the token could grow the proxy's memory without
// end by announcing new thread ids.
const maxThreadsPerExecutor = 1024

// learnThread notes a thread pydevd reported (thread started, or a
// stop or resume on a thread the proxy had not heard of). A new thread makes
// the executor's list incomplete until pydevd names it in a threads answer.
// It reports false, and remembers nothing, for a new thread over
// maxThreadsPerExecutor: the caller drops what named it.
func (x *executorState) learnThread(tid int64) bool {
	if _, ok := x.threads[tid]; ok {
		return true
	}
	if x.ownThreads[tid] {
		return false
	}
	if !x.roomForThread(len(x.threads)) {
		return false
	}
	if x.threads == nil {
		x.threads = map[int64]string{}
	}
	x.threads[tid] = ""
	x.threadOrder = append(x.threadOrder, tid)
	x.threadsKnown = false
	x.threadsChanged()
	return true
}

// roomForThread reports whether an executor that has n threads may
// have one more, and logs the first refusal.
func (x *executorState) roomForThread(n int) bool {
	es := x.es
	if n < maxThreadsPerExecutor {
		return true
	}
	if !x.threadsCapped {
		x.threadsCapped = true
		es.logger().Warn().Int("limit", maxThreadsPerExecutor).
			Msg("executor named more threads than the limit: events and entries about further threads are dropped")
	}
	return false
}

// retitleThreads tells the IDE session that shows es that its threads'
// names changed (they carry the task it runs, and it started another):
// each thread not stopped is said to exit and to start again under a new
// global id. A thread event about a new id is what makes every client
// read the names again: VS Code reads the thread list on any "started",
// but nvim-dap only marks its list stale for a thread id it does not
// know, and otherwise keeps the names it read at the worker's first
// stop. A stopped thread keeps its id (the client is showing its
// frames); a worker starts a task only while running, so that is rare.
func (tx *held) retitleThreads(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	target := tx.eventTarget(es)
	if target == nil || !tx.ide(target).configured {
		return
	}
	for _, tid := range x.threadOrder {
		if _, stopped := x.stopped[tid]; stopped {
			continue
		}
		old, err := h.ids.Global(kindThread, es.id, tid)
		if err != nil {
			continue
		}
		h.ids.ReleaseOne(kindThread, es.id, tid)
		g, err := h.ids.Global(kindThread, es.id, tid)
		if err != nil {
			continue
		}
		_ = target.w.send(newEvent("thread", map[string]any{"reason": "exited", "threadId": old}), nil)
		_ = target.w.send(newEvent("thread", map[string]any{"reason": "started", "threadId": g}), nil)
	}
}

// forgetThread drops a thread that exited. What is left stays as
// complete as it was.
func (x *executorState) forgetThread(tid int64) {
	if _, ok := x.threads[tid]; !ok {
		return
	}
	delete(x.threads, tid)
	for i, t := range x.threadOrder {
		if t == tid {
			x.threadOrder = append(x.threadOrder[:i:i], x.threadOrder[i+1:]...)
			break
		}
	}
	x.threadsChanged()
}

// threadsChanged notes a change in what es's merged threads entries
// show: its threads, their names or its label.
func (x *executorState) threadsChanged() {
	x.threadsGen++
	x.threadsJSON = nil
}

// absorbThreads takes pydevd's threads answer to a request sent when
// x.threadsGen was gen. If a thread event came in between, the answer may
// predate it: only its names are taken, and the list stays unknown.
func (x *executorState) absorbThreads(m Message, gen uint64) {
	list, _ := m.Body()["threads"].([]any)
	type entry struct {
		id   int64
		name string
	}
	entries := make([]entry, 0, len(list))
	for _, t := range list {
		th, ok := t.(map[string]any)
		if !ok {
			continue
		}
		tid, ok := toInt(th["id"])
		if !ok || tid == 0 {
			continue
		}
		name, _ := th["name"].(string)
		if strings.HasPrefix(name, ownThreadPrefix) {
			x.forgetThread(tid)
			if x.ownThreads == nil {
				x.ownThreads = map[int64]bool{}
			}
			if len(x.ownThreads) < maxThreadsPerExecutor {
				x.ownThreads[tid] = true
			}
			continue
		}
		entries = append(entries, entry{tid, name})
	}
	if x.threadsGen != gen {
		for _, e := range entries {
			if _, ok := x.threads[e.id]; ok {
				x.threads[e.id] = e.name
			}
		}
		x.threadsChanged()
		return
	}
	clear(x.threads)
	if x.threads == nil && len(entries) > 0 {
		x.threads = make(map[int64]string, len(entries))
	}
	x.threadOrder = x.threadOrder[:0]
	for _, e := range entries {
		if _, dup := x.threads[e.id]; dup {
			continue
		}
		if !x.roomForThread(len(x.threads)) {
			break
		}
		x.threads[e.id] = e.name
		x.threadOrder = append(x.threadOrder, e.id)
	}
	x.threadsKnown = true
	x.threadsChanged()
}

// Its output is held while the IDE session that will
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

// heldOutput is an executor's output waiting for its IDE session. Part of
// executorState.
type heldOutput struct {
	events  []Message // allowedEvent's output events, executor-local, in order
	bytes   int       // output text in events
	dropped int64     // output text that came past the cap
}

// holdOutput takes the output event m (allowedEvent's) if it must
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
	n := outputLen(m.Body()["output"])
	// Once something was dropped, later output is too: the note that says
	// so stands after what was kept, and nothing after it is missing.
	if held.dropped > 0 || held.bytes+n > heldOutputMaxBytes || len(held.events) >= heldOutputMaxEvents {
		held.dropped += int64(n)
		return true
	}
	held.events = append(held.events, m)
	held.bytes += n
	return true
}

// sendHeldOutput sends s, configured now, the output es held for it,
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

// dropHeldOutput forgets what es held: no session will show it.
func (x *executorState) dropHeldOutput() {
	es := x.es
	if x.held == nil {
		return
	}
	es.logger().Debug().Int("bytes", x.held.bytes).Int64("dropped", x.held.dropped).
		Msg("dropping held output: no IDE session will show this executor")
	x.held = nil
}
