package dap

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/connbudget"
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
	// MaxUnadmitted bounds the executor port's connections that have not
	// yet presented the access token, and MaxUnadmittedPerSource those of
	// them from one source address; more are closed unread. Defaults
	// connbudget.DefaultTotal and connbudget.DefaultPerSource.
	MaxUnadmitted          int
	MaxUnadmittedPerSource int
	// MaxUnattached bounds the IDE port's connections that have not yet
	// attached, a budget of its own: nothing on the executor port can
	// starve the IDE. Default DefaultMaxUnattached.
	MaxUnattached int
	// RefusalLogInterval is how often refusals held back from the log are
	// summed up, one line per cause. Default connbudget.DefaultLogInterval.
	RefusalLogInterval time.Duration
	// AttachTimeout is how long an IDE connection may stay without
	// attaching. Default 30 s.
	AttachTimeout time.Duration
	// ChildAttachTimeout is how long the root IDE has to open the child
	// session the proxy asked for (startDebugging) before its executor is
	// let go as unwatched.
	ChildAttachTimeout time.Duration
	// DisconnectGrace is how long an IDE connection stays open after its
	// session ended (its disconnect was answered, or it was sent
	// terminated), for the client to close it first: clients close it
	// once they have the answer. Default DefaultDisconnectGrace.
	DisconnectGrace time.Duration
	// LeasePing is how often the proxy speaks to a worker with a stopped
	// thread, renewing the lease the wrapper holds the stop on (lease.go).
	// Default DefaultLeasePing.
	LeasePing time.Duration
	// Paths translates between executor paths and local sources; nil
	// passes paths through unchanged.
	Paths *pathmap.Mapper
	// CaptureDir is where sparkdapCapture writes capture files (on the
	// developer's machine); empty refuses captures.
	CaptureDir string
	// CaptureMaxBytes caps one capture (the pickled function and
	// arguments). Default DefaultCaptureMaxBytes.
	CaptureMaxBytes int
	// Merged forces merged threads even for clients that support child
	// sessions.
	Merged bool
	// MaxStop, if positive, is how long a worker may stay stopped with no
	// IDE request about it before the proxy resumes it (and tells the IDE):
	// a forgotten breakpoint must not hold a cluster slot indefinitely.
	// Requests about it are those routed to it (naming its threads, frames
	// or variables, or sent by its child session) and captures of its
	// frames (from the IDE or `sparkdap capture`); requests about every
	// executor (merged threads, settings) do not restart its clock. Zero or
	// negative: no limit.
	MaxStop time.Duration
	// Summary gets one human line per executor attach/detach; nil for none.
	// Log's writer and Summary are written under the Hub's lock: they must
	// never block (serve gives both an internal/logsink.Sink).
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
	if c.MaxUnadmitted <= 0 {
		c.MaxUnadmitted = connbudget.DefaultTotal
	}
	if c.MaxUnadmittedPerSource <= 0 {
		c.MaxUnadmittedPerSource = connbudget.DefaultPerSource
	}
	if c.MaxUnattached <= 0 {
		c.MaxUnattached = DefaultMaxUnattached
	}
	if c.LeasePing <= 0 {
		c.LeasePing = DefaultLeasePing
	}
	if c.AttachTimeout <= 0 {
		c.AttachTimeout = 30 * time.Second
	}
	if c.ChildAttachTimeout <= 0 {
		c.ChildAttachTimeout = DefaultChildAttachTimeout
	}
	if c.CaptureMaxBytes <= 0 {
		c.CaptureMaxBytes = DefaultCaptureMaxBytes
	}
	if c.DisconnectGrace <= 0 {
		c.DisconnectGrace = DefaultDisconnectGrace
	}
}

// DefaultDisconnectGrace is Config.DisconnectGrace's default: a client
// closes within milliseconds of reading the answer; one that has not in
// this time is not going to.
const DefaultDisconnectGrace = 2 * time.Second

// DefaultMaxUnattached is Config.MaxUnattached's default. A client
// attaches within milliseconds of connecting, but in child-session mode the
// IDE opens one connection per executor, so a job's executors arriving
// together make as many IDE connections at once as executor connections:
// as many places as the executor port has. It bounds memory, not a local
// user (who could hold any number idle until AttachTimeout).
const DefaultMaxUnattached = connbudget.DefaultTotal

// DefaultChildAttachTimeout is Config.ChildAttachTimeout's default.
const DefaultChildAttachTimeout = 30 * time.Second

