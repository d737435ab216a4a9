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
	"github.com/sparkdap/sparkdap/internal/guard"
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
	// refused counts workers let go undebugged, for Stats.
	refused atomic.Int64
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
	// terminal (its own lock; it calls summary, which takes summaryMu).
	refusals *worker.RefusalLog

	// mu is the Hub's lock; state is what it guards, reached with lock.
	mu    guard.Mutex
	state guard.Guarded[hubState]
	// admission holds pending hellos and applies the token and session
	// limit (its lock is a leaf: called under mu). Sessions it counts are
	// len(executors).
	admission *worker.Registry

	// frameAlloc, if set before serving, is every connection's
	// FrameReader.onAlloc (tests).
	frameAlloc func(capacity int)
}

// hubState is the Hub's state guarded by its lock: reached through held
// (Hub.lock), which embeds it.
type hubState struct {
	ideAddr    net.Addr                    // where child sessions connect
	executors  map[uint64]*ExecutorSession // admitted: in handshake or ready
	bps        *breakpointRegistry
	root       *IDESession
	children   map[uint64]*IDESession // executor id → its child IDE session
	attachArgs map[string]any         // the root IDE's attach arguments
	focused    *ExecutorSession       // the executor that stopped last
	// readyCache is readyView's answer while readyValid: cleared
	// wherever an executor enters or leaves the ready set.
	readyCache []*ExecutorSession
	readyValid bool
}

// held is the Hub's lock, held: the one way to the state the lock guards
// (the Hub's own, embedded, and each session's: exec, ide) and to the
// operations that need it, which are its methods. Only Hub.lock makes
// one, and unlock voids it: an operation that needs the lock cannot be
// called without it, and a held kept past its unlock panics when used.
type held struct {
	*hubState
	h  *Hub
	lk guard.Held
}

// lock takes the Hub's lock.
func (h *Hub) lock() *held {
	tx := &held{h: h, lk: h.mu.Lock()}
	tx.hubState = guard.Get(&tx.lk, &h.state)
	return tx
}

// unlock releases the lock; tx is void from then on.
func (tx *held) unlock() {
	tx.hubState, tx.h = nil, nil
	tx.lk.Unlock()
}

// exec is es's state guarded by the Hub's lock.
func (tx *held) exec(es *ExecutorSession) *executorState { return guard.Get(&tx.lk, &es.g) }

// ide is s's state guarded by the Hub's lock.
func (tx *held) ide(s *IDESession) *ideState { return guard.Get(&tx.lk, &s.g) }

