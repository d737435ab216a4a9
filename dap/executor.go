package dap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/guard"
	"github.com/sparkdap/sparkdap/pathmap"
)

// errTimeout is what a request gets when its executor does not answer.
var errTimeout = errors.New("no answer in time")

// pendingCall is a request sent to an executor and waiting for its response.
type pendingCall struct {
	cb    func(Message, error)
	timer *time.Timer
}

// ProcessInfo is what pydevdSystemInfo tells about the debuggee.
type ProcessInfo struct {
	PID        int64
	PPID       int64
	Executable string
	Python     string
	Platform   string
}

// ExecutorSession is one pydevd connection: one Python worker process.
//
// Ownership: the goroutine running serve is the connection's only reader;
// w has one writer at a time (a sender's non-blocking write, or w's flusher,
// a goroutine only while there is something left to write), and a send
// never blocks, so anyone may send under any lock. The handshake runs on a
// goroutine of its own beside the reader until it is done. pendMu (a leaf
// lock) guards pending; the Hub's lock guards the session's state, g, which
// the compiler lets only its holder reach (held.exec); id, hub, w, remote
// and paths never change, unadmitted is set before serving, and the rest
// is atomic. Callbacks of request run
// on no lock (on the reader, a timer, or a goroutine of their own when the
// send failed), so they may take the Hub's lock.
type ExecutorSession struct {
	id     uint64
	hub    *Hub
	w      *wire
	remote string
	// log is the session's logger: the Hub's with a hook that adds the
	// session's fields (logHook), not Logger.With, which gives every
	// logger a 500-byte context buffer (per idle session). logPID is the
	// pid those fields name once known (0 until then).
	log    zerolog.Logger
	logPID atomic.Int64

	pendMu  sync.Mutex
	pending map[int64]*pendingCall // nil while empty: most of an idle session's life

	// authorized is set once the peer presented the access token, on the
	// reader goroutine before it reads the next message: until then only
	// answers to the proxy's own handshake requests are accepted.
	authorized atomic.Bool
	// unadmitted gives back its place in the executor port's budget of
	// connections not yet admitted (Hub.take).
	unadmitted func()
	// progressed tells that budget the peer sent a whole first message (a
	// hello line, pydevd's first answer). Set before serving; called on
	// the reader.
	progressed func()

	// paceOn is the wire of the IDE session its latest output event was
	// relayed to, set by event (under the Hub's lock) and taken by pace
	// once the lock is released. Owned by the reader goroutine: only
	// handle, on that goroutine, sets and reads it.
	paceOn *wire

	// g is its state guarded by the Hub's lock (held.exec).
	g guard.Guarded[executorState]
	// paths translates its paths (its roots and path translations; its own
	// leaf lock).
	paths *pathmap.Cache
}

// executorState is an ExecutorSession's state guarded by the Hub's lock,
// reached with held.exec.
type executorState struct {
	es          *ExecutorSession // whose state it is; never changes
	proc        ProcessInfo
	task        TaskInfo                    // cleaned where it comes in: the hello (admission) and taskEvent
	sent        map[string]*sentBreakpoints // breakpoint key → where it was sent, so clearing reaches it all
	refusals    map[string]*bpAnswers       // breakpoint key → what pydevd answered to its latest request
	ready       bool                        // handshake done: gets fan-outs and routed requests
	detached    bool                        // its child IDE session ended: no more breakpoints
	threads     map[int64]string            // local thread id → name ("" until a threads answer names it)
	stopped     map[int64]Message           // local thread id → its last stopped event, as pydevd sent it
	bpIDs       map[int64]int64             // pydevd breakpoint id → global breakpoint id
	overrides   map[string]*bpEntry         // breakpoints its child session set for it alone
	midLine     bool                        // output so far did not end a line (merged-mode prefixes)
	stoppedAt   string                      // where it stopped, for the status view
	outputBytes int64                       // output text relayed, for the status view
	announced   bool                        // the IDE has been told (startDebugging sent) since its last stop
	announceGen uint64                      // counts startDebugging requests sent for it (and their cancellations)
	childWait   *time.Timer                 // lets it go if its child session does not attach in time
	childKey    string                      // the one-time value its awaited child session must attach with; "" for none
	// Its Config.MaxStop clock (held.armMaxStop):
	stopSince time.Time   // when it last stopped
	lastAsked time.Time   // when an IDE last asked something about it
	maxStop   *time.Timer // checks the clock; nil when not running
	// maxStopResumed: its last stop was ended by the clock (the live view
	// says so until it stops again).
	maxStopResumed bool
	leaseTimer     *time.Timer // renews its stops' lease while it has a stopped thread (held.renewLease)

	// Its output while no IDE session shows it yet (held.holdOutput):
	held          *heldOutput // waiting for its IDE session; nil for none
	unshownLogged bool        // said that its events reach no IDE session

	// Its threads as the merged view shows them (executorState.learnThread):
	threadOrder []int64 // the keys of threads, in pydevd's order (new ones last)
	// threadsKnown: threads is the whole list pydevd would answer now,
	// so a merged threads request needs no round trip to it.
	threadsKnown   bool
	threadsGen     uint64   // counts changes to threads, its names or its label
	threadsJSON    []byte   // its entries of a merged threads answer, encoded; nil when to be rebuilt
	threadsAsking  bool     // a threads request to it is in flight
	threadsCapped  bool     // it named more threads than maxThreadsPerExecutor (logged once)
	threadsWaiters []func() // merged threads requests waiting for that answer
	// between, when set, is what the worker does between debugged tasks,
	// as its watch connection reports it (Hub.workerChanged): "idle · last
	// <task>" or "<task> · not debugged". It replaces the task in the label.
	between string
	// heldExceptions are its stops at exceptions held back from the IDE
	// (exceptions.go), by pydevd's thread id.
	heldExceptions map[int64]*heldException
	// ownThreads are the wrapper's own threads (ownThreadPrefix) its
	// threads answers named: never listed, their events dropped.
	ownThreads map[int64]bool
}

