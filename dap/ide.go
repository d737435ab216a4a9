package dap

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	godap "github.com/google/go-dap"
	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/guard"
	"github.com/sparkdap/sparkdap/worker"
)

// IDESession is one connection from a DAP client: the root session, which
// attached without naming an executor, or a child session bound to one
// executor (a startDebugging the proxy asked for).
type IDESession struct {
	id  uint64
	hub *Hub
	w   *wire
	// logp is the session's logger; attach adds the executor while
	// executors' goroutines log through it, hence atomic.
	logp atomic.Pointer[zerolog.Logger]

	// g is its state guarded by the Hub's lock (held.ide).
	g guard.Guarded[ideState]
	// executor is the executor a child session shows (nil for the root),
	// set once as it attaches.
	executor atomic.Pointer[ExecutorSession]
	// unadmitted gives back its place in the IDE port's budget of
	// connections not yet attached (Hub.take); nil outside serveIDE. Set
	// before serving.
	unadmitted func()
	// admitted is attached, set on the reader goroutine (attach) before
	// it reads the next message, which may then be as large as
	// Config.MaxMessageBytes allows.
	admitted atomic.Bool

	goneOnce sync.Once
	// leaving is set once the session has ended (disconnect answered, or
	// terminated sent): the client closes the connection, or grace does
	// (see leave).
	leaving atomic.Bool
	grace   atomic.Pointer[time.Timer]
}

// ideState is an IDESession's state guarded by the Hub's lock, reached
// with held.ide.
type ideState struct {
	childMode  bool // root only: executors appear as child sessions
	configured bool // configurationDone received
	attached   bool
	// ended: the debugging of the job was stopped from another session;
	// this one got terminated and is closing (it is no longer the root or
	// a child), so what it still sends is refused.
	ended bool
	asked map[int64]childAsk // root only: startDebugging seq → the executor it announced
}

func newIDESession(h *Hub, id uint64, conn net.Conn) *IDESession {
	s := &IDESession{id: id, hub: h, w: newWire(conn)}
	s.g = guard.New(&h.mu, ideState{asked: map[int64]childAsk{}})
	s.setLogger(h.log.With().Uint64("ide", id).Str("remote", conn.RemoteAddr().String()).Logger())
	return s
}

func (s *IDESession) logger() *zerolog.Logger { return s.logp.Load() }

func (s *IDESession) setLogger(l zerolog.Logger) { s.logp.Store(&l) }

func (s *IDESession) reply(m Message) { _ = s.w.send(m, nil) }

func (s *IDESession) fail(req Message, format string, args ...any) {
	s.logger().Debug().Str("command", req.Command()).Msgf("error response: "+format, args...)
	s.reply(newErrorResponse(req, format, args...))
}

// serve reads the client's messages until it leaves.
func (s *IDESession) serve(ctx context.Context) {
	done := make(chan error, 1)
	fr := NewFrameReader(s.w.conn, s.hub.cfg.MaxMessageBytes)
	fr.LimitUntil(&s.admitted, maxUnattachedMessageBytes)
	fr.onAlloc = s.hub.frameAlloc
	go func() { done <- s.w.readFrames(fr, s.handle) }()
	var reason error
	select {
	case reason = <-done:
	case <-ctx.Done():
		reason = ctx.Err()
		s.w.close(reason)
		<-done
	}
	s.w.close(reason)
	if t := s.grace.Load(); t != nil {
		t.Stop()
	}
	switch {
	case s.leaving.Load():
		s.logger().Debug().AnErr("reason", reason).Msg("IDE connection closed after its session ended")
	case isBadInput(reason):
		s.logger().Warn().Err(reason).Msg("closing IDE connection: it broke the protocol")
	case reason != nil && !errors.Is(reason, errClosed):
		s.logger().Info().Err(reason).Msg("IDE connection ended")
	}
	s.gone(leaveDropped)
}

func (s *IDESession) gone(how leaveKind) {
	s.goneOnce.Do(func() { s.hub.ideGone(s, how) })
}

