package dap

import (
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

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/connbudget"
	"github.com/sparkdap/sparkdap/internal/guard"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/selection"
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
	// MaxUnadmitted bounds the executor port's connections that have not
	// yet presented the access token: past it, the oldest that proved
	// nothing makes room (see package connbudget). MaxUnadmittedPerSource,
	// if set, bounds those of them from one source address, and refuses
	// more: off by default, as workers share addresses. Defaults
	// connbudget.DefaultTotal and no per-source bound.
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
	// ExceptionHold is how long a worker stopped at an exception waits
	// when the user already has a stop of the same type at the same place:
	// the first stop of each group is shown, the others of it wait this
	// long, then run on as they would without a debugger (Spark sees the
	// exception). Zero or negative: selection.DefaultExceptionHold.
	ExceptionHold time.Duration
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
	if c.ExceptionHold <= 0 {
		c.ExceptionHold = selection.DefaultExceptionHold
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
	if c.MaxUnadmitted <= 0 {
		c.MaxUnadmitted = connbudget.DefaultTotal
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
// Locking. The Hub has one lock, and the compiler checks who holds it.
// h.lock() takes it and returns a *held, the only way to what it guards:
// the Hub's own state (hubState, embedded in held), each executor's
// (executorState, tx.exec(es)) and each IDE session's (ideState,
// tx.ide(s)); the operations that need the lock are methods of held or
// of those states. tx.unlock() releases it and voids tx: a held or a
// state kept past it is a bug, and a held used after it panics. What is
// not in those states is immutable, atomic, or guarded by a lock of its
// own, as its type says. The rules that keep the proxy deadlock-free:
//
//   - Each connection has one reader goroutine (ExecutorSession.serve,
//     IDESession.serve) that calls handle for each message in order;
//     handle may take the Hub's lock but never waits for another
//     connection, but for one bounded wait under no lock: after relaying
//     an output event, an executor's reader waits for an IDE session far
//     behind to read (ExecutorSession.pace). No IDE reader ever waits for
//     an executor, so no two readers wait for each other.
//   - Sends never block and never call back: wire.send only queues, under
//     wire.mu, which is taken after the Hub's lock and never before it. So
//     sending while holding the Hub's lock is allowed.
//   - A callback given to ExecutorSession.request (a response, a timeout,
//     a failed send, a closed connection) never runs on the goroutine that
//     called request: it runs on the connection's reader, a timer's
//     goroutine, or a goroutine of its own. Callbacks may therefore take
//     the Hub's lock (their own held: never one captured from the caller),
//     and callers may hold it while they call request.
//   - Nothing is called under the Hub's lock that waits for a peer, a
//     timer or another goroutine that may need it.
//   - idTable and ExecutorSession.pendMu have their own locks, always
//     innermost: nothing takes the Hub's lock while holding them.
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
	refusals *admission.RefusalLog

	// mu is the Hub's lock; state is what it guards, reached with lock.
	mu    guard.Mutex
	state guard.Guarded[hubState]
	// admission holds pending hellos and applies the token and session
	// limit (its lock is a leaf: called under mu). Sessions it counts are
	// len(executors).
	admission *admission.Registry
	// board is the live selection and the workers watching it (its lock
	// is a leaf; it calls workerChanged under no lock).
	board *selection.Board

	// watch is the root session's subscription to sparkdapWorkers events
	// (viewwatch.go; its own leaf lock).
	watch workersWatch
	// controlSlots holds a place per sparkdap request being answered
	// (view.go); made once by NewHub.
	controlSlots chan struct{}

	// frameAlloc, if set before serving, is every connection's
	// FrameReader.OnAlloc (tests).
	frameAlloc func(capacity int)
}

// hubState is the Hub's state guarded by its lock: reached through held
// (Hub.lock), which embeds it.
type hubState struct {
	ideAddr    net.Addr                    // where child sessions connect
	executors  map[uint64]*ExecutorSession // admitted: in handshake or ready
	bps        *breakpointRegistry
	root       *IDESession
	children   map[uint64]*IDESession // executor id → its child IDE session (listed workers only)
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
		admission: admission.NewRegistry(admission.Config{Token: cfg.Token, MaxSessions: cfg.MaxSessions, TTL: cfg.HelloTTL}),
		board:     selection.NewBoard(0), controlSlots: make(chan struct{}, maxControlInFlight)}
	h.watch.h = h
	h.state = guard.New(&h.mu, hubState{executors: map[uint64]*ExecutorSession{},
		bps: newBreakpointRegistry(), children: map[uint64]*IDESession{}})
	h.refusals = admission.NewRefusalLog(func(line string) { h.summary("%s", line) }, 0, 0)
	h.board.OnChange(h.workerChanged)
	h.board.OnWant(h.showWantedException)
	h.board.OnUpdate(h.watch.changed)
	h.logLimit = connbudget.NewLimiter(cfg.RefusalLogInterval, func(cause string, n int, in time.Duration) {
		h.log.Warn().Str("cause", cause).Int("refused", n).Dur("in", in).Msg("more connections refused for the same cause")
	})
	h.exeBudget = connbudget.NewWith(connbudget.Options{Total: cfg.MaxUnadmitted, PerSource: cfg.MaxUnadmittedPerSource,
		Shed: shedLogger(&h.log, h.logLimit, "executor")})
	h.ideBudget = connbudget.NewWith(connbudget.Options{Total: cfg.MaxUnattached, Shed: shedLogger(&h.log, h.logLimit, "IDE")})
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
	h.watch.close()
	h.admission.Close()
	h.refusals.Close()
	h.logLimit.Close()
}

// refusedLine counts a refused worker at remote (host:port) and prints
// line to the summary unless refusals from its address are being summed
// up. It reports whether it printed, so that the log line matches: a flood
// of refusals logs its first at Warn and the rest at Debug.
func (h *Hub) refusedLine(remote, line string) bool {
	return h.refusals.Refused(admission.RemoteIP(remote), line)
}

func (h *Hub) summary(format string, args ...any) {
	if h.cfg.Summary == nil {
		return
	}
	h.summaryMu.Lock()
	defer h.summaryMu.Unlock()
	fmt.Fprintf(h.cfg.Summary, "sparkdap: "+format+"\n", args...)
}

// tellIDE shows line in the attached IDE's debug console, as "sparkdap:
// line": for what the user should know about workers that never became a
// session (one that cannot load a debugger). serve's log has it from the
// RefusalLog. Unlike a worker's events it does not wait for the IDE's
// configurationDone: an output event is valid in any state of a session,
// and the line would otherwise be lost to an IDE still configuring.
func (h *Hub) tellIDE(line string) {
	tx := h.lock()
	defer tx.unlock()
	if root := tx.root; root != nil {
		_ = root.w.send(newEvent("output", map[string]any{"category": "console", "output": "sparkdap: " + line + "\n"}), nil)
	}
}

// Executors lists the executors that finished their handshake, by id.
func (h *Hub) Executors() []ExecutorStatus {
	tx := h.lock()
	defer tx.unlock()
	out := make([]ExecutorStatus, 0, len(tx.executors))
	for _, es := range tx.executors {
		if x := tx.exec(es); x.ready {
			st := ExecutorStatus{ID: es.id, Label: x.label(), Process: x.proc, Task: x.task,
				Stopped: len(x.stopped) > 0, OutputBytes: x.outputBytes, MaxStopResumed: x.maxStopResumed}
			if st.Stopped {
				st.StoppedAt = x.stoppedAt
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
	// Undebugged counts workers that said they cannot load a debugger;
	// LastUndebugged is the latest one's reason.
	Undebugged     int64
	LastUndebugged string
	// Exceptions are the stops at exceptions, grouped by type and place.
	Exceptions []selection.ExceptionGroup
}

// Stats returns a snapshot of the Hub.
func (h *Hub) Stats() Stats {
	st := Stats{Executors: h.Executors(), Refused: h.refusals.Count(),
		Undebugged: h.refusals.UndebuggedCount(), LastUndebugged: h.refusals.LastUndebugged(), Exceptions: h.board.Groups()}
	tx := h.lock()
	st.IDEAttached = tx.root != nil
	tx.unlock()
	return st
}

// ready lists executors that take requests, in id order: a copy the
// caller may keep.
func (tx *held) ready() []*ExecutorSession {
	return slices.Clone(tx.readyView())
}

// readyView is ready without the copy, for reading under the lock
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

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