func newExecutorSession(h *Hub, id uint64, served, conn net.Conn) *ExecutorSession {
	es := &ExecutorSession{
		id: id, hub: h, w: newWire(served, conn, true), remote: conn.RemoteAddr().String(),
		// Its maps are made on first use: an idle session needs few.
		paths: pathmap.NewCache(h.cfg.Paths, pathmap.Roots{}),
	}
	es.g = guard.New(&h.mu, executorState{es: es})
	es.log = h.log.Hook(logHook{es})
	return es
}

func (es *ExecutorSession) logger() *zerolog.Logger { return &es.log }

// logHook adds an executor session's fields to each line it logs. It runs
// only for lines that are written, on the logging goroutine, and reads
// only fields that never change or are atomic.
type logHook struct{ es *ExecutorSession }

func (h logHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Uint64("executor", h.es.id).Str("remote", h.es.remote)
	if pid := h.es.logPID.Load(); pid != 0 {
		e.Int64("pid", pid)
	}
}

// ID is the proxy's number for this session.
func (es *ExecutorSession) ID() uint64 { return es.id }

// label names the session for people (admission.Label): executor, host
// (the connection's address until the wrapper says), pid and Spark task
// where known.
func (x *executorState) label() string { return admission.Label(x.labelInfo()) }

// workerLabel names the worker process alone (label without the
// task): the end of a child session's name (sessionName).
func (x *executorState) workerLabel() string {
	t := x.labelInfo()
	t.Label = ""
	return admission.Label(t)
}

// sessionName is what a child session is called: the task the worker
// runs, then the worker ("Executor" and the worker alone before the
// wrapper says its task).
func (x *executorState) sessionName() string {
	if x.task.Label == "" {
		return "Executor " + x.workerLabel()
	}
	return x.task.Label + " · " + x.workerLabel()
}

func (x *executorState) labelInfo() TaskInfo {
	es := x.es
	t := x.task
	if t.Host == "" {
		t.Host, _, _ = net.SplitHostPort(es.remote)
	}
	t.PID = x.proc.PID
	if x.between != "" {
		t.Label = x.between
	}
	return t
}

// childThreadName is what a child session calls one of its worker's
// threads: pydevd's name after the task the worker runs now, as merged
// mode's labels do (the session's own name says which worker it is).
func (x *executorState) childThreadName(name string) string {
	if x.task.Label == "" {
		return name
	}
	return "[" + x.task.Label + "] " + name
}

