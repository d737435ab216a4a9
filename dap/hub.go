package dap

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config tunes a Hub. Zero values take the defaults.
type Config struct {
	// Token is the access token executors must present (debugpy.connect's
	// access_token). Empty accepts any executor: tests only.
	Token string
	// IDEToken, if set, is the token DAP clients must present as the
	// "sparkdapToken" attach argument (and as an argument of the
	// sparkdapPaths status request). Child sessions get it in the
	// startDebugging configuration the proxy sends.
	IDEToken string
	// MaxSessions caps how many executors are debugged at once; 0 = no cap.
	// Executors beyond it are let go undebugged.
	MaxSessions int
	// MaxMessageBytes bounds one DAP message from any peer.
	MaxMessageBytes int
	// HandshakeTimeout bounds each step of an executor's handshake.
	HandshakeTimeout time.Duration
	// RequestTimeout bounds how long the IDE waits for an executor's answer.
	RequestTimeout time.Duration
	// FanoutTimeout bounds how long a request sent to every executor waits for
	// stragglers before answering with what it has.
	FanoutTimeout time.Duration
	// HelloTTL is how long an accepted hello waits for its worker's pydevd
	// connection before its session slot is given back.
	HelloTTL time.Duration
	// LabelWait is how long a new executor's child session waits for the
	// wrapper's task label before being announced without it.
	LabelWait time.Duration
	// Paths translates between executor paths and local sources; nil
	// passes paths through unchanged.
	Paths *PathMapper
	// Merged forces merged threads even for clients that support child
	// sessions.
	Merged bool
	// Summary gets one human line per executor attach/detach; nil for none.
	Summary io.Writer
	Log     zerolog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.FanoutTimeout <= 0 {
		c.FanoutTimeout = 5 * time.Second
	}
	if c.HelloTTL <= 0 {
		c.HelloTTL = DefaultHelloTTL
	}
	if c.LabelWait <= 0 {
		c.LabelWait = 500 * time.Millisecond
	}
}

// Hub joins one IDE to many executors. See the package documentation.
type Hub struct {
	cfg    Config
	log    zerolog.Logger
	ids    *IDTable
	nextID atomic.Uint64
	// refused counts workers let go undebugged, for Stats.
	refused atomic.Int64

	summaryMu sync.Mutex

	mu         sync.Mutex
	ideAddr    net.Addr                    // where child sessions connect
	executors  map[uint64]*ExecutorSession // admitted: in handshake or ready
	bps        *BreakpointRegistry
	root       *IDESession
	children   map[uint64]*IDESession // executor id → its child IDE session
	attachArgs map[string]any         // the root IDE's attach arguments
	focused    *ExecutorSession       // the executor that stopped last
	hellos     map[helloKey]*pendingHello
}

// NewHub returns a Hub with cfg's settings.
func NewHub(cfg Config) *Hub {
	cfg.setDefaults()
	return &Hub{cfg: cfg, log: cfg.Log, ids: NewIDTable(), executors: map[uint64]*ExecutorSession{},
		bps: newBreakpointRegistry(), children: map[uint64]*IDESession{}, hellos: map[helloKey]*pendingHello{}}
}

func (h *Hub) summary(format string, args ...any) {
	if h.cfg.Summary == nil {
		return
	}
	h.summaryMu.Lock()
	defer h.summaryMu.Unlock()
	fmt.Fprintf(h.cfg.Summary, "sparkdap: "+format+"\n", args...)
}

