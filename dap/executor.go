package dap

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/guard"
	"github.com/sparkdap/sparkdap/pathmap"
)

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
	stacks      map[int64]stackMemo         // local thread id → its stack, asked while it stays stopped (Hub.stackOf)
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
	h.watch.changed()
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
	h.watch.changed()
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