// request sends a request to pydevd; cb gets its response, or an error if
// the connection ends or the timeout passes first. cb runs on no lock.
func (es *ExecutorSession) request(command string, args any, timeout time.Duration, cb func(Message, error)) {
	pc := &pendingCall{cb: cb}
	var seq int64
	err := es.w.send(newRequest(command, args), func(s int64) {
		seq = s
		es.pendMu.Lock()
		if es.pending == nil {
			es.pending = map[int64]*pendingCall{}
		}
		es.pending[s] = pc
		// Its timer is in place before the request can reach pydevd:
		// the send may write it at once, and whoever takes pc (the
		// answer, the connection's end) stops the timer.
		pc.timer = time.AfterFunc(timeout, func() {
			if p := es.takePending(s); p != nil {
				p.cb(nil, fmt.Errorf("%s: %w (%s)", command, errTimeout, timeout))
			}
		})
		es.pendMu.Unlock()
	})
	if err != nil {
		// cb runs once: if pc was registered and something else took it
		// already (the connection's end fails every pending call), that
		// was its call.
		if seq == 0 || es.takePending(seq) != nil {
			// Not on this goroutine: callers may hold the Hub's lock,
			// and cb may take it.
			es.hub.goCallback(func() { cb(nil, err) })
		}
	}
}

func (es *ExecutorSession) takePending(seq int64) *pendingCall {
	es.pendMu.Lock()
	defer es.pendMu.Unlock()
	pc := es.pending[seq]
	delete(es.pending, seq)
	if len(es.pending) == 0 {
		// A map keeps its size once grown; the handshake's requests
		// would otherwise stay with every idle session.
		es.pending = nil
	}
	if pc != nil && pc.timer != nil {
		pc.timer.Stop()
	}
	return pc
}