// NewHub returns a Hub with cfg's settings.
func NewHub(cfg Config) *Hub {
	cfg.setDefaults()
	h := &Hub{cfg: cfg, log: cfg.Log, now: time.Now, ids: newIDTable(),
		admission: worker.NewRegistry(worker.Config{Token: cfg.Token, MaxSessions: cfg.MaxSessions, TTL: cfg.HelloTTL})}
	h.state = guard.New(&h.mu, hubState{executors: map[uint64]*ExecutorSession{},
		bps: newBreakpointRegistry(), children: map[uint64]*IDESession{}})
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

// refusedLine notes a refused worker at remote (host:port) and prints line
// to the summary unless refusals from its address are being summed up. It
// reports whether it printed, so that the log line matches: a flood of
// refusals logs its first at Warn and the rest at Debug.
func (h *Hub) refusedLine(remote, line string) bool {
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	return h.refusals.Refused(ip, line)
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
	tx := h.lock()
	defer tx.unlock()
	out := make([]ExecutorStatus, 0, len(tx.executors))
	for _, es := range tx.executors {
		if tx.exec(es).ready {
			st := ExecutorStatus{ID: es.id, Label: tx.exec(es).label(), Process: tx.exec(es).proc, Task: tx.exec(es).task,
				Stopped: len(tx.exec(es).stopped) > 0, OutputBytes: tx.exec(es).outputBytes, MaxStopResumed: tx.exec(es).maxStopResumed}
			if st.Stopped {
				st.StoppedAt = tx.exec(es).stoppedAt
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
	st := Stats{Executors: h.Executors(), Refused: h.refused.Load()}
	tx := h.lock()
	st.IDEAttached = tx.root != nil
	tx.unlock()
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
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	hello, ok, err := tx.claimHello(es.remote, proc.PID, token)
	if err != nil {
		return err
	}
	if !ok {
		if err := h.admission.CheckToken(token); err != nil {
			return err
		}
		if err := h.admission.AdmitWithoutHello(len(tx.executors)); err != nil {
			return err
		}
	}
	if ok {
		x.task = hello.TaskInfo
		if hello.Roots != nil {
			es.paths.SetRoots(*hello.Roots)
		}
	}
	x.proc = proc
	es.logPID.Store(proc.PID)
	tx.executors[es.id] = es
	tx.readyValid = false
	return nil
}

func (h *Hub) unadmit(es *ExecutorSession) {
	tx := h.lock()
	delete(tx.executors, es.id)
	tx.readyValid = false
	tx.unlock()
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
	tx := h.lock()
	defer tx.unlock()
	args := map[string]any{"justMyCode": true, "redirectOutput": true}
	for k, v := range tx.attachArgs {
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
	if tx.exec(es).task.PostMortem {
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
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	x.ready = true
	tx.readyValid = false
	haveExceptions := false
	for _, e := range tx.bps.global() {
		tx.sendBreakpoints(es, e, nil)
		haveExceptions = haveExceptions || e.command == "setExceptionBreakpoints"
	}
	if x.task.PostMortem && !haveExceptions {
		tx.sendBreakpoints(es, &bpEntry{command: "setExceptionBreakpoints", key: "setExceptionBreakpoints",
			args: map[string]any{"filters": []any{}}}, nil)
	}
	if tx.root != nil && tx.ide(tx.root).childMode && tx.ide(tx.root).configured {
		tx.exec(es).announce = time.AfterFunc(h.cfg.LabelWait, func() { h.announce(es) })
	}
	es.logger().Info().Str("label", x.label()).Str("python", x.proc.Python).Msg("executor attached")
	h.summary("+ executor %d attached [%s]", es.id, x.label())
}

// announce tells a child-session-capable IDE about an executor by asking it
// to start a child session for it.
func (h *Hub) announce(es *ExecutorSession) {
	tx := h.lock()
	defer tx.unlock()
	tx.announce(es)
}

func (tx *held) announce(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	root := tx.root
	// A detached executor's child session was closed since this root
	// attached: the developer let it go, so it is not opened again.
	if x.announced || x.detached || !x.ready || root == nil || !tx.ide(root).childMode || !tx.ide(root).configured || tx.children[es.id] != nil {
		return
	}
	if x.announce != nil {
		x.announce.Stop()
		x.announce = nil
	}
	x.announced = true
	x.announceGen++
	gen := x.announceGen
	cfg := map[string]any{}
	for k, v := range tx.attachArgs {
		cfg[k] = deepCopy(v)
	}
	for _, k := range []string{"processId", "listen", "preLaunchTask", "postDebugTask", "request", "restart", "__sessionId"} {
		delete(cfg, k)
	}
	// Named after the worker, not its task: the name stays for the
	// session's life, and a reused worker runs many tasks. The threads
	// carry the current task (childThreadNameLocked).
	cfg["name"] = "Executor " + x.workerLabel()
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
	tx.exec(es).childWait = time.AfterFunc(h.cfg.ChildAttachTimeout, func() {
		tx := h.lock()
		defer tx.unlock()
		tx.childMissing(es, gen, fmt.Sprintf("its child session did not attach within %s", h.cfg.ChildAttachTimeout))
	})
}

// childConnectLocked is where a child session must connect: where the
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
	gen uint64 // tx.exec(es).announceGen when it was sent
}

// childMissingLocked lets es go when the child session announcement gen
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

// stopChildWaitLocked forgets the child session es's announcement awaits;
// its one-time value no longer opens one.
func (x *executorState) stopChildWait() {
	x.announceGen++
	x.childKey = ""
	if x.childWait != nil {
		x.childWait.Stop()
		x.childWait = nil
	}
}

// executorGone cleans up after an executor's connection ended.
func (h *Hub) executorGone(es *ExecutorSession, reason error) {
	tx := h.lock()
	if _, ok := tx.executors[es.id]; !ok {
		tx.unlock()
		return
	}
	delete(tx.executors, es.id)
	wasReady := tx.exec(es).ready
	tx.exec(es).ready = false
	tx.readyValid = false
	if tx.exec(es).announce != nil {
		tx.exec(es).announce.Stop()
	}
	tx.exec(es).stopChildWait()
	tx.exec(es).stopMaxStop()
	if tx.focused == es {
		tx.focused = nil
	}
	for _, e := range tx.exec(es).overrides {
		tx.bps.drop(e)
	}
	child := tx.children[es.id]
	delete(tx.children, es.id)
	var exits []Message
	if target := tx.eventTarget(es); target != nil && child == nil {
		for tid := range tx.exec(es).threads {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				exits = append(exits, newEvent("thread", map[string]any{"reason": "exited", "threadId": g}))
			}
		}
		for _, ev := range exits {
			_ = target.w.send(ev, nil)
		}
	}
	label := tx.exec(es).label()
	tx.unlock()
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
func (tx *held) ready() []*ExecutorSession {
	return slices.Clone(tx.readyView())
}

// readyViewLocked is readyLocked without the copy, for reading under h.mu
// only: it is sorted once per change to the set, not per request (a merged
// threads answer per stop with 1,000 executors spent a third of the
// proxy's CPU sorting them).
func (tx *held) readyView() []*ExecutorSession {
	if tx.readyValid {
		return tx.readyCache
	}
	out := tx.readyCache[:0]
	for _, es := range tx.executors {
		if tx.exec(es).ready {
			out = append(out, es)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	tx.readyCache, tx.readyValid = out, true
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

// stopDebuggingLocked ends every IDE session of the job because from (the
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

// rootGoneLocked lets the root session go: its breakpoints are forgotten
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

// childGoneLocked lets a child session go: its executor runs on undebugged
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

// resumeLocked lets a stopped executor run on.
func (tx *held) resume(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	if len(x.stopped) == 0 {
		return
	}
	var tid int64
	for t := range x.stopped {
		tid = t
		break
	}
	clear(x.stopped)
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