// Hub joins one IDE to many executors. See the package documentation.
//
// Locking. Hub.mu guards the Hub's maps and every field documented as
// "guarded by hub.mu" on ExecutorSession and IDESession; methods named
// …Locked expect it held. The rules that keep the proxy deadlock-free:
//
//   - Each connection has one reader goroutine (ExecutorSession.serve,
//     IDESession.serve) that calls handle for each message in order;
//     handle may take Hub.mu but never waits for another connection.
//   - Sends never block and never call back: wire.send only queues, under
//     wire.mu, which is taken after Hub.mu and never before it. So sending
//     while holding Hub.mu is allowed.
//   - A callback given to ExecutorSession.request (a response, a timeout,
//     a failed send, a closed connection) never runs on the goroutine that
//     called request: it runs on the connection's reader, a timer's
//     goroutine, or a goroutine of its own. Callbacks may therefore take
//     Hub.mu, and callers may hold it while they call request.
//   - Nothing is called under Hub.mu that waits for a peer, a timer or
//     another goroutine that may need Hub.mu.
//   - idTable and ExecutorSession.pendMu have their own locks, always
//     innermost: nothing takes Hub.mu while holding them.
type Hub struct {
	cfg    Config
	log    zerolog.Logger
	now    func() time.Time // the clock of MaxStop; tests replace it before serving
	ids    *idTable
	nextID atomic.Uint64
	// exeBudget and ideBudget count each port's connections before their
	// token or attach; logLimit rate-limits the warnings about refused
	// connections, per cause. Each has its own lock, a leaf.
	exeBudget, ideBudget *connbudget.Budget
	logLimit             *connbudget.Limiter
	// callbacks counts request callbacks running on goroutines of their
	// own (a send that failed), so a Server can wait for them as it does
	// for its connections: nothing of the Hub logs after Serve returns.
	callbacks sync.WaitGroup

	summaryMu sync.Mutex
	// refusals prints refused workers' summary lines, the first per
	// address and then sums, so a flood of refusals cannot flood the
	// terminal, and counts the refused workers for Stats (its own lock; it
	// calls summary, which takes summaryMu).
	refusals *worker.RefusalLog

	mu         sync.Mutex
	ideAddr    net.Addr                    // where child sessions connect
	executors  map[uint64]*ExecutorSession // admitted: in handshake or ready
	bps        *breakpointRegistry
	root       *IDESession
	children   map[uint64]*IDESession // executor id → its child IDE session
	attachArgs map[string]any         // the root IDE's attach arguments
	focused    *ExecutorSession       // the executor that stopped last
	// readyCache is readyViewLocked's answer while readyValid: cleared
	// wherever an executor enters or leaves the ready set.
	readyCache []*ExecutorSession
	readyValid bool
	// admission holds pending hellos and applies the token and session
	// limit (its lock is a leaf: called under mu). Sessions it counts are
	// len(executors).
	admission *worker.Registry

	// frameAlloc, if set before serving, is every connection's
	// FrameReader.OnAlloc (tests).
	frameAlloc func(capacity int)
}

// NewHub returns a Hub with cfg's settings.
func NewHub(cfg Config) *Hub {
	cfg.setDefaults()
	h := &Hub{cfg: cfg, log: cfg.Log, now: time.Now, ids: newIDTable(), executors: map[uint64]*ExecutorSession{},
		bps: newBreakpointRegistry(), children: map[uint64]*IDESession{},
		admission: worker.NewRegistry(worker.Config{Token: cfg.Token, MaxSessions: cfg.MaxSessions, TTL: cfg.HelloTTL})}
	h.refusals = worker.NewRefusalLog(func(line string) { h.summary("%s", line) }, 0, 0)
	h.exeBudget = connbudget.New(cfg.MaxUnadmitted, cfg.MaxUnadmittedPerSource)
	h.ideBudget = connbudget.New(cfg.MaxUnattached, 0)
	h.logLimit = connbudget.NewLimiter(cfg.RefusalLogInterval, func(cause string, n int, in time.Duration) {
		h.log.Warn().Str("cause", cause).Int("refused", n).Dur("in", in).Msg("more connections refused for the same cause")
	})
	return h
}

// goCallback runs f on a goroutine of its own that WaitCallbacks waits for.
func (h *Hub) goCallback(f func()) {
	h.callbacks.Add(1)
	go func() {
		defer h.callbacks.Done()
		f()
	}()
}

// WaitCallbacks returns once the request callbacks started on goroutines
// of their own have returned. Call it after the connections are done.
func (h *Hub) WaitCallbacks() { h.callbacks.Wait() }