// call is request made synchronous, for the handshake. A failed response is
// an error.
func (es *ExecutorSession) call(ctx context.Context, command string, args any) (Message, error) {
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	es.request(command, args, es.hub.cfg.HandshakeTimeout, func(m Message, err error) { ch <- result{m, err} })
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		if !r.m.Success() {
			return r.m, fmt.Errorf("%s: %s", command, r.m.ErrorMessage())
		}
		return r.m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

// serve runs the session: handshake, then relaying until the connection
// ends. The serving goroutine is the connection's reader; the handshake
// runs beside it until done, so an idle session costs one goroutine.
//
// serve itself only calls three functions: what an idle session costs is
// mostly the reader's stack, and the runtime halves a stack at GC only
// while the goroutine uses under a quarter of it, so the frames under the
// parked read are kept small (4 KiB instead of 8 KiB per idle session in
// bench).
func (es *ExecutorSession) serve(ctx context.Context) {
	hs := es.begin(ctx)
	es.end(hs, es.read(hs))
}

// handshakeRun is a handshake running beside the reader.
type handshakeRun struct {
	stop   func() bool // unregisters the close on ctx's end
	cancel context.CancelFunc
	done   chan error
	// watching is set, before cancel, once the connection turned out to
	// be a worker's watch connection (package selection): the handshake
	// it cancels is no failure that ends the connection.
	watching atomic.Bool
}

//go:noinline
func (es *ExecutorSession) begin(ctx context.Context) *handshakeRun {
	hs := &handshakeRun{done: make(chan error, 1)}
	hs.stop = context.AfterFunc(ctx, func() { es.w.close(ctx.Err()) })
	var hsCtx context.Context
	hsCtx, hs.cancel = context.WithTimeout(ctx, es.hub.cfg.HandshakeTimeout)
	go func() {
		err := es.handshake(hsCtx)
		// Its deadline's timer goes now, not when the connection ends: an
		// idle session keeps no timer.
		hs.cancel()
		if err != nil && !hs.watching.Load() {
			es.w.closeAfterFlush(err) // ends the reader
		}
		hs.done <- err
	}()
	return hs
}

// read is the session's reading until the connection ends.
//
//go:noinline
func (es *ExecutorSession) read(hs *handshakeRun) error {
	fr, hello := es.newReader()
	if hello {
		return es.serveHello(fr.Reader(), hs)
	}
	return es.w.readFrames(fr, decodeExecutorMessage, es.w.firstTells(fr, es.progressed, es.handle))
}

// decodeExecutorMessage decodes a message from pydevd. Its output
// events, most of what a printing worker sends, keep their text as it
// came (dapwire.DecodeOutputEvent): it is relayed, labelled, without being
// decoded and encoded again.
func decodeExecutorMessage(body []byte) (Message, error) {
	if m, ok := dapwire.DecodeOutputEvent(body); ok {
		return m, nil
	}
	return dapwire.DecodeMessage(body)
}

// newReader is the connection's reader, and whether it starts with a
// hello rather than pydevd's messages.
//
//go:noinline
func (es *ExecutorSession) newReader() (*dapwire.FrameReader, bool) {
	// Header lines are short and bodies are read straight into their own
	// buffer, so a small read buffer does; it is per idle connection.
	br := bufio.NewReaderSize(es.w.conn, 256)
	fr := dapwire.NewFrameReader(br, es.hub.cfg.MaxMessageBytes)
	fr.LimitUntil(&es.authorized, maxUnauthorizedMessageBytes)
	fr.OnAlloc(es.hub.frameAlloc)
	return fr, admission.IsHello(br)
}

// end finishes the session once its connection stopped reading.
//
//go:noinline
func (es *ExecutorSession) end(hs *handshakeRun, readErr error) {
	defer es.w.waitClosed()
	// Whatever ids its messages made the proxy allocate go with it, on
	// every way out (a failed handshake too).
	defer es.hub.ids.Forget(es.id)
	defer hs.stop()
	hs.cancel() // a handshake still running ends with the connection
	if err := <-hs.done; err != nil {
		var refused *errRefused
		if !errors.As(err, &refused) && !errors.Is(readErr, errHelloDone) {
			if readErr != nil && !errors.Is(readErr, errClosed) && !errors.Is(readErr, err) {
				err = fmt.Errorf("%w (connection: %v)", err, readErr)
			}
			// A peer without the token fails here by the thousand (idle
			// until its handshake times out): one line per interval.
			level := es.logger().Warn()
			if !es.authorized.Load() && !es.hub.refusalLogged("executor handshake failed before the access token") {
				level = es.logger().Debug()
			}
			level.Err(err).Msg("executor handshake failed")
		}
		es.failPending(err)
		return
	}
	es.w.close(readErr)
	if isBadInput(readErr) {
		es.logger().Warn().Err(readErr).Msg("closing executor connection: it broke the protocol")
	}
	es.failPending(fmt.Errorf("executor %d went away: %w", es.id, readErr))
	es.gone(readErr)
}

func (es *ExecutorSession) failPending(err error) {
	es.pendMu.Lock()
	calls := es.pending
	es.pending = nil
	es.pendMu.Unlock()
	for _, pc := range calls {
		if pc.timer != nil {
			pc.timer.Stop()
		}
		pc.cb(nil, err)
	}
}

// errRefused marks a handshake the proxy ended on purpose.
type errRefused struct{ reason string }

func (e *errRefused) Error() string { return "refused: " + e.reason }

// handshake does what debugpy's adapter does for a new pydevd connection,
// without waiting for any IDE, so the worker is never held up.
func (es *ExecutorSession) handshake(ctx context.Context) error {
	h := es.hub
	token, why, err := es.authorize(ctx)
	if err != nil {
		return fmt.Errorf("executor %s: authorize: %w", es.remote, err)
	}
	if why != "" {
		return es.refuse(ctx, why)
	}

	info, err := es.call(ctx, "pydevdSystemInfo", nil)
	if err != nil {
		return fmt.Errorf("executor %s: system info: %w", es.remote, err)
	}
	proc := parseSystemInfo(info.Body())

	if err := es.admit(proc, token); err != nil {
		return es.refuse(ctx, err.Error())
	}

	if _, err := es.call(ctx, "initialize", executorInitializeArgs()); err != nil {
		es.unadmit()
		return fmt.Errorf("executor %d: initialize: %w", es.id, err)
	}
	if _, err := es.call(ctx, "attach", es.attachArgs()); err != nil {
		es.unadmit()
		return fmt.Errorf("executor %d: attach: %w", es.id, err)
	}
	es.putInService()
	es.request("configurationDone", nil, h.cfg.HandshakeTimeout, func(m Message, err error) {
		if err == nil && !m.Success() {
			err = errors.New(m.ErrorMessage())
		}
		if err != nil {
			es.logger().Warn().Err(err).Msg("configurationDone failed")
		}
	})
	return nil
}

// authorize asks pydevd for the access token its worker was given. The
// verdict is taken on the reader goroutine, as the answer is read, so that
// the message after it is already judged by it: a token that could be
// valid (the real one, from a plain debugpy.connect, or the one-time token
// of a hello pending from this address) lets the handshake go on; admit
// then checks it exactly, against the hello of this process. It returns the
// token, and why the peer is refused, or "".
func (es *ExecutorSession) authorize(ctx context.Context) (token, why string, err error) {
	type verdict struct {
		token, why string
		err        error
	}
	ch := make(chan verdict, 1)
	es.request("pydevdAuthorize", map[string]any{"debugServerAccessToken": nil}, es.hub.cfg.HandshakeTimeout,
		func(m Message, err error) {
			switch {
			case err != nil:
				ch <- verdict{err: err}
				return
			case !m.Success():
				ch <- verdict{err: errors.New(truncate(m.ErrorMessage(), 200))}
				return
			}
			token, _ := m.Body()["clientAccessToken"].(string)
			if err := es.hub.admission.PlausibleToken(admission.RemoteIP(es.remote), token); err != nil {
				ch <- verdict{why: err.Error()}
				return
			}
			es.authorized.Store(true)
			if es.unadmitted != nil {
				es.unadmitted()
			}
			ch <- verdict{token: token}
		})
	select {
	case v := <-ch:
		return v.token, v.why, v.err
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
}

// errUnauthorized ends a connection that sent more than answers to the
// handshake before presenting the access token.
var errUnauthorized = errors.New("message before presenting the access token")

// refuse ends a connection the proxy will not debug. pydevd holds the worker
// in debugpy.connect until configurationDone, and a bare close would leave it
// hanging forever; configurationDone then close lets it run on undebugged.
func (es *ExecutorSession) refuse(ctx context.Context, why string) error {
	level := es.logger().Debug()
	if es.hub.refusedLine(es.remote, fmt.Sprintf("executor from %s refused: %s; it runs undebugged", es.remote, why)) {
		level = es.logger().Warn()
	}
	level.Str("reason", why).Msg("executor refused; its worker continues undebugged")
	_, _ = es.call(ctx, "configurationDone", nil)
	return &errRefused{why}
}

func parseSystemInfo(b map[string]any) ProcessInfo {
	var p ProcessInfo
	if proc, ok := b["process"].(map[string]any); ok {
		p.PID, _ = toInt(proc["pid"])
		p.PPID, _ = toInt(proc["ppid"])
		p.Executable, _ = proc["executable"].(string)
	}
	if py, ok := b["python"].(map[string]any); ok {
		if v, ok := py["version"].(string); ok {
			p.Python = v
		}
	}
	if pl, ok := b["platform"].(map[string]any); ok {
		p.Platform, _ = pl["name"].(string)
	}
	// Shown to people (logs, status): cleaned where it enters the proxy.
	p.Executable = admission.Clean(p.Executable, admission.MaxPathRunes)
	p.Python = admission.Clean(p.Python, admission.MaxTextRunes)
	p.Platform = admission.Clean(p.Platform, admission.MaxTextRunes)
	return p
}

// Its life in the Hub: admitted with its token, put into service once its
// handshake is done, told its task by the wrapper, and gone with its
// connection.

// admit takes a handshaking executor into the Hub, with what its hello
// said, if its access token (pydevd's clientAccessToken) holds. A worker
// that said hello presents the one-time token derived in it (the claim
// makes it single-use) and already holds a slot under the session limit;
// one that did not (a plain debugpy.connect) presents the token itself and
// needs a free slot. The refusal is admission.ErrNoToken, ErrWrongToken or a
// *admission.SessionLimitError.
func (es *ExecutorSession) admit(proc ProcessInfo, token string) error {
	h := es.hub
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

func (es *ExecutorSession) unadmit() {
	h := es.hub
	tx := h.lock()
	delete(tx.executors, es.id)
	tx.readyValid = false
	tx.unlock()
}

func executorInitializeArgs() map[string]any {
	return map[string]any{
		"clientID": "sparkdap", "clientName": "sparkdap", "adapterID": "debugpy",
		"pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
		"supportsVariableType": true, "supportsVariablePaging": true,
		"supportsRunInTerminalRequest": false, "supportsStartDebuggingRequest": false,
	}
}

// attachArgs passes the IDE's debugger settings (justMyCode, rules,
// showReturnValue, …) on to pydevd, with defaults for when no IDE is there.
func (es *ExecutorSession) attachArgs() map[string]any {
	h := es.hub
	tx := h.lock()
	defer tx.unlock()
	args := map[string]any{"justMyCode": true, "redirectOutput": true}
	for k, v := range tx.rootAttachArgs(proxyOnlyKeys) {
		args[k] = v
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

// putInService puts a handshaken executor into service: it replays the
// registry's breakpoints and from then on gets every fan-out. Both happen
// under the Hub's lock, so no breakpoint change can fall between them.
func (es *ExecutorSession) putInService() {
	h := es.hub
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
	es.logger().Info().Str("label", x.label()).Str("python", x.proc.Python).Msg("executor attached")
	h.summary("+ executor %d attached [%s]", es.id, x.label())
}

// taskEvent takes the wrapper's report of which Spark task this worker runs.
func (es *ExecutorSession) taskEvent(m Message) {
	h := es.hub
	var ti TaskInfo
	if err := fromMap(m.Body(), &ti); err != nil {
		es.logger().Warn().Err(err).Msg("ignoring malformed sparkdapTask event")
		return
	}
	ti = ti.Clean() // the cluster's words, shown to people
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	if ti.Roots == nil {
		ti.Roots = x.task.Roots
	}
	newTask := ti.Label != x.task.Label || x.between != ""
	x.task = ti
	x.between = ""
	x.threadsChanged() // its label names its threads
	if newTask && x.ready {
		tx.retitleThreads(es)
	}
	if ti.Roots != nil && es.paths.SetRoots(*ti.Roots) {
		if !x.ready {
			// putInService sends them all, to the new roots.
			return
		}
		// New roots, new candidate paths: send again what this executor
		// is meant to have (none once its child session has left).
		if !x.detached {
			for _, e := range tx.bps.global() {
				if x.overrides[e.key] == nil {
					tx.sendBreakpoints(es, e, nil)
				}
			}
		}
		for _, e := range x.overrides {
			tx.sendBreakpoints(es, e, nil)
		}
	}
	es.logger().Info().Str("label", x.label()).Msg("executor task")
	if newTask {
		tx.unlist(es)
	}
}

// gone cleans up after an executor's connection ended.
func (es *ExecutorSession) gone(reason error) {
	h := es.hub
	tx := h.lock()
	if _, ok := tx.executors[es.id]; !ok {
		tx.unlock()
		return
	}
	delete(tx.executors, es.id)
	x := tx.exec(es)
	wasReady := x.ready
	x.ready = false
	tx.readyValid = false
	x.stopChildWait()
	x.stopMaxStop()
	if tx.focused == es {
		tx.focused = nil
	}
	for _, e := range x.overrides {
		tx.bps.drop(e)
	}
	child := tx.children[es.id]
	delete(tx.children, es.id)
	var exits []Message
	if target := tx.eventTarget(es); target != nil && child == nil {
		for tid := range x.threads {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				exits = append(exits, newEvent("thread", map[string]any{"reason": "exited", "threadId": g}))
			}
		}
		for _, ev := range exits {
			_ = target.w.send(ev, nil)
		}
	}
	label := x.label()
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

// handle dispatches one message from pydevd.
func (es *ExecutorSession) handle(m Message) {
	if !es.authorized.Load() {
		// Nothing a peer says is believed before it presents the token:
		// only answers to the proxy's requests are read, and anything else
		// ends the connection.
		if m.Type() != "response" {
			es.w.close(fmt.Errorf("%w: %s", errUnauthorized, truncate(describe(m), 64)))
			return
		}
		if pc := es.takePending(m.RequestSeq()); pc != nil {
			pc.cb(m, nil)
		} else {
			es.w.close(fmt.Errorf("%w: response to no request", errUnauthorized))
		}
		return
	}
	switch m.Type() {
	case "response":
		if pc := es.takePending(m.RequestSeq()); pc != nil {
			pc.cb(m, nil)
		} else {
			es.logger().Debug().Int64("request_seq", m.RequestSeq()).Str("command", m.Command()).
				Msg("dropping response to no pending request (answered after its timeout?)")
		}
	case "event":
		es.event(m)
		es.pace() // after event: the Hub's lock is released
	case "request":
		es.logger().Warn().Str("command", m.Command()).Msg("debuggee sent a request; sparkdap serves none")
		_ = es.w.send(newErrorResponse(m, "sparkdap does not serve %q requests from debuggees", m.Command()), nil)
	}
}

// Output pacing: a worker that prints a lot sends output events as fast
// as pydevd writes them, and the IDE's wire never blocks, so without a
// brake the proxy would hold whatever the IDE has not read yet, and cut
// the IDE off at the wire's byte cap (wirequeue.DefaultMaxQueued): the
// user would lose the session and the output. So the executor's reader
// stops reading while the IDE session its output goes to is far behind.
// That is TCP backpressure to pydevd, whose writer blocks, and so to the
// wrapper's output batcher, which makes print() wait, bounded, and fails
// open; the executor's other messages wait with its output, in order.
const (
	// paceHigh: more than this queued for the IDE and the executor's
	// reader waits ...
	paceHigh = 8 << 20
	// paceLow: ... until no more than this is.
	paceLow = 4 << 20
	// paceStall: an IDE that has read nothing for this long is not waited
	// for (wirequeue.Queue.WaitBelow): its byte cap cuts it off as before,
	// and no executor is held by it.
	paceStall = 10 * time.Second
)

// pace waits, if the output event just handled was relayed to an IDE
// session that is far behind, until that session has read enough (see
// paceHigh). On the reader goroutine only, never under the Hub's lock.
// It is the one place handle waits for another connection (see Hub's
// locking rules): under no lock, ended by the executor's own close, and
// bounded by paceStall; the IDE's reader never waits for an executor's,
// so the two cannot wait for each other.
func (es *ExecutorSession) pace() {
	w := es.paceOn
	if w == nil {
		return
	}
	es.paceOn = nil
	if w.q.Queued() <= paceHigh {
		return
	}
	start := time.Now()
	w.q.WaitBelow(paceLow, paceStall, es.w.q.Done())
	if d := time.Since(start); d > time.Second {
		es.logger().Debug().Dur("waited", d).Int("queued", w.q.Queued()).
			Msg("paused reading the executor's output: the IDE reads slowly")
	}
}

// Letting it go: when no IDE session watches it any more, every
// breakpoint sent to it is cleared and it is resumed, so it never waits
// for a human who is not there.

// watched reports whether some IDE session shows es, now or once
// its child session is up: its own child session, or a root session it has
// not been detached from (merged, or announcing executors as children).
func (tx *held) watched(es *ExecutorSession) bool {
	if tx.children[es.id] != nil {
		return true
	}
	return tx.root != nil && !tx.exec(es).detached
}

// release lets an executor that no IDE session shows run on
// undebugged: nothing left to stop it, and resumed if it is stopped.
func (tx *held) release(es *ExecutorSession) {
	x := tx.exec(es)
	for key, e := range x.overrides {
		tx.bps.drop(e)
		delete(x.overrides, key)
	}
	tx.clearSent(es, nil)
	tx.resume(es)
	x.dropHeldOutput()
}

// unwatchedStop handles a stop nobody can see, whatever let it
// happen: a worker must never wait for a human who is not there.
func (tx *held) unwatchedStop(es *ExecutorSession, tid int64) {
	h := tx.h
	es.logger().Warn().Int64("thread", tid).
		Msg("executor stopped with no IDE session to show it; clearing its breakpoints and resuming it")
	tx.release(es)
	es.request("continue", map[string]any{"threadId": tid}, h.cfg.RequestTimeout, ignoreAnswer(es))
}

// resume lets a stopped executor run on.
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

// Config.MaxStop resumes a worker left stopped too long: a developer who hit a
// breakpoint and went home must not hold the task (and with Spark's
// barrier or --wait, the stage) overnight. Config.MaxStop is the limit;
// the clock restarts with each stop and with each IDE request about the
// worker (noteAsked).

// armMaxStop starts es's clock at a new stop, and its timer unless
// one runs (a running timer re-reads the deadline when it fires).
func (tx *held) armMaxStop(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	if h.cfg.MaxStop <= 0 {
		return
	}
	x.stopSince = h.now()
	x.maxStopResumed = false
	if x.maxStop == nil {
		x.maxStop = time.AfterFunc(h.cfg.MaxStop, func() { es.checkMaxStop() })
	}
}

// noteAsked restarts es's clock: an IDE asked something about it
// (a request routed to it, a capture of its frame), so someone is there.
func (tx *held) noteAsked(es *ExecutorSession) {
	h := tx.h
	if h.cfg.MaxStop > 0 {
		tx.exec(es).lastAsked = h.now()
	}
}

// stopMaxStop stops es's timer (its connection ended).
func (x *executorState) stopMaxStop() {
	if x.maxStop != nil {
		x.maxStop.Stop()
		x.maxStop = nil
	}
}

// checkMaxStop runs on es's timer: it resumes es if it has been stopped
// for MaxStop with no IDE request about it since, and otherwise waits for
// the new deadline. A worker no longer stopped lets the timer lapse.
func (es *ExecutorSession) checkMaxStop() {
	h := es.hub
	tx := h.lock()
	defer tx.unlock()
	x := tx.exec(es)
	x.maxStop = nil
	if tx.executors[es.id] != es || !x.ready || len(x.stopped) == 0 {
		return
	}
	since := x.stopSince
	if x.lastAsked.After(since) {
		since = x.lastAsked
	}
	if left := h.cfg.MaxStop - h.now().Sub(since); left > 0 {
		x.maxStop = time.AfterFunc(left, func() { es.checkMaxStop() })
		return
	}
	tx.maxStopExpired(es)
}

// maxStopExpired resumes es and says so: to the IDE session that
// shows it (a console line, then the stopped threads' continued, as an
// adapter tells a client of a resume it did not ask for), in the log and
// on serve's terminal.
func (tx *held) maxStopExpired(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	tids := make([]int64, 0, len(x.stopped))
	for tid := range x.stopped {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(i, j int) bool { return tids[i] < tids[j] })
	stoppedFor := h.now().Sub(x.stopSince).Round(time.Second)
	label := x.label()
	tx.resume(es)
	x.stoppedAt = ""
	x.maxStopResumed = true
	why := fmt.Sprintf("executor %d [%s] resumed: stopped %s with no request from the IDE about it (serve --max-stop %s)",
		es.id, label, stoppedFor, h.cfg.MaxStop)
	if target := tx.eventTarget(es); target != nil && tx.ide(target).configured {
		_ = target.w.send(newEvent("output", map[string]any{"category": "console", "output": "sparkdap: " + why + "\n"}), nil)
		// A child session shows this process alone: all its threads run.
		all := target != tx.root
		for _, tid := range tids {
			if g, err := h.ids.Global(kindThread, es.id, tid); err == nil {
				_ = target.w.send(newEvent("continued", map[string]any{"threadId": g, "allThreadsContinued": all}), nil)
			}
		}
	}
	h.ids.Release(es.id, kindFrame, kindVariables)
	es.logger().Warn().Dur("stopped", stoppedFor).Dur("max_stop", h.cfg.MaxStop).
		Msg("executor stopped too long with no request from the IDE; resumed it")
	h.summary("%s", why)
}

// unlist ends the child session of a worker that has moved on to another
// task while running: the IDE lists the workers that stopped, for as long
// as they run the task they stopped in, not every worker that was ever
// debugged (a job's hundreds). The worker stays debugged: the root's
// breakpoints go back to it in place of those its child session set for
// it alone, and its next stop announces it again, named after that task.
// The child is told terminated, as when an adapter's debuggee ends; the
// disconnect the client answers with is then that of a session no longer
// the executor's, which ends nothing else (Hub.ideGone).
func (tx *held) unlist(es *ExecutorSession) {
	x := tx.exec(es)
	child := tx.children[es.id]
	if child == nil || len(x.stopped) > 0 {
		return
	}
	delete(tx.children, es.id)
	x.announced = false
	x.stopChildWait()
	if len(x.overrides) > 0 {
		own := x.overrides
		x.overrides = nil
		for _, e := range own {
			tx.bps.drop(e)
		}
		// The root's set of a file takes the place of the child's in one
		// request: pydevd's setBreakpoints replaces a file's set, and a
		// clear sent first would leave an instant in which the worker,
		// running its new task, passes the file's lines unwatched. Only
		// what the root has no set for, and paths only the child's set
		// went to, are cleared.
		replaced := map[string]*sentBreakpoints{}
		var roots []*bpEntry
		if !x.detached {
			for _, e := range tx.bps.global() {
				if own[e.key] != nil {
					roots = append(roots, e)
					replaced[e.key] = x.sent[e.key]
					delete(x.sent, e.key)
				}
			}
		}
		tx.clearSent(es, func(key string) bool { return own[key] == nil })
		for _, e := range roots {
			tx.sendBreakpoints(es, e, nil)
			if old := replaced[e.key]; old != nil {
				now := x.sent[e.key]
				tx.clearAt(es, old, func(path string) bool {
					if now == nil {
						return false
					}
					_, sent := now.sources[path]
					return sent
				})
			}
		}
	}
	tx.ide(child).ended = true
	_ = child.w.send(newEvent("terminated", nil), nil)
	child.leave()
	es.logger().Info().Str("label", x.label()).Msg("worker moved on to another task: its child session ended until it stops again")
}