// Executors lists the executors that finished their handshake, by id.
func (h *Hub) Executors() []ExecutorStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]ExecutorStatus, 0, len(h.executors))
	for _, es := range h.executors {
		if es.ready {
			st := ExecutorStatus{ID: es.id, Label: es.Label(), Process: es.proc, Task: es.task,
				Stopped: len(es.stopped) > 0, OutputBytes: es.outputBytes}
			if st.Stopped {
				st.StoppedAt = es.stoppedAt
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ExecutorStatus is a snapshot of one executor session.
type ExecutorStatus struct {
	ID      uint64
	Label   string
	Process ProcessInfo
	Task    TaskInfo
	Stopped bool
	// StoppedAt is where it stopped (local file:line), once known.
	StoppedAt string
	// OutputBytes counts the stdout/stderr text it sent to the IDE.
	OutputBytes int64
}

// Stats is the Hub at a glance, for `sparkdap serve`'s live view.
type Stats struct {
	Executors   []ExecutorStatus
	IDEAttached bool
	// Refused counts workers let go undebugged: wrong or missing token,
	// session limit.
	Refused int64
}

// Stats returns a snapshot of the Hub.
func (h *Hub) Stats() Stats {
	st := Stats{Executors: h.Executors(), Refused: h.refused.Load()}
	h.mu.Lock()
	st.IDEAttached = h.root != nil
	h.mu.Unlock()
	return st
}

// ---- executor side ----

// admit takes a handshaking executor into the Hub, with what its hello
// said. A worker that said hello already holds a slot under the session
// limit; one that did not (a plain debugpy.connect) needs a free one.
func (h *Hub) admit(es *ExecutorSession, proc ProcessInfo) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hello, ok := h.claimHelloLocked(es.remote, proc.PID)
	if !ok && h.cfg.MaxSessions > 0 && len(h.executors)+len(h.hellos) >= h.cfg.MaxSessions {
		return false
	}
	if ok {
		es.task = hello.TaskInfo
		if hello.Roots != nil {
			es.roots = *hello.Roots
		}
	}
	es.proc = proc
	es.log = es.log.With().Int64("pid", proc.PID).Logger()
	h.executors[es.id] = es
	return true
}

func (h *Hub) unadmit(es *ExecutorSession) {
	h.mu.Lock()
	delete(h.executors, es.id)
	h.mu.Unlock()
}

func (h *Hub) executorInitializeArgs() map[string]any {
	return map[string]any{
		"clientID": "sparkdap", "clientName": "sparkdap", "adapterID": "debugpy",
		"pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
		"supportsVariableType": true, "supportsVariablePaging": true,
		"supportsRunInTerminalRequest": false, "supportsStartDebuggingRequest": false,
	}
}

// proxyOnlyKeys are attach fields that configure the IDE↔proxy link, not
// pydevd.
var proxyOnlyKeys = []string{"connect", "listen", "host", "port", "processId", "request", "type", "name",
	"preLaunchTask", "postDebugTask", "restart", "sparkdapExecutor", IDETokenArg, "subProcessId", "__sessionId",
	"__configurationTarget"}

// executorAttachArgs passes the IDE's debugger settings (justMyCode, rules,
// showReturnValue, …) on to pydevd, with defaults for when no IDE is there.
func (h *Hub) executorAttachArgs(es *ExecutorSession) map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	args := map[string]any{"justMyCode": true, "redirectOutput": true}
	for k, v := range h.attachArgs {
		args[k] = deepCopy(v)
	}
	for _, k := range proxyOnlyKeys {
		delete(args, k)
	}
	if _, ok := args["pathMappings"]; !ok && h.cfg.Paths != nil {
		// With any mapping in place pydevd gives every path it cannot map
		// a sourceReference, so code with no local copy can still be shown.
		// This one never matches: the proxy does the real mapping.
		args["pathMappings"] = []any{map[string]any{
			"localRoot": "/nonexistent/sparkdap-local", "remoteRoot": "/nonexistent/sparkdap-remote"}}
	}
	if es.task.PostMortem {
		// PySpark's worker catches every exception of a task, so to pydevd
		// none is ever uncaught. Counting PySpark as library code makes an
		// exception leaving the user's function "user-unhandled".
		rules, _ := args["rules"].([]any)
		for _, m := range []string{"pyspark", "py4j"} {
			rules = append(rules, map[string]any{"module": m, "include": false})
		}
		args["rules"] = rules
	}
	return args
}

// executorReady puts a handshaken executor into service: it replays the
// registry's breakpoints and from then on gets every fan-out. Both happen
// under h.mu, so no breakpoint change can fall between them.
func (h *Hub) executorReady(es *ExecutorSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	es.ready = true
	haveExceptions := false
	for _, e := range h.bps.global() {
		h.sendBreakpointsLocked(es, e, nil)
		haveExceptions = haveExceptions || e.command == "setExceptionBreakpoints"
	}
	if es.task.PostMortem && !haveExceptions {
		h.sendBreakpointsLocked(es, &bpEntry{command: "setExceptionBreakpoints", key: "setExceptionBreakpoints",
			args: map[string]any{"filters": []any{}}}, nil)
	}
	if h.root != nil && h.root.childMode && h.root.configured {
		es.announce = time.AfterFunc(h.cfg.LabelWait, func() { h.announce(es) })
	}
	es.log.Info().Str("label", es.Label()).Str("python", es.proc.Python).Msg("executor attached")
	h.summary("+ executor %d attached [%s]", es.id, es.Label())
}

// announce tells a child-session-capable IDE about an executor by asking it
// to start a child session for it.
func (h *Hub) announce(es *ExecutorSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.announceLocked(es)
}

func (h *Hub) announceLocked(es *ExecutorSession) {
	root := h.root
	if es.announced || !es.ready || root == nil || !root.childMode || !root.configured || h.children[es.id] != nil {
		return
	}
	if es.announce != nil {
		es.announce.Stop()
		es.announce = nil
	}
	es.announced = true
	cfg := map[string]any{}
	for k, v := range h.attachArgs {
		cfg[k] = deepCopy(v)
	}
	for _, k := range []string{"processId", "listen", "preLaunchTask", "postDebugTask", "request", "restart", "__sessionId"} {
		delete(cfg, k)
	}
	host, port := "127.0.0.1", 0
	if ta, ok := h.ideAddr.(*net.TCPAddr); ok {
		host, port = ta.IP.String(), ta.Port
		if ta.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
	}
	cfg["name"] = "Executor " + es.Label()
	cfg["connect"] = map[string]any{"host": host, "port": port}
	cfg["sparkdapExecutor"] = es.id
	_ = root.w.send(newRequest("startDebugging", map[string]any{"request": "attach", "configuration": cfg}), nil)
}

// eventTargetLocked is the IDE session that shows es's events, or nil.
func (h *Hub) eventTargetLocked(es *ExecutorSession) *IDESession {
	if c := h.children[es.id]; c != nil {
		return c
	}
	if h.root != nil && !h.root.childMode {
		return h.root
	}
	return nil
}

// executorEvent relays an event from pydevd, translated, to whichever IDE
// session shows that executor, and keeps the state needed to replay it.
func (h *Hub) executorEvent(es *ExecutorSession, m Message) {
	switch m.Event() {
	case "initialized", "process":
		return // the proxy already did the handshake; the IDE had its own
	case "terminated":
		// pydevd is shutting down; the EOF that follows cleans up. Forwarding
		// it would end the IDE's whole session.
		es.log.Debug().Msg("debuggee terminated")
		return
	case "sparkdapTask":
		h.taskEvent(es, m)
		return
	}
	body := m.Body()
	h.mu.Lock()
	defer h.mu.Unlock()
	tid, hasTid := toInt(body["threadId"])
	switch m.Event() {
	case "stopped", "continued", "thread":
		if !hasTid {
			// Without its thread the IDE cannot tell which executor's
			// thread it is about; pydevd always names one.
			es.log.Warn().Str("event", m.Event()).Msg("dropping event without an integer threadId")
			return
		}
	}
	switch m.Event() {
	case "stopped":
		if hasTid {
			es.stopped[tid] = deepCopy(m).(Message)
		}
		h.focused = es
		h.learnStopLocationLocked(es, tid)
	case "output":
		if text, ok := body["output"].(string); ok {
			es.outputBytes += int64(len(text))
		}
	case "continued":
		if all, _ := body["allThreadsContinued"].(bool); all {
			clear(es.stopped)
			h.ids.Release(es.id, kindFrame, kindVariables)
		} else {
			delete(es.stopped, tid)
		}
	case "thread":
		if body["reason"] == "exited" {
			delete(es.threads, tid)
			delete(es.stopped, tid)
		} else {
			es.threads[tid] = ""
		}
	case "breakpoint":
		h.breakpointEventLocked(es, m)
		return
	}
	target := h.eventTargetLocked(es)
	if target == nil {
		return
	}
	out := deepCopy(m).(Message)
	if err := h.ids.globalize(es.id, out["body"]); err != nil {
		es.log.Warn().Err(err).Str("event", m.Event()).Msg("dropping event")
		return
	}
	delete(out, "pydevd_cmd_id")
	h.localizePathsLocked(es, out["body"])
	if m.Event() == "stopped" {
		h.globalBreakpointIDsLocked(es, out)
	}
	if target == h.root {
		h.mergedViewLocked(es, out)
	}
	_ = target.w.send(out, nil)
	if m.Event() == "thread" && body["reason"] == "exited" {
		h.ids.ReleaseOne(kindThread, es.id, tid)
	}
}

// learnStopLocationLocked asks pydevd where a thread stopped (its top
// frame), for the status view: the stopped event does not say.
func (h *Hub) learnStopLocationLocked(es *ExecutorSession, tid int64) {
	es.stoppedAt = ""
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
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.cfg.Paths != nil && path != "" {
			if r := h.mapRemoteLocked(es, path); r.err == nil {
				path = r.m.Local
			}
		}
		if _, still := es.stopped[tid]; still {
			es.stoppedAt = fmt.Sprintf("%s:%d", filepath.Base(path), line)
		}
	})
}