// leaveKind is how an IDE session left, which decides what its leaving
// ends (see Hub.ideGone).
type leaveKind int

const (
	// leaveDropped: the connection ended without a disconnect.
	leaveDropped leaveKind = iota
	// leaveDetach: a child session's disconnect with an explicit
	// "terminateDebuggee": false: that one executor is let go.
	leaveDetach
	// leaveStopAll: any other disconnect (or terminate): the debugging of
	// the whole job stops.
	leaveStopAll
	// leaveStopAllTerminate: a child session's disconnect with
	// "terminateDebuggee": true: the same, and its worker is terminated.
	leaveStopAllTerminate
)

// leaveKindOf reads what a disconnect or terminate request asks for.
// VS Code's toolbar Disconnect and Stop both send a plain disconnect
// ({"restart": false}) since the proxy does not advertise
// supportTerminateDebuggee; only a client that says "terminateDebuggee":
// false on purpose detaches one executor.
func (s *IDESession) leaveKindOf(m Message) leaveKind {
	if m.Command() != "disconnect" || s.isRoot() {
		return leaveStopAll
	}
	v, present := m.Arguments()["terminateDebuggee"]
	term, isBool := v.(bool)
	switch {
	case present && isBool && !term:
		return leaveDetach
	case term:
		return leaveStopAllTerminate
	}
	return leaveStopAll
}

// leave ends the connection of a session that has ended: its disconnect
// has been answered, or it was sent terminated (its executor went away),
// which clients answer with disconnect. The client closes the connection
// once it has the answer (VS Code, nvim-dap); a proxy that closed first
// would race that answer: VS Code reports "connection closed", and nvim-dap,
// seeing the connection end before it handled the response, drops it ("No
// callback found … duplicate responses?") and skips its disconnect
// listeners. So the proxy closes it only if the client has not within
// Config.DisconnectGrace. Until then requests other than disconnect are
// refused.
func (s *IDESession) leave() {
	if !s.leaving.CompareAndSwap(false, true) {
		return
	}
	grace := s.hub.cfg.DisconnectGrace
	s.grace.Store(time.AfterFunc(grace, func() {
		s.w.closeAfterFlush(fmt.Errorf("%w: the client kept its connection %s after its session ended", errClosed, grace))
	}))
}

// isRoot reports whether s shows every executor (as opposed to one).
func (s *IDESession) isRoot() bool { return s.executor.Load() == nil }

// PathsCommand is sparkdap's own request for the path report (see
// `sparkdap paths`).
const PathsCommand = "sparkdapPaths"

// IDETokenArg is the attach (and sparkdapPaths) argument that carries the
// IDE token when the proxy requires one (Config.IDEToken).
const IDETokenArg = "sparkdapToken"

// checkIDEToken returns "" if req carries the IDE token the proxy wants (or
// it wants none), else why not. The compare is constant-time.
func (h *Hub) checkIDEToken(req Message) string {
	if h.cfg.IDEToken == "" {
		return ""
	}
	got, present := req.Arguments()[IDETokenArg]
	tok, _ := got.(string)
	switch {
	case !present || tok == "":
		return `this sparkdap requires an IDE token: add "` + IDETokenArg + `": "<token>" to your attach configuration (the value of serve --ide-token)`
	case subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.IDEToken)) != 1:
		return `wrong "` + IDETokenArg + `": it does not match serve --ide-token`
	}
	return ""
}

// refuseIDE answers req with why and closes the connection.
func (s *IDESession) refuseIDE(req Message, why string) {
	s.logger().Warn().Str("command", req.Command()).Str("reason", why).Msg("IDE refused; closing its connection")
	s.reply(newErrorResponse(req, "%s", why))
	s.w.closeAfterFlush(fmt.Errorf("refused: %s", why))
}

