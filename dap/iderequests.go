package dap

import (
	"crypto/subtle"
	"fmt"

	godap "github.com/google/go-dap"
)

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
		s.configurationDone()
	case "threads":
		if s.isRoot() {
			s.mergedThreads(m)
		} else {
			s.route(m)
		}
	case "continue", "pause", "next", "stepIn", "stepOut":
		// These resume (or stop) the thread they name and, with pydevd,
		// its whole process: in the merged view they must name a thread,
		// or say "all" (runControl); the executor that stopped last is no
		// safe guess when every executor is shown at once.
		tx := h.lock()
		merged := s.isRoot() && !tx.ide(s).childMode
		rootOfChildren := cmd == "pause" && s.isRoot() && tx.ide(s).childMode
		tx.unlock()
		if rootOfChildren {
			// The root lists no threads of its own, and a worker not
			// listed has no session to show a pause in: pausing one would
			// list it, and pausing all would list every worker.
			s.fail(m, "%s: select a stopped worker's session; workers not listed run until they reach a breakpoint", cmd)
			return
		}
		if merged {
			s.runControl(m)
		} else {
			s.route(m)
		}
	case CaptureCommand:
		h.capture(s, m)
	case ControlCommand, WatchCommand:
		s.viewRequest(m)
	case "evaluate":
		if isConsoleCommand(m) {
			h.consoleCommand(s, m)
		} else {
			s.route(m)
		}
	case "loadedSources":
		s.reply(newResponse(m, map[string]any{"sources": []any{}}))
	default:
		if dapOnlyCommands[cmd] {
			s.fail(m, "%s is not supported by pydevd", cmd)
			return
		}
		if broadcastCommands[cmd] && s.isRoot() {
			s.broadcast(m)
			return
		}
		s.route(m)
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
		x := tx.exec(es)
		key, _ := args[ChildKeyArg].(string)
		if x.childKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(x.childKey)) != 1 {
			tx.unlock()
			s.refuseIDE(m, fmt.Sprintf("a child session for executor %v must attach with the configuration of the proxy's "+
				"startDebugging request (its %q is missing, wrong or already used)", v, ChildKeyArg))
			return
		}
		s.executor.Store(es)
		x.detached = false
		x.stopChildWait()
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

// configurationDone runs when a session's configuration is done: the root
// learns about the executors already there, a child about its executor's
// stop if it stopped before the child arrived.
func (s *IDESession) configurationDone() {
	h := s.hub
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
		// Output first, in both modes: in child-session mode the output
		// of workers not listed is the root's to show.
		tx.sendHeldOutput(es, s)
		if tx.ide(s).childMode {
			tx.announce(es)
		} else {
			tx.replayStops(es, s)
		}
	}
}

// replayStops re-sends an executor's current stops to a session that
// did not see them happen.
func (tx *held) replayStops(es *ExecutorSession, s *IDESession) {
	h := tx.h
	for _, ev := range tx.exec(es).stopped {
		out := deepCopy(ev).(Message) // allowedEvent's already
		if err := h.ids.globalize(es.id, out["body"]); err != nil {
			continue
		}
		tx.globalBreakpointIDs(es, out, s)
		tx.exec(es).describeStop(out)
		if s.isRoot() {
			tx.mergedView(es, out)
		}
		_ = s.w.send(out, nil)
	}
}