// Close stops the Hub's own timers (pending hellos' TTLs, the refusal
// summary) once its callers are done serving: after it, nothing of the Hub
// runs by itself. Sessions end with the contexts they were served with.
func (h *Hub) Close() {
	h.admission.Close()
	h.refusals.Close()
	h.logLimit.Close()
}

// refusedLine counts a refused worker at remote (host:port) and prints
// line to the summary unless refusals from its address are being summed
// up. It reports whether it printed, so that the log line matches: a flood
// of refusals logs its first at Warn and the rest at Debug.
func (h *Hub) refusedLine(remote, line string) bool {
	return h.refusals.Refused(worker.RemoteIP(remote), line)
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
				Stopped: len(es.stopped) > 0, OutputBytes: es.outputBytes, MaxStopResumed: es.maxStopResumed}
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
	// MaxStopResumed: the proxy resumed its last stop, nobody having asked
	// about it for Config.MaxStop.
	MaxStopResumed bool
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
	st := Stats{Executors: h.Executors(), Refused: h.refusals.Count()}
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
	hello, ok, err := h.claimHelloLocked(es.remote, proc.PID, token)
	if err != nil {
		return err
	}
	if !ok {
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
	es.logPID.Store(proc.PID)
	h.executors[es.id] = es
	h.readyValid = false
	return nil
}

func (h *Hub) unadmit(es *ExecutorSession) {
	h.mu.Lock()
	delete(h.executors, es.id)
	h.readyValid = false
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
	"preLaunchTask", "postDebugTask", "restart", "sparkdapExecutor", IDETokenArg, ChildKeyArg, "subProcessId", "__sessionId",
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
	h.readyValid = false
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
	es.announceGen++
	gen := es.announceGen
	cfg := map[string]any{}
	for k, v := range h.attachArgs {
		cfg[k] = deepCopy(v)
	}
	for _, k := range []string{"processId", "listen", "preLaunchTask", "postDebugTask", "request", "restart", "__sessionId"} {
		delete(cfg, k)
	}
	// Named after the worker, not its task: the name stays for the
	// session's life, and a reused worker runs many tasks. The threads
	// carry the current task (childThreadNameLocked).
	cfg["name"] = "Executor " + es.workerLabelLocked()
	cfg["connect"] = h.childConnectLocked()
	cfg["sparkdapExecutor"] = es.id
	// Only the root is given this value, and only here: a child attach must
	// bring it back, once, so another local client cannot take the
	// executor by naming its id.
	es.childKey = newChildKey()
	cfg[ChildKeyArg] = es.childKey
	req := newRequest("startDebugging", map[string]any{"request": "attach", "configuration": cfg})
	// The seq is recorded before the request can reach the IDE, so its
	// answer always finds the executor it is about.
	_ = root.w.send(req, func(seq int64) { root.asked[seq] = childAsk{es, gen} })
	// The IDE may refuse (answered in IDESession.handle) or never open the
	// child: either way nobody watches es, and it must not wait for anyone.
	es.childWait = time.AfterFunc(h.cfg.ChildAttachTimeout, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.childMissingLocked(es, gen, fmt.Sprintf("its child session did not attach within %s", h.cfg.ChildAttachTimeout))
	})
}