// dapOnlyCommands are standard DAP requests pydevd leaves unanswered.
var dapOnlyCommands = map[string]bool{
	"cancel": true, "restart": true, "terminateThreads": true, "breakpointLocations": true,
	"dataBreakpointInfo": true, "setDataBreakpoints": true, "setInstructionBreakpoints": true,
	"readMemory": true, "writeMemory": true, "disassemble": true, "restartFrame": true,
	"reverseContinue": true, "stepBack": true, "locations": true, "launch": true,
}

// broadcastCommands change debugger settings: with no executor named they
// go to every executor.
var broadcastCommands = map[string]bool{"setDebuggerProperty": true, "setPydevdSourceMap": true}

// handle serves one message from the client, without blocking on any
// executor: answers come back through callbacks.
func (s *IDESession) handle(m Message) {
	h := s.hub
	switch m.Type() {
	case "response":
		tx := h.lock()
		ask, ok := tx.ide(s).asked[m.RequestSeq()]
		delete(tx.ide(s).asked, m.RequestSeq())
		if ok && !m.Success() {
			tx.childMissing(ask.es, ask.gen, "the IDE refused to start its child session: "+truncate(m.ErrorMessage(), 200))
		}
		tx.unlock()
		if !m.Success() {
			s.logger().Warn().Str("command", m.Command()).Str("error", m.ErrorMessage()).Msg("IDE refused a request")
		}
		return
	case "event":
		s.logger().Debug().Str("event", m.Event()).Msg("ignoring event from IDE")
		return
	}
	cmd := m.Command()
	switch cmd {
	case "initialize":
		s.initialize(m)
		return
	case "attach":
		s.attach(m)
		return
	case "launch":
		s.fail(m, `sparkdap attaches to running executors: use "request": "attach" with "connect" to this address`)
		return
	case PathsCommand:
		// A status query, not a debug session: served without attach, so
		// it works while an IDE is attached.
		if why := h.checkIDEToken(m); why != "" {
			s.refuseIDE(m, why)
			return
		}
		s.reply(newResponse(m, map[string]any{"executors": h.PathReports()}))
		return
	case "disconnect", "terminate":
		tx := h.lock()
		how := s.leaveKindOf(m)
		tx.unlock()
		// Gone before the answer: a client that reconnects as soon as it
		// has it must find the root free.
		s.gone(how)
		// Leaving before the answer: a send may write it at once, and a
		// client that closes as soon as it reads it must find the
		// session ended.
		s.leave()
		s.reply(newResponse(m, nil))
		return
	}
	if s.leaving.Load() {
		s.fail(m, "%s: this debug session has ended", cmd)
		return
	}
	tx := h.lock()
	attached, ended := tx.ide(s).attached, tx.ide(s).ended
	tx.unlock()
	if ended {
		s.fail(m, "%s: the debugging of this job was stopped (terminated); attach again to debug", cmd)
		return
	}
	if !attached {
		s.fail(m, "%s before attach: the client must send initialize and attach first", cmd)
		return
	}
	switch cmd {
	case "setBreakpoints", "setFunctionBreakpoints", "setExceptionBreakpoints":
		h.setBreakpoints(s, m, s.executor.Load())
	case "configurationDone":
		s.reply(newResponse(m, nil))
		h.ideConfigured(s)
	case "threads":
		if s.isRoot() {
			h.mergedThreads(s, m)
		} else {
			h.route(s, m)
		}
	case "continue", "pause", "next", "stepIn", "stepOut":
		// These resume (or stop) the thread they name and, with pydevd,
		// its whole process: in the merged view they must name a thread,
		// or say "all" (runControl); the executor that stopped last is no
		// safe guess when every executor is shown at once.
		tx := h.lock()
		merged := s.isRoot() && !tx.ide(s).childMode
		tx.unlock()
		if merged {
			h.runControl(s, m)
		} else {
			h.route(s, m)
		}
	case CaptureCommand:
		h.capture(s, m)
	case "evaluate":
		if isConsoleCommand(m) {
			h.consoleCommand(s, m)
		} else {
			h.route(s, m)
		}
	case "loadedSources":
		s.reply(newResponse(m, map[string]any{"sources": []any{}}))
	default:
		if dapOnlyCommands[cmd] {
			s.fail(m, "%s is not supported by pydevd", cmd)
			return
		}
		if broadcastCommands[cmd] && s.isRoot() {
			h.broadcast(s, m)
			return
		}
		h.route(s, m)
	}
}

