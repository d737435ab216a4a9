package dap

import (
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/worker"
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
	Paths *pathmap.Mapper
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
	ids    *idTable
	nextID atomic.Uint64
	// refused counts workers let go undebugged, for Stats.
	refused atomic.Int64

	summaryMu sync.Mutex

	mu         sync.Mutex
	ideAddr    net.Addr                    // where child sessions connect
	executors  map[uint64]*ExecutorSession // admitted: in handshake or ready
	bps        *breakpointRegistry
	root       *IDESession
	children   map[uint64]*IDESession // executor id → its child IDE session
	attachArgs map[string]any         // the root IDE's attach arguments
	focused    *ExecutorSession       // the executor that stopped last
	// admission holds pending hellos and applies the token and session
	// limit (its lock is a leaf: called under mu). Sessions it counts are
	// len(executors).
	admission *worker.Registry
}

// NewHub returns a Hub with cfg's settings.
func NewHub(cfg Config) *Hub {
	cfg.setDefaults()
	return &Hub{cfg: cfg, log: cfg.Log, ids: newIDTable(), executors: map[uint64]*ExecutorSession{},
		bps: newBreakpointRegistry(), children: map[uint64]*IDESession{},
		admission: worker.NewRegistry(worker.Config{Token: cfg.Token, MaxSessions: cfg.MaxSessions, TTL: cfg.HelloTTL})}
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
			st := ExecutorStatus{ID: es.id, Label: es.labelLocked(), Process: es.proc, Task: es.task,
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

// admit takes a handshaking executor into the Hub, with what its hello
// said, if its access token (pydevd's clientAccessToken) holds. A worker
// that said hello presents the one-time token derived in it (the claim
// makes it single-use) and already holds a slot under the session limit;
// one that did not (a plain debugpy.connect) presents the token itself and
// needs a free slot. The refusal is worker.ErrNoToken, ErrWrongToken or a
// *worker.SessionLimitError.
func (h *Hub) admit(es *ExecutorSession, proc ProcessInfo, token string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	hello, ok := h.claimHelloLocked(es.remote, proc.PID)
	if ok {
		if err := h.admission.CheckPydevdToken(hello, token); err != nil {
			return err
		}
	} else {
		if err := h.admission.CheckToken(token); err != nil {
			return err
		}
		if err := h.admission.AdmitWithoutHello(len(h.executors)); err != nil {
			return err
		}
	}
	if ok {
		es.task = hello.TaskInfo
		if hello.Roots != nil {
			es.paths.SetRoots(*hello.Roots)
		}
	}
	es.proc = proc
	es.setLogger(es.logger().With().Int64("pid", proc.PID).Logger())
	h.executors[es.id] = es
	return nil
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
		// The worker wrapper too: it runs as __main__, and a failed task's
		// worker leaves through it with SystemExit, which would otherwise
		// stop there as one more user-unhandled exception.
		rules = append(rules, map[string]any{"path": "**/remote_debug.py", "include": false})
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
	es.logger().Info().Str("label", es.labelLocked()).Str("python", es.proc.Python).Msg("executor attached")
	h.summary("+ executor %d attached [%s]", es.id, es.labelLocked())
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
	// A detached executor's child session was closed since this root
	// attached: the developer let it go, so it is not opened again.
	if es.announced || es.detached || !es.ready || root == nil || !root.childMode || !root.configured || h.children[es.id] != nil {
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
	cfg["name"] = "Executor " + es.labelLocked()
	cfg["connect"] = map[string]any{"host": host, "port": port}
	cfg["sparkdapExecutor"] = es.id
	_ = root.w.send(newRequest("startDebugging", map[string]any{"request": "attach", "configuration": cfg}), nil)
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
	label := es.labelLocked()
	h.mu.Unlock()
	h.ids.Forget(es.id)
	if child != nil {
		_ = child.w.send(newEvent("terminated", nil), nil)
		child.w.closeAfterFlush(fmt.Errorf("executor %d went away", es.id))
	}
	if wasReady {
		es.logger().Info().Err(reason).Msg("executor detached")
		h.summary("- executor %d detached [%s]", es.id, label)
	}
}

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

// ideGone handles the end of an IDE session (disconnect or dropped
// connection). Executors are never killed for it (unless a child session
// asked for terminateDebuggee): every executor no session shows any more
// has each breakpoint ever sent to it cleared at the executor paths it was
// sent to, and is resumed, so jobs run on while nobody watches.
func (h *Hub) ideGone(ide *IDESession, terminateDebuggee bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ide == h.root:
		h.root = nil
		h.attachArgs = nil
		global := map[string]bool{}
		for _, e := range h.bps.global() {
			global[e.key] = true
		}
		h.bps.clear()
		released := 0
		for _, es := range h.readyLocked() {
			es.announced = false
			if h.children[es.id] != nil {
				// Its child session still shows it: only the root's
				// breakpoints go, those the child set stay.
				h.clearSentLocked(es, func(key string) bool { return !global[key] || es.overrides[key] != nil })
				continue
			}
			h.releaseLocked(es)
			released++
		}
		h.summary("IDE detached; %d executor(s) resumed and keep running", released)
	case ide.executor != nil && h.children[ide.executor.id] == ide:
		es := ide.executor
		delete(h.children, es.id)
		es.detached = true
		h.releaseLocked(es)
		if terminateDebuggee {
			// Released first all the same: if the worker outlives the
			// request, it must not wait at a breakpoint for nobody.
			es.request("disconnect", map[string]any{"terminateDebuggee": true}, h.cfg.RequestTimeout, ignoreAnswer(es))
		}
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
			es.logger().Debug().Err(err).Msg("cleanup request failed")
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