// globalBreakpointIDsLocked names the breakpoints a stop hit by the ids the
// IDE knows them by.
func (h *Hub) globalBreakpointIDsLocked(es *ExecutorSession, ev Message) {
	b, _ := ev["body"].(map[string]any)
	hits, ok := b["hitBreakpointIds"].([]any)
	if !ok {
		return
	}
	out := make([]any, 0, len(hits))
	for _, v := range hits {
		if local, ok := toInt(v); ok {
			if g, ok := es.bpIDs[local]; ok {
				out = append(out, json.Number(itoa(g)))
			}
		}
	}
	b["hitBreakpointIds"] = out
}

// mergedViewLocked adapts one executor's event to a session that shows all
// executors at once: a stop or resume concerns that process only, and its
// output is prefixed with its label.
func (h *Hub) mergedViewLocked(es *ExecutorSession, out Message) {
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
		if s, ok := b["output"].(string); ok && b["category"] != "telemetry" {
			b["output"] = es.prefixLines(s)
		}
	}
}

// prefixLines puts the executor's label before each line of output, keeping
// track of lines split across events.
func (es *ExecutorSession) prefixLines(s string) string {
	var sb strings.Builder
	prefix := "[" + es.Label() + "] "
	for len(s) > 0 {
		if !es.midLine {
			sb.WriteString(prefix)
		}
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			sb.WriteString(s)
			es.midLine = true
			break
		}
		sb.WriteString(s[:i+1])
		s = s[i+1:]
		es.midLine = false
	}
	return sb.String()
}