func (s *IDESession) initialize(m Message) {
	var args godap.InitializeRequestArguments
	if a := m.Arguments(); a != nil {
		if err := fromMap(a, &args); err != nil {
			s.fail(m, "initialize: bad arguments: %v", err)
			return
		}
	}
	h := s.hub
	tx := h.lock()
	tx.ide(s).childMode = args.SupportsStartDebuggingRequest && !h.cfg.Merged
	tx.unlock()
	caps := godap.Capabilities{
		SupportsCompletionsRequest:        true,
		SupportsConditionalBreakpoints:    true,
		SupportsConfigurationDoneRequest:  true,
		SupportsDelayedStackTraceLoading:  true,
		SupportsEvaluateForHovers:         true,
		SupportsExceptionInfoRequest:      true,
		SupportsExceptionOptions:          true,
		SupportsFunctionBreakpoints:       true,
		SupportsHitConditionalBreakpoints: true,
		SupportsLogPoints:                 true,
		SupportsModulesRequest:            true,
		SupportsSetExpression:             true,
		SupportsSetVariable:               true,
		SupportsValueFormattingOptions:    true,
		SupportsGotoTargetsRequest:        true,
		SupportsClipboardContext:          true,
		SupportsStepInTargetsRequest:      true,
		ExceptionBreakpointFilters: []godap.ExceptionBreakpointsFilter{
			{Filter: "raised", Label: "Raised Exceptions", Description: "Break whenever any exception is raised."},
			{Filter: "uncaught", Label: "Uncaught Exceptions", Default: true,
				Description: "Break when the process is exiting due to unhandled exception."},
			{Filter: "userUnhandled", Label: "User Uncaught Exceptions",
				Description: "Break when exception escapes into library code (with PySpark: when it leaves your UDF)."},
		},
	}
	body := toMap(caps)
	body["supportsDebuggerProperties"] = true // not in go-dap's struct; debugpy's clients use it
	// supportTerminateDebuggee is left out on purpose: with it VS Code's
	// toolbar Disconnect would send "terminateDebuggee": false, which
	// detaches one executor (Hub.ideGone), where its users expect the
	// whole debugging of the job to stop.
	s.reply(newResponse(m, body))
}

func (s *IDESession) attach(m Message) {
	h := s.hub
	if why := h.checkIDEToken(m); why != "" {
		s.refuseIDE(m, why)
		return
	}
	args := m.Arguments()
	if args == nil {
		args = map[string]any{}
	}
	tx := h.lock()
	if tx.ide(s).attached {
		tx.unlock()
		s.fail(m, "already attached")
		return
	}
	if v, ok := args["sparkdapExecutor"]; ok {
		id, _ := toInt(v)
		es := tx.executors[uint64(id)]
		switch {
		case es == nil || !tx.exec(es).ready:
			tx.unlock()
			s.fail(m, "executor %v is no longer connected", v)
			return
		case tx.children[es.id] != nil:
			tx.unlock()
			s.fail(m, "executor %v already has a debug session", v)
			return
		}
		key, _ := args[ChildKeyArg].(string)
		if tx.exec(es).childKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(tx.exec(es).childKey)) != 1 {
			tx.unlock()
			s.refuseIDE(m, fmt.Sprintf("a child session for executor %v must attach with the configuration of the proxy's "+
				"startDebugging request (its %q is missing, wrong or already used)", v, ChildKeyArg))
			return
		}
		s.executor.Store(es)
		tx.exec(es).detached = false
		tx.exec(es).stopChildWait()
		tx.children[es.id] = s
		s.setLogger(s.logger().With().Uint64("executor", es.id).Logger())
	} else {
		if tx.root != nil {
			tx.unlock()
			s.fail(m, "another IDE is already attached to this sparkdap; disconnect it first")
			return
		}
		tx.root = s
		tx.attachArgs = deepCopy(args).(map[string]any)
		for _, es := range tx.executors {
			tx.exec(es).detached = false
		}
	}
	tx.ide(s).attached = true
	childMode := tx.ide(s).childMode
	tx.unlock()
	s.admitted.Store(true)
	if s.unadmitted != nil {
		s.unadmitted()
	}
	s.logger().Info().Bool("root", s.isRoot()).Bool("childSessions", childMode).Msg("IDE attached")
	s.reply(newResponse(m, nil))
	s.reply(newEvent("initialized", nil))
}