// childConnectLocked is where a child session must connect: where the
// root did, as its attach configuration says (connect.host/port, or the
// older top-level host/port), since the IDE may reach the proxy through a
// forwarded port (ssh -L, a container's port mapping) that the proxy's
// own listen address is not; the listen address only when the
// configuration names none.
func (h *Hub) childConnectLocked() map[string]any {
	if c, ok := h.attachArgs["connect"].(map[string]any); ok {
		if addr := connectAddr(c["host"], c["port"]); addr != nil {
			return addr
		}
	}
	if addr := connectAddr(h.attachArgs["host"], h.attachArgs["port"]); addr != nil {
		return addr
	}
	host, port := "127.0.0.1", 0
	if ta, ok := h.ideAddr.(*net.TCPAddr); ok {
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
	gen uint64 // es.announceGen when it was sent
}

// childMissingLocked lets es go when the child session announcement gen
// asked for will not come (the IDE refused it or never opened it): it is
// then watched by nobody, so its breakpoints are cleared and it is resumed.
// A newer announcement, or a child that did attach, makes it a no-op.
func (h *Hub) childMissingLocked(es *ExecutorSession, gen uint64, why string) {
	if es.announceGen != gen || !es.announced || !es.ready || h.children[es.id] != nil {
		return
	}
	es.stopChildWaitLocked()
	es.detached = true
	es.logger().Warn().Str("reason", why).
		Msg("the IDE did not open this executor's child session; clearing its breakpoints and resuming it")
	h.releaseLocked(es)
}

// stopChildWaitLocked forgets the child session es's announcement awaits;
// its one-time value no longer opens one.
func (es *ExecutorSession) stopChildWaitLocked() {
	es.announceGen++
	es.childKey = ""
	if es.childWait != nil {
		es.childWait.Stop()
		es.childWait = nil
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
	h.readyValid = false
	if es.announce != nil {
		es.announce.Stop()
	}
	es.stopChildWaitLocked()
	es.stopMaxStopLocked()
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
		// The client answers terminated with disconnect (VS Code does):
		// answered, it closes the connection itself (IDESession.leave).
		_ = child.w.send(newEvent("terminated", nil), nil)
		child.leave()
	}
	if wasReady {
		es.logger().Info().Err(reason).Msg("executor detached")
		h.summary("- executor %d detached [%s]", es.id, label)
	}
}

// readyLocked lists executors that take requests, in id order: a copy the
// caller may keep.
func (h *Hub) readyLocked() []*ExecutorSession {
	return slices.Clone(h.readyViewLocked())
}

// readyViewLocked is readyLocked without the copy, for reading under h.mu
// only: it is sorted once per change to the set, not per request (a merged
// threads answer per stop with 1,000 executors spent a third of the
// proxy's CPU sorting them).
func (h *Hub) readyViewLocked() []*ExecutorSession {
	if h.readyValid {
		return h.readyCache
	}
	out := h.readyCache[:0]
	for _, es := range h.executors {
		if es.ready {
			out = append(out, es)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	h.readyCache, h.readyValid = out, true
	return out
}

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
	h.mu.Lock()
	defer h.mu.Unlock()
	isChild := ide.executor != nil && h.children[ide.executor.id] == ide
	switch {
	case ide != h.root && !isChild:
		return // already let go: the job's debugging was stopped from elsewhere
	case isChild && (how == leaveDropped || how == leaveDetach):
		h.childGoneLocked(ide, false)
		return
	}
	h.stopDebuggingLocked(ide, how == leaveStopAllTerminate)
}

// stopDebuggingLocked ends every IDE session of the job because from (the
// root or a child) stopped: child sessions first (each releases its
// executor), then the root (which releases the rest and forgets the
// breakpoints, so no executor stops again and none is announced). Every
// session but from is told terminated, as an adapter tells a client whose
// debuggee ended; VS Code answers it with its own disconnect, which is
// answered before the connection closes (IDESession.leave).
func (h *Hub) stopDebuggingLocked(from *IDESession, terminateFrom bool) {
	ids := make([]uint64, 0, len(h.children))
	for id := range h.children {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var others []*IDESession
	for _, id := range ids {
		c := h.children[id]
		h.childGoneLocked(c, terminateFrom && c == from)
		if c != from {
			others = append(others, c)
		}
	}
	if root := h.root; root != nil {
		h.rootGoneLocked()
		if root != from {
			others = append(others, root)
		}
	}
	for _, s := range others {
		s.ended = true
		_ = s.w.send(newEvent("terminated", nil), nil)
		// The client answers terminated with disconnect: answered, it
		// closes the connection itself (IDESession.leave).
		s.leave()
	}
	if len(others) > 0 {
		h.summary("debugging stopped from the IDE: %d other session(s) terminated", len(others))
	}
}

// rootGoneLocked lets the root session go: its breakpoints are forgotten
// and every executor no child session shows is released.
func (h *Hub) rootGoneLocked() {
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
		es.stopChildWaitLocked()
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
}

// childGoneLocked lets a child session go: its executor runs on undebugged
// (terminated first if terminate) and is not announced again to this root.
func (h *Hub) childGoneLocked(ide *IDESession, terminate bool) {
	es := ide.executor
	delete(h.children, es.id)
	es.detached = true
	h.releaseLocked(es)
	if terminate {
		// Released first all the same: if the worker outlives the
		// request, it must not wait at a breakpoint for nobody.
		es.request("disconnect", map[string]any{"terminateDebuggee": true}, h.cfg.RequestTimeout, ignoreAnswer(es))
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

// ChildKeyArg is the attach argument of a child session: the one-time value
// the proxy put in the startDebugging configuration that asked for it.
const ChildKeyArg = "sparkdapChildKey"

// newChildKey returns a fresh unguessable one-time value.
func newChildKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}