// taskEvent takes the wrapper's report of which Spark task this worker runs.
func (h *Hub) taskEvent(es *ExecutorSession, m Message) {
	var ti TaskInfo
	if err := fromMap(m.Body(), &ti); err != nil {
		es.log.Warn().Err(err).Msg("ignoring malformed sparkdapTask event")
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ti.Roots == nil {
		ti.Roots = es.task.Roots
	}
	es.task = ti
	if ti.Roots != nil && !reflect.DeepEqual(*ti.Roots, es.roots) {
		es.roots = *ti.Roots
		for _, e := range h.bps.global() {
			h.sendBreakpointsLocked(es, e, nil)
		}
	}
	es.log.Info().Str("label", es.Label()).Msg("executor task")
	h.announceLocked(es)
}

// breakpointEventLocked relays pydevd's news about one breakpoint under the
// breakpoint's global id, merged with the other executors' view.
func (h *Hub) breakpointEventLocked(es *ExecutorSession, m Message) {
	bp, _ := m.Body()["breakpoint"].(map[string]any)
	local, ok := toInt(bp["id"])
	if !ok {
		return
	}
	global, ok := es.bpIDs[local]
	if !ok {
		return
	}
	ref, ok := h.bps.byID[global]
	if !ok || !h.bps.current(ref.entry) {
		return
	}
	if ref.entry.absorb(ref.index, bp) {
		h.breakpointChangedLocked(ref.entry, ref.index)
	}
}

// breakpointChangedLocked tells the IDE session that owns e about position i.
func (h *Hub) breakpointChangedLocked(e *bpEntry, i int) {
	target := h.root
	if e.owner != nil {
		target = h.children[e.owner.id]
	}
	if target == nil || !e.answered {
		return
	}
	_ = target.w.send(newEvent("breakpoint", map[string]any{
		"reason": "changed", "breakpoint": deepCopy(e.merged[i])}), nil)
}

// sendBreakpointsLocked sends entry e to one executor and folds the answer
// into the merged view; done, if set, gets the raw outcome.
// With a PathMapper, a source's breakpoints go to every executor path the
// local file may have there; done runs once all have answered.
func (h *Hub) sendBreakpointsLocked(es *ExecutorSession, e *bpEntry, done func()) {
	var requests []map[string]any
	paths := h.breakpointTargetsLocked(es, e)
	switch {
	case e.command == "setExceptionBreakpoints" && es.task.PostMortem:
		requests = []map[string]any{withPostMortem(e.args)}
	case paths != nil:
		for _, p := range paths {
			args := deepCopy(e.args).(map[string]any)
			args["source"].(map[string]any)["path"] = p
			requests = append(requests, args)
		}
	default:
		requests = []map[string]any{deepCopy(e.args).(map[string]any)}
	}
	var left atomic.Int64
	left.Store(int64(len(requests)))
	for _, args := range requests {
		es.request(e.command, args, h.cfg.FanoutTimeout, func(m Message, err error) {
			if err == nil {
				h.absorbBreakpoints(es, e, m)
			} else {
				es.log.Warn().Err(err).Str("command", e.command).Msg("breakpoints not set on executor")
			}
			if left.Add(-1) == 0 && done != nil {
				done()
			}
		})
	}
}

func (h *Hub) absorbBreakpoints(es *ExecutorSession, e *bpEntry, m Message) {
	if !m.Success() {
		es.log.Warn().Str("command", e.command).Str("error", m.ErrorMessage()).Msg("executor refused breakpoints")
		return
	}
	bps, _ := m.Body()["breakpoints"].([]any)
	h.mu.Lock()
	defer h.mu.Unlock()
	live := h.bps.current(e)
	e.grow(h.bps, len(bps))
	for i, item := range bps {
		bp, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if local, ok := toInt(bp["id"]); ok {
			es.bpIDs[local] = e.ids[i]
		}
		if e.absorb(i, bp) && live {
			h.breakpointChangedLocked(e, i)
		}
	}
}

// executorGone cleans up after an executor's connection ended.
func (h *Hub) executorGone(es *ExecutorSession, reason error) {
	h.mu.Lock()
	if _, ok := h.executors[es.id]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.executors, es.id)
	wasReady := es.ready
	es.ready = false
	if es.announce != nil {
		es.announce.Stop()
	}
	if h.focused == es {
		h.focused = nil
	}
	for _, e := range es.overrides {
		h.bps.drop(e)
	}
	child := h.children[es.id]
	delete(h.children, es.id)
	var exits []Message
	if target := h.eventTargetLocked(es); target != nil && child == nil {
		for tid := range es.threads {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				exits = append(exits, newEvent("thread", map[string]any{"reason": "exited", "threadId": g}))
			}
		}
		for _, ev := range exits {
			_ = target.w.send(ev, nil)
		}
	}
	label := es.Label()
	h.mu.Unlock()
	h.ids.Forget(es.id)
	if child != nil {
		_ = child.w.send(newEvent("terminated", nil), nil)
		child.w.closeAfterFlush(fmt.Errorf("executor %d went away", es.id))
	}
	if wasReady {
		es.log.Info().Err(reason).Msg("executor detached")
		h.summary("- executor %d detached [%s]", es.id, label)
	}
}