// ideConfigured runs when a session's configuration is done: the root
// learns about the executors already there, a child about its executor's
// stop if it stopped before the child arrived.
func (h *Hub) ideConfigured(s *IDESession) {
	tx := h.lock()
	defer tx.unlock()
	tx.ide(s).configured = true
	if !s.isRoot() {
		// Output first: it came before the stops.
		tx.sendHeldOutput(s.executor.Load(), s)
		tx.replayStops(s.executor.Load(), s)
		return
	}
	for _, es := range tx.ready() {
		if tx.ide(s).childMode {
			tx.announce(es)
		} else {
			tx.sendHeldOutput(es, s)
			tx.replayStops(es, s)
		}
	}
}

// replayStopsLocked re-sends an executor's current stops to a session that
// did not see them happen.
func (tx *held) replayStops(es *ExecutorSession, s *IDESession) {
	h := tx.h
	for _, ev := range tx.exec(es).stopped {
		out := deepCopy(ev).(Message) // allowedEvent's already
		if err := h.ids.globalize(es.id, out["body"]); err != nil {
			continue
		}
		tx.globalBreakpointIDs(es, out, s)
		if s.isRoot() {
			tx.mergedView(es, out)
		}
		_ = s.w.send(out, nil)
	}
}

// broadcast sends a settings request to every executor and answers with the
// first executor's response.
func (h *Hub) broadcast(s *IDESession, req Message) {
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
			once.Do(func() { h.relay(s, req, es, m, err) })
		})
	}
}

// route forwards a request to the executor that owns the ids it names (or,
// naming none, to the session's executor, the one that stopped last, or the
// only one) and relays the answer.
func (h *Hub) route(s *IDESession, req Message) {
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
		h.relay(s, req, es, m, err)
	})
}

// relay passes an executor's response back to the IDE under the IDE's seq
// and the global ids, and keeps the stop/resume bookkeeping.
func (h *Hub) relay(s *IDESession, req Message, es *ExecutorSession, m Message, err error) {
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
		case "next", "stepIn", "stepOut", "goto":
			if tid, ok := toInt(req.Arguments()["threadId"]); ok {
				if o, ok := h.ids.Local(kindThread, tid); ok {
					delete(tx.exec(es).stopped, o.local)
				}
			}
		}
		tx.unlock()
	}
	s.reply(out)
}

// resumedLocked records that continue resumed es. pydevd resumes every
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
// worker.IsPlumbingFile) as library frames: the frame subtle, its source
// deemphasized, so VS Code greys them out and folds them away instead of
// showing remote_debug.py's main and worker as if they were the user's.
// It reads executor paths, so it runs before they are mapped.
func markPlumbingFrames(body any) {
	b, _ := body.(map[string]any)
	frames, _ := b["stackFrames"].([]any)
	for _, f := range frames {
		fr, _ := f.(map[string]any)
		src, _ := fr["source"].(map[string]any)
		if p, _ := src["path"].(string); fr != nil && worker.IsPlumbingFile(p) {
			fr["presentationHint"] = "subtle"
			src["presentationHint"] = "deemphasize"
		}
	}
}
