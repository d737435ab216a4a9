package dap

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	godap "github.com/google/go-dap"
	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/guard"
)

// IDESession is one connection from a DAP client: the root session, which
// attached without naming an executor, or a child session bound to one
// executor (a startDebugging the proxy asked for).
//
// Ownership: the goroutine running serve reads the connection and handles
// its messages in order; w has one writer at a time, and a send never
// blocks. The Hub's lock guards the session's state, g, which the compiler
// lets only its holder reach (held.ide); id, hub and w never change,
// unadmitted is set before serving, and the rest is atomic or a sync.Once.
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
	// progressed tells that budget the client sent a whole first message;
	// nil outside serveIDE. Set before serving; called on the reader.
	progressed func()
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

func newIDESession(h *Hub, id uint64, served, conn net.Conn) *IDESession {
	s := &IDESession{id: id, hub: h, w: newWire(served, conn, false)}
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
	fr := dapwire.NewFrameReader(s.w.conn, s.hub.cfg.MaxMessageBytes)
	fr.LimitUntil(&s.admitted, maxUnattachedMessageBytes)
	fr.OnAlloc(s.hub.frameAlloc)
	go func() { done <- s.w.readFrames(fr, dapwire.DecodeMessage, s.w.firstTells(fr, s.progressed, s.handle)) }()
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

// announce tells a child-session-capable IDE about a stopped executor by
// asking it to start a child session for it.
func (tx *held) announce(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	root := tx.root
	// A detached executor's child session was closed since this root
	// attached: the developer let it go, so it is not opened again. Only
	// a stopped worker is announced (see unlist).
	if x.announced || x.detached || !x.ready || len(x.stopped) == 0 || root == nil || !tx.ide(root).childMode ||
		!tx.ide(root).configured || tx.children[es.id] != nil {
		return
	}
	x.announced = true
	x.announceGen++
	gen := x.announceGen
	cfg := tx.rootAttachArgs(notForChildKeys)
	// Named after the task it stopped in, first, then the worker: VS Code
	// cuts a long session name at the end, and with one thread it shows
	// no thread row, so the name is what tells stops apart; nvim-dap's
	// sessions widget shows the name alone. The session lasts while the
	// worker runs that task (unlist), so the name stays true.
	cfg["name"] = x.sessionName()
	cfg["connect"] = tx.childConnect()
	cfg["sparkdapExecutor"] = es.id
	// Only the root is given this value, and only here: a child attach must
	// bring it back, once, so another local client cannot take the
	// executor by naming its id.
	x.childKey = newChildKey()
	cfg[ChildKeyArg] = x.childKey
	req := newRequest("startDebugging", map[string]any{"request": "attach", "configuration": cfg})
	// The seq is recorded before the request can reach the IDE, so its
	// answer always finds the executor it is about.
	_ = root.w.send(req, func(seq int64) { tx.ide(root).asked[seq] = childAsk{es, gen} })
	// The IDE may refuse (answered in IDESession.handle) or never open the
	// child: either way nobody watches es, and it must not wait for anyone.
	x.childWait = time.AfterFunc(h.cfg.ChildAttachTimeout, func() {
		tx := h.lock()
		defer tx.unlock()
		tx.childMissing(es, gen, fmt.Sprintf("its child session did not attach within %s", h.cfg.ChildAttachTimeout))
	})
}

// proxyOnlyKeys are attach fields that configure the IDE↔proxy link, not
// pydevd.
var proxyOnlyKeys = []string{"connect", "listen", "host", "port", "processId", "request", "type", "name",
	"preLaunchTask", "postDebugTask", "restart", "sparkdapExecutor", IDETokenArg, ChildKeyArg, "subProcessId", "__sessionId",
	"__configurationTarget"}

// notForChildKeys are attach fields of the root's configuration that its
// child sessions' configurations leave out: what launches or restarts a
// session, and what names this one process or session. Those that say
// where and how to connect are kept (the child connects as the root did),
// and announce sets name, connect and the child's own keys.
var notForChildKeys = []string{"processId", "listen", "preLaunchTask", "postDebugTask", "request", "restart", "__sessionId"}

// rootAttachArgs is a copy of the root IDE's attach arguments without the
// fields named in drop: what a pydevd attach (proxyOnlyKeys) or a child
// session's configuration (notForChildKeys) takes from them.
func (tx *held) rootAttachArgs(drop []string) map[string]any {
	out := make(map[string]any, len(tx.attachArgs))
	for k, v := range tx.attachArgs {
		if !slices.Contains(drop, k) {
			out[k] = deepCopy(v)
		}
	}
	return out
}

// childConnect is where a child session must connect: where the
// root did, as its attach configuration says (connect.host/port, or the
// older top-level host/port), since the IDE may reach the proxy through a
// forwarded port (ssh -L, a container's port mapping) that the proxy's
// own listen address is not; the listen address only when the
// configuration names none.
func (tx *held) childConnect() map[string]any {
	if c, ok := tx.attachArgs["connect"].(map[string]any); ok {
		if addr := connectAddr(c["host"], c["port"]); addr != nil {
			return addr
		}
	}
	if addr := connectAddr(tx.attachArgs["host"], tx.attachArgs["port"]); addr != nil {
		return addr
	}
	host, port := "127.0.0.1", 0
	if ta, ok := tx.ideAddr.(*net.TCPAddr); ok {
		host, port = ta.IP.String(), ta.Port
		if ta.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
	}
	return map[string]any{"host": host, "port": port}
}

// connectAddr is {host, port} from an attach configuration's values, or
// nil unless port is a valid port (a number or a numeric string, as
// launch.json variables give). A missing host is debugpy's default.
func connectAddr(hostV, portV any) map[string]any {
	port, ok := toInt(portV)
	if !ok {
		if s, isStr := portV.(string); isStr {
			n, err := strconv.ParseInt(s, 10, 32)
			port, ok = n, err == nil
		}
	}
	if !ok || port <= 0 || port > 65535 {
		return nil
	}
	host, _ := hostV.(string)
	if host == "" {
		host = "127.0.0.1"
	}
	return map[string]any{"host": host, "port": port}
}

// childAsk is a startDebugging request the root IDE has not answered yet.
type childAsk struct {
	es  *ExecutorSession
	gen uint64 // the executor's announceGen when it was sent
}

// childMissing lets es go when the child session announcement gen
// asked for will not come (the IDE refused it or never opened it): it is
// then watched by nobody, so its breakpoints are cleared and it is resumed.
// A newer announcement, or a child that did attach, makes it a no-op.
func (tx *held) childMissing(es *ExecutorSession, gen uint64, why string) {
	x := tx.exec(es)
	if x.announceGen != gen || !x.announced || !x.ready || tx.children[es.id] != nil {
		return
	}
	x.stopChildWait()
	x.detached = true
	es.logger().Warn().Str("reason", why).
		Msg("the IDE did not open this executor's child session; clearing its breakpoints and resuming it")
	tx.release(es)
}

// stopChildWait forgets the child session es's announcement awaits;
// its one-time value no longer opens one.
func (x *executorState) stopChildWait() {
	x.announceGen++
	x.childKey = ""
	if x.childWait != nil {
		x.childWait.Stop()
		x.childWait = nil
	}
}

// ChildKeyArg is the attach argument of a child session: the one-time value
// the proxy put in the startDebugging configuration that asked for it.
const ChildKeyArg = "sparkdapChildKey"

// newChildKey returns a fresh unguessable one-time value.
func newChildKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
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

// ideGone handles the end of an IDE session (disconnect or dropped
// connection). Stopping any session stops the debugging of the whole job,
// as debugpy's own subprocess debugging does: every other session the
// proxy owns gets terminated and is closed, the breakpoints are forgotten
// and every executor is let go. Two departures end less: a child session
// that says "terminateDebuggee": false detaches its executor only, and a
// child session whose connection drops without a disconnect loses only its
// executor (a crashed window must not end the others). Executors are never
// killed for it (unless a child session asked for terminateDebuggee):
// every executor no session shows any more has each breakpoint ever sent
// to it cleared at the executor paths it was sent to, and is resumed, so
// jobs run on while nobody watches.
func (h *Hub) ideGone(ide *IDESession, how leaveKind) {
	tx := h.lock()
	defer tx.unlock()
	isChild := ide.executor.Load() != nil && tx.children[ide.executor.Load().id] == ide
	switch {
	case ide != tx.root && !isChild:
		return // already let go: the job's debugging was stopped from elsewhere
	case isChild && (how == leaveDropped || how == leaveDetach):
		tx.childGone(ide, false)
		return
	}
	tx.stopDebugging(ide, how == leaveStopAllTerminate)
}

// stopDebugging ends every IDE session of the job because from (the
// root or a child) stopped: child sessions first (each releases its
// executor), then the root (which releases the rest and forgets the
// breakpoints, so no executor stops again and none is announced). Every
// session but from is told terminated, as an adapter tells a client whose
// debuggee ended; VS Code answers it with its own disconnect, which is
// answered before the connection closes (IDESession.leave).
func (tx *held) stopDebugging(from *IDESession, terminateFrom bool) {
	h := tx.h
	ids := make([]uint64, 0, len(tx.children))
	for id := range tx.children {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var others []*IDESession
	for _, id := range ids {
		c := tx.children[id]
		tx.childGone(c, terminateFrom && c == from)
		if c != from {
			others = append(others, c)
		}
	}
	if root := tx.root; root != nil {
		tx.rootGone()
		if root != from {
			others = append(others, root)
		}
	}
	for _, s := range others {
		tx.ide(s).ended = true
		_ = s.w.send(newEvent("terminated", nil), nil)
		// The client answers terminated with disconnect: answered, it
		// closes the connection itself (IDESession.leave).
		s.leave()
	}
	if len(others) > 0 {
		h.summary("debugging stopped from the IDE: %d other session(s) terminated", len(others))
	}
}

// rootGone lets the root session go: its breakpoints are forgotten
// and every executor no child session shows is released.
func (tx *held) rootGone() {
	h := tx.h
	tx.root = nil
	tx.attachArgs = nil
	global := map[string]bool{}
	for _, e := range tx.bps.global() {
		global[e.key] = true
	}
	tx.bps.clear()
	released := 0
	for _, es := range tx.ready() {
		tx.exec(es).announced = false
		tx.exec(es).stopChildWait()
		if tx.children[es.id] != nil {
			// Its child session still shows it: only the root's
			// breakpoints go, those the child set stay.
			tx.clearSent(es, func(key string) bool { return !global[key] || tx.exec(es).overrides[key] != nil })
			continue
		}
		tx.release(es)
		released++
	}
	h.summary("IDE detached; %d executor(s) resumed and keep running", released)
}

// childGone lets a child session go: its executor runs on undebugged
// (terminated first if terminate) and is not announced again to this root.
func (tx *held) childGone(ide *IDESession, terminate bool) {
	h := tx.h
	es := ide.executor.Load()
	delete(tx.children, es.id)
	tx.exec(es).detached = true
	tx.release(es)
	if terminate {
		// Released first all the same: if the worker outlives the
		// request, it must not wait at a breakpoint for nobody.
		es.request("disconnect", map[string]any{"terminateDebuggee": true}, h.cfg.RequestTimeout, ignoreAnswer(es))
	}
}