// ---- IDE side helpers ----

// readyLocked lists executors that take requests, in id order.
func (h *Hub) readyLocked() []*ExecutorSession {
	out := make([]*ExecutorSession, 0, len(h.executors))
	for _, es := range h.executors {
		if es.ready {
			out = append(out, es)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// setBreakpoints records a breakpoint request from the IDE, fans it out and
// answers with the merged result. owner nil means every executor (the root
// session); otherwise only owner (a child session).
func (h *Hub) setBreakpoints(ide *IDESession, req Message, owner *ExecutorSession) {
	args := req.Arguments()
	if args == nil {
		args = map[string]any{}
	}
	h.mu.Lock()
	e := h.bps.newEntry(req.Command(), deepCopy(args).(map[string]any), owner)
	var targets []*ExecutorSession
	if owner != nil {
		if old := owner.overrides[e.key]; old != nil {
			h.bps.drop(old)
		}
		owner.overrides[e.key] = e
		if owner.ready {
			targets = []*ExecutorSession{owner}
		}
	} else {
		for _, es := range h.readyLocked() {
			if !es.detached && es.overrides[e.key] == nil {
				targets = append(targets, es)
			}
		}
	}
	remaining := len(targets)
	answer := func() {
		h.mu.Lock()
		e.answered = true
		body := e.body()
		h.mu.Unlock()
		if req.Command() == "setExceptionBreakpoints" && len(e.ids) == 0 {
			body = nil
		}
		ide.reply(newResponse(req, body))
	}
	var once sync.Once
	var left atomic.Int64
	left.Store(int64(remaining))
	for _, es := range targets {
		h.sendBreakpointsLocked(es, e, func() {
			if left.Add(-1) == 0 {
				once.Do(answer)
			}
		})
	}
	h.mu.Unlock()
	if remaining == 0 {
		answer()
	}
}

// ideGone handles the end of an IDE session (disconnect or dropped
// connection). Executors are never killed for it: they are resumed and
// stripped of breakpoints, so jobs run on while nobody watches.
func (h *Hub) ideGone(ide *IDESession, terminateDebuggee bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ide == h.root:
		h.root = nil
		h.attachArgs = nil
		undo := h.bps.clear()
		for _, es := range h.readyLocked() {
			es.announced = false
			for _, m := range undo {
				es.request(m.Command(), m.Arguments(), h.cfg.FanoutTimeout, ignoreAnswer(es))
			}
			h.resumeLocked(es)
		}
		h.summary("IDE detached; %d executor(s) resumed and keep running", len(h.executors))
	case ide.executor != nil && h.children[ide.executor.id] == ide:
		es := ide.executor
		delete(h.children, es.id)
		es.detached = true
		if terminateDebuggee {
			es.request("disconnect", map[string]any{"terminateDebuggee": true}, h.cfg.RequestTimeout, ignoreAnswer(es))
			return
		}
		entries := h.bps.global()
		for key, e := range es.overrides {
			entries = append(entries, e)
			h.bps.drop(e)
			delete(es.overrides, key)
		}
		undo := clearRequests(entries)
		for _, m := range undo {
			es.request(m.Command(), m.Arguments(), h.cfg.FanoutTimeout, ignoreAnswer(es))
		}
		h.resumeLocked(es)
	}
}

// resumeLocked lets a stopped executor run on.
func (h *Hub) resumeLocked(es *ExecutorSession) {
	if len(es.stopped) == 0 {
		return
	}
	var tid int64
	for t := range es.stopped {
		tid = t
		break
	}
	clear(es.stopped)
	es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
}

func ignoreAnswer(es *ExecutorSession) func(Message, error) {
	return func(m Message, err error) {
		if err == nil && !m.Success() {
			err = fmt.Errorf("%s", m.ErrorMessage())
		}
		if err != nil {
			es.log.Debug().Err(err).Msg("cleanup request failed")
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// withPostMortem adds the userUnhandled filter to exception breakpoint
// arguments, for a worker started with --post-mortem.
func withPostMortem(args map[string]any) map[string]any {
	out := deepCopy(args).(map[string]any)
	filters, _ := out["filters"].([]any)
	for _, f := range filters {
		if f == "userUnhandled" {
			return out
		}
	}
	out["filters"] = append(filters, "userUnhandled")
	return out
}
