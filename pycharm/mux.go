package pycharm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/capture"
	"github.com/sparkdap/sparkdap/internal/connbudget"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/selection"
)

// Config configures the PyCharm front end of the proxy.
type Config struct {
	// Token is what executors must present in their hello; empty accepts
	// any (tests only).
	Token string
	// PyCharm is where PyCharm's Python Debug Server listens.
	PyCharm string
	// MaxSessions caps the executors debugged at once; 0 = no cap.
	MaxSessions int
	// Paths maps executor paths to local ones; nil passes them through.
	Paths *pathmap.Mapper
	// Log gets diagnostics; Summary (optional) one line per worker event.
	// Both are written under the Proxy's lock: their writers must never
	// block (serve gives both an internal/logsink.Sink).
	Log     zerolog.Logger
	Summary io.Writer
	// DialTimeout bounds connecting to PyCharm (default 3 s).
	DialTimeout time.Duration
	// VersionTimeout is how long PyCharm's CMD_VERSION waits for an
	// executor's pydevd to answer it before the proxy answers with
	// FallbackVersion (default 5 s).
	VersionTimeout time.Duration
	// FallbackVersion answers CMD_VERSION when no executor does in time.
	FallbackVersion string
	// HelloTTL is how long an accepted hello waits for its pydevd
	// connection (default admission.DefaultHelloTTL).
	HelloTTL time.Duration
	// CaptureDir is where `!capture` writes captures; empty
	// refuses them. CaptureMaxBytes caps one (default
	// capture.DefaultMaxBytes).
	CaptureDir      string
	CaptureMaxBytes int
	// EvalTimeout bounds each of the proxy's own evaluates in a worker
	// (default 60 s).
	EvalTimeout time.Duration
	// MaxUnadmitted bounds the executor connections (the port's and the
	// tunnel's together) not yet admitted: hellos being answered, pydevd
	// connections not yet joined to their hello: past it, the oldest that
	// proved nothing makes room (see package connbudget).
	// MaxUnadmittedPerSource, if set, bounds those from one source address
	// and refuses more: off by default, as workers share addresses.
	// Defaults connbudget.DefaultTotal and no per-source bound.
	MaxUnadmitted          int
	MaxUnadmittedPerSource int
	// RefusalLogInterval is how often refusals held back from the log are
	// summed up, one line per cause. Default connbudget.DefaultLogInterval.
	RefusalLogInterval time.Duration
	// MaxStop, if positive, is how long a worker may stay stopped with no
	// command from PyCharm about it (one naming its thread, or a capture
	// of it) before the proxy resumes it and tells PyCharm (maxstop.go).
	MaxStop time.Duration
	// ExceptionHold is how long a worker stopped at an exception waits
	// when PyCharm was shown a stop of the same type at the same place
	// already (exceptions.go). Default selection.DefaultExceptionHold.
	ExceptionHold time.Duration
	// LeasePing is how often the proxy speaks to a worker with a stopped
	// thread, renewing the lease the wrapper holds the stop on (lease.go).
	// Default DefaultLeasePing.
	LeasePing time.Duration
}

// The proxy speaks first on every executor connection, because pydevd never
// does: it asks for the thread list, whose ids carry the worker's pid. A
// hello connection skips it; a pydevd connection answers it.
const probeSeq = 1

// identifyTimeout bounds a new connection's first bytes and pydevd's answer
// to the probe (a var for tests).
var identifyTimeout = 15 * time.Second

// Until a pydevd connection is tied to its hello (its answer to the probe
// names the connect guard), it has proved nothing, so what it may make the
// proxy read and hold is small: a small read buffer, and a budget for
// everything it sends up to that answer, the answer included (pydevd's
// thread list, a few hundred bytes a thread, and the thread and process
// events it may send first). Lines grow as their bytes arrive. Once
// joined, lines up to MaxLineBytes are read through a larger buffer.
const (
	unidentifiedReadBuffer = 4 << 10
	maxUnidentifiedBytes   = 64 << 10
	joinedReadBuffer       = 64 << 10
)

// maxPendingHellos bounds the hellos waiting for their pydevd connection (a
// var for tests).
var maxPendingHellos = admission.DefaultMaxPending

// guardThreadPrefix starts the name of the wrapper's connect-guard thread
// in PyCharm mode: "sparkdap-connect-guard <nonce>", the nonce being the
// one the proxy handed out in its hello reply ("SPARKDAP/2 OK <nonce>").
// The thread lives exactly while pydevd_pycharm.settrace connects, so the
// answer to the proxy's probe (CMD_LIST_THREADS) names it: that binds the
// pydevd connection to its hello by a secret only the hello's connection
// saw, where pid and address alone (the address is shared by every
// process on the worker's host) can be guessed by a co-tenant.
const guardThreadPrefix = "sparkdap-connect-guard "

// ownThreadPrefix names the wrapper's own threads; the proxy keeps them out
// of PyCharm.
const ownThreadPrefix = "sparkdap-"

// noResponse lists the commands from PyCharm that pydevd never answers:
// nothing is kept waiting for them.
var noResponse = map[int]bool{
	CmdRun: true, CmdThreadSuspend: true, CmdThreadRun: true, 107: true, 108: true, 109: true, 144: true,
	CmdSetBreak: true, CmdRemoveBreak: true, CmdAddExceptionBreak: true, CmdRemoveExceptionBreak: true,
	CmdAddDjangoExceptionBreak: true, CmdRemoveDjangoExcBreak: true, CmdSetPyException: true,
	CmdSetPropertyTrace: true, CmdEnableDontTrace: true, CmdShowReturnValues: true, 140: true,
	CmdSetUnitTestDebugging: true, CmdRedirectOutput: true, CmdSetProjectRoots: true, CmdStopOnStart: true,
	119: true, 118: true, 127: true, 206: true,
}

// recordedByID are settings PyCharm sends once per session: the last of
// each is replayed to executors that join later.
var recordedByID = map[int]bool{
	CmdSetPyException: true, CmdSetPropertyTrace: true, CmdEnableDontTrace: true, CmdShowReturnValues: true,
	CmdStopOnStart: true, CmdPydevdJSONConfig: true, CmdSetUnitTestDebugging: true,
	CmdSetUserTypeRenderers: true, CmdRedirectOutput: true, CmdSetProjectRoots: true,
}

// Proxy multiplexes executors' pydevd connections into one connection to
// PyCharm.
type Proxy struct {
	cfg Config
	ln  net.Listener
	log zerolog.Logger
	now func() time.Time // MaxStop's clock; tests replace it before serving

	dialMu sync.Mutex // one dial to PyCharm at a time

	// admission holds pending hellos by nonce, each expiring on its own
	// timer, and applies the token, pending cap and session limit. Its
	// lock is a leaf, taken under mu; the sessions it counts are
	// len(execs).
	admission *admission.Registry
	// refusals prints refused workers' summary lines, the first per
	// address and then sums, so a flood of refusals cannot flood the
	// terminal (its own lock; it calls summary only).
	refusals *admission.RefusalLog
	// board is the live selection and the workers watching it (its own
	// lock; never called under mu).
	board *selection.Board
	// budget counts executor connections not yet admitted; logLimit
	// rate-limits the warnings about refused connections, per cause. Each
	// has its own lock, a leaf.
	budget   *connbudget.Budget
	logLimit *connbudget.Limiter

	// mu guards the fields below, the executors' state and PyCharm's
	// session state. Sends to peers happen under it (they only queue);
	// nothing under it waits on the network. The one reader that waits
	// for another connection, an executor's for PyCharm to read its
	// console output (peer.pace), does so after releasing it.
	mu     sync.Mutex
	ide    *peer    // the connection to PyCharm, nil when none
	st     *session // PyCharm's session state, with ide
	execs  map[int64]*executor
	conns  map[net.Conn]bool // every open executor-side connection
	closed bool
}

// session is what PyCharm told the proxy since it connected: replayed to
// every executor that joins.
type session struct {
	version    *Message
	versionAns *answer
	settings   []setting
	run        bool
	seq        int // last seq the proxy gave a message of its own to PyCharm
}

type setting struct {
	key string
	m   Message
}

// answer is shared by the copies of one broadcast request: the first
// executor's response goes to PyCharm, the others are dropped.
type answer struct {
	done  bool
	timer *time.Timer
}

type request struct {
	ideSeq  int
	ans     *answer // broadcast: first answer wins
	swallow bool    // the proxy's own (replay, eval): never forwarded
	// reply gets the answer to the proxy's own request (eval), which
	// waits for it on no lock; buffered, so the sender never blocks.
	reply chan Message
}

type executor struct {
	pid     int64
	ip      string
	hello   admission.Hello
	label   string
	p       *peer
	paths   *pathRewriter
	seq     int // last seq the proxy used towards this executor (odd)
	pending map[int]request
	bps     map[string][]string      // breakpoint key → executor files it was set on
	threads map[string]string        // thread id → pydevd's name, for those PyCharm knows
	hidden  map[string]bool          // the wrapper's own threads, kept from PyCharm
	stopped map[string]StoppedThread // thread id → its stop as PyCharm saw it
	// Stops at exceptions (exceptions.go): the type pydevd announced per
	// thread before suspending it, the stops held from PyCharm, and the
	// threads the proxy resumed unseen, whose resume PyCharm must not get.
	raised  map[string]string
	heldExc map[string]*heldException
	unseen  map[string]bool

	// Its MaxStop clock (maxstop.go).
	stopSince time.Time   // when it last stopped
	lastAsked time.Time   // when PyCharm last asked something about it
	maxStop   *time.Timer // checks the clock; nil when not running
	// leaseTimer renews its stops' lease while it has a stopped thread;
	// leasePing is the sequence number of its last ping (lease.go).
	leaseTimer *time.Timer
	leasePing  int
}

// Listen opens the executor port.
func Listen(cfg Config, executors string) (*Proxy, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.VersionTimeout <= 0 {
		cfg.VersionTimeout = 5 * time.Second
	}
	if cfg.HelloTTL <= 0 {
		cfg.HelloTTL = admission.DefaultHelloTTL
	}
	if cfg.LeasePing <= 0 {
		cfg.LeasePing = DefaultLeasePing
	}
	if cfg.ExceptionHold <= 0 {
		cfg.ExceptionHold = selection.DefaultExceptionHold
	}
	if cfg.FallbackVersion == "" {
		cfg.FallbackVersion = "sparkdap"
	}
	ln, err := net.Listen("tcp", executors)
	if err != nil {
		return nil, fmt.Errorf("executor port: %w", err)
	}
	registry := admission.NewRegistry(admission.Config{Token: cfg.Token, MaxSessions: cfg.MaxSessions,
		MaxPending: maxPendingHellos, TTL: cfg.HelloTTL})
	p := &Proxy{cfg: cfg, ln: ln, log: cfg.Log, now: time.Now, execs: map[int64]*executor{}, admission: registry, board: selection.NewBoard(0),
		conns: map[net.Conn]bool{}}
	p.refusals = admission.NewRefusalLog(func(line string) { p.summary("%s", line) }, 0, 0)
	p.board.OnWant(p.showWantedException)
	p.board.OnChange(p.workerChanged)
	p.logLimit = connbudget.NewLimiter(cfg.RefusalLogInterval, func(cause string, n int, in time.Duration) {
		p.log.Warn().Str("cause", cause).Int("refused", n).Dur("in", in).Msg("more connections refused for the same cause")
	})
	p.budget = connbudget.NewWith(connbudget.Options{Total: cfg.MaxUnadmitted, PerSource: cfg.MaxUnadmittedPerSource, Shed: p.shed})
	return p, nil
}

// Addr is the executor port's address.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Serve accepts executors until ctx ends, then closes every connection.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		// Over a per-source share: closed here, unread, before a
		// goroutine is spent.
		place, conn, ok := p.take(conn)
		if !ok {
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			place.Release()
			conn.Close()
			continue
		}
		p.conns[conn] = true
		p.mu.Unlock()
		go p.serveConn(conn, place)
	}
}

// ServeExecutor serves one executor connection that arrived another way
// than the executor port (an SSH tunnel stream) until it ends. It counts
// against the same budget as the port's; conn must report its origin as
// RemoteAddr.
func (p *Proxy) ServeExecutor(ctx context.Context, conn net.Conn) {
	place, conn, ok := p.take(conn)
	if !ok {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		place.Release()
		conn.Close()
		return
	}
	p.conns[conn] = true
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	p.serveConn(conn, place)
}

// take holds a place in the budget for conn and returns the connection to
// serve in its stead, or closes conn unread and logs the refusal,
// rate-limited per cause.
func (p *Proxy) take(conn net.Conn) (place *connbudget.Place, served net.Conn, ok bool) {
	// Workers from there whose hello was accepted connect pydevd next.
	expected := p.admission.PendingFrom(admission.RemoteIP(conn.RemoteAddr().String()))
	place, served, err := p.budget.Take(conn, expected)
	if err == nil {
		return place, served, true
	}
	conn.Close()
	cause := "executor port: " + err.Error()
	p.logLimited(cause).Str("remote", conn.RemoteAddr().String()).Str("cause", cause).Int("limit", p.budget.Total()).
		Int("per_source", p.budget.PerSource()).Msg("too many connections not yet admitted; closing this one unread")
	return nil, nil, false
}

// shed logs a connection the budget closed because it proved nothing: the
// first of each cause per interval is a warning.
func (p *Proxy) shed(remote net.Addr, why, how string) {
	cause := "executor port: closed a connection that " + why + " " + how
	p.logLimited(cause).Str("remote", remote.String()).Str("cause", cause).
		Msg("many connections not yet admitted; closed one that proved nothing")
}

// logLimited is a warning for the first refusal of cause in an interval,
// a debug line for the rest (summed up by logLimit).
func (p *Proxy) logLimited(cause string) *zerolog.Event {
	if p.logLimit.Allow(cause) {
		return p.log.Warn()
	}
	return p.log.Debug()
}

// Close stops the proxy: the executors are let go, PyCharm's connection
// ends.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	ide := p.ide
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.ln.Close()
	p.admission.Close()
	p.refusals.Close()
	p.logLimit.Close()
	if ide != nil {
		ide.close()
	}
	for c := range conns {
		c.Close()
	}
}

func (p *Proxy) summary(format string, args ...any) {
	if p.cfg.Summary != nil {
		fmt.Fprintf(p.cfg.Summary, "sparkdap: "+format+"\n", args...)
	}
}

func (p *Proxy) forget(conn net.Conn) {
	p.mu.Lock()
	delete(p.conns, conn)
	p.mu.Unlock()
	conn.Close()
}

// serveConn tells a hello from a pydevd connection and serves it. It holds
// place in the budget until the connection joins or ends; place.Release gives
// it back.
func (p *Proxy) serveConn(conn net.Conn, place *connbudget.Place) {
	defer p.forget(conn)
	defer place.Release()
	log := p.log.With().Str("remote", conn.RemoteAddr().String()).Logger()
	// A peer without the token can make these by the thousand: the first
	// of each cause per interval is a warning.
	warn := func(cause string) *zerolog.Event {
		if p.logLimit.Allow(cause) {
			return log.Warn()
		}
		return log.Debug()
	}
	_ = conn.SetDeadline(time.Now().Add(identifyTimeout))
	if _, err := conn.Write(Message{ID: CmdListThreads, Seq: probeSeq}.Marshal()); err != nil {
		return
	}
	// Owned by this goroutine: lr.N is the budget left to a connection
	// not yet identified.
	lr := &io.LimitedReader{R: conn, N: maxUnidentifiedBytes}
	br := bufio.NewReaderSize(lr, unidentifiedReadBuffer)
	if _, err := br.Peek(1); err != nil {
		log.Debug().Err(err).Msg("connection closed before it said anything")
		return
	}
	if admission.IsHello(br) {
		// The hello bounds its own lines (admission.Registry.Handshake); the
		// connection closes after it.
		lr.N = math.MaxInt64
		p.serveHello(conn, br, log, place)
		return
	}
	// pydevd: read up to the probe's answer; keep anything before it.
	var early []Message
	var pid int64
	var nonce string
	for pid == 0 {
		m, err := ReadMessage(br, maxUnidentifiedBytes)
		if err == nil {
			place.Progressed()
		}
		if err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("more than %d bytes before its answer to the proxy's probe", maxUnidentifiedBytes)
			}
			warn("pydevd connection ended unidentified").Err(err).Msg("pydevd connection ended before it said which process it is")
			return
		}
		if m.Seq == probeSeq && (m.ID == CmdReturn || m.ID == CmdError) {
			for _, t := range ThreadList(m.Payload) {
				if n, ok := strings.CutPrefix(t.Name, guardThreadPrefix); ok {
					pid, _ = ThreadPID(t.ID)
					nonce = n
					break
				}
			}
			if pid == 0 {
				warn("pydevd connection without connect guard").Msg("pydevd connection refused: its thread list names no sparkdap connect guard " +
					"(not a sparkdap wrapper of this version); the worker runs undebugged")
				return
			}
			continue
		}
		early = append(early, m)
	}
	_ = conn.SetDeadline(time.Time{})
	e, err := p.join(conn, pid, nonce)
	if err != nil {
		warn("pydevd connection without hello").Err(err).Int64("pid", pid).Msg("pydevd connection refused; the worker runs undebugged")
		return
	}
	place.Release()
	lr.N = math.MaxInt64
	// Large reads bypass the small buffer (bufio reads straight into a
	// caller's buffer at least as large as its own).
	br = bufio.NewReaderSize(br, joinedReadBuffer)
	log = log.With().Int64("pid", pid).Str("label", e.label).Logger()
	log.Info().Msg("executor joined the PyCharm session")
	p.summary("worker %s pid %d attached (%s)", e.hello.Host, pid, e.hello.Label)
	for _, m := range early {
		p.fromExecutor(e, m)
	}
	for {
		m, err := ReadMessage(br, MaxLineBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug().Err(err).Msg("executor connection ended")
			}
			break
		}
		// Console output just relayed to a PyCharm far behind: stop
		// reading this executor until PyCharm catches up (peer.pace),
		// here on its reader, p.mu released.
		if ide := p.fromExecutor(e, m); ide != nil {
			if d := ide.pace(e.p.q.Done()); d > time.Second {
				log.Debug().Dur("waited", d).Int("queued", ide.q.Queued()).
					Msg("paused reading the executor's output: PyCharm reads slowly")
			}
		}
	}
	p.leave(e)
	log.Info().Msg("executor left the PyCharm session")
	p.summary("worker %s pid %d detached", e.hello.Host, pid)
}

// serveHello answers a hello (admission.ServeHello): token, session limit,
// PyCharm reachable (acceptHello). A watch connection is served until it
// ends, out of the budget of connections not yet admitted.
func (p *Proxy) serveHello(conn net.Conn, br *bufio.Reader, log zerolog.Logger, place *connbudget.Place) {
	send := func(b []byte) {
		// The first thing sent answers a whole hello line.
		place.Progressed()
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(b)
	}
	_ = conn.SetDeadline(time.Now().Add(identifyTimeout))
	_ = admission.ServeHello(admission.HelloConn{Remote: conn.RemoteAddr().String(), Reader: br, Send: send, Log: log,
		Undebugged: p.tellPyCharm, Lost: func(rep admission.LossReport) { p.tellLoss(log, rep) },
		Watch: func(hello admission.Hello) (func() error, error) {
			wa, err := p.board.Admit(hello)
			if err != nil {
				return nil, err
			}
			place.Release()
			_ = conn.SetReadDeadline(time.Time{})
			return func() error { return wa.Serve(br, send) }, nil
		}}, p.admission, p.refusals, p.acceptHello)
}

// tellLoss tells of a worker's loss report (output its debugger could not
// send before the task ended, which the executor's log has): at Warn in
// serve's log and in PyCharm's console.
func (p *Proxy) tellLoss(log zerolog.Logger, rep admission.LossReport) {
	msg := rep.Message()
	log.Warn().Str("worker", rep.Label()).Int64("bytes", rep.Bytes).Int64("lines", rep.Lines).Msg(msg)
	p.tellPyCharm(msg)
}

// tellPyCharm shows line in PyCharm's console, as pydevd's stderr output
// would appear there: for what the user should know about workers that
// never became a session (one that cannot load a debugger), or output a
// worker could not deliver (a loss report). It connects
// to PyCharm's debug server for it, as a worker's hello would: a job whose
// every worker lacks a debugger should not leave PyCharm waiting in
// silence. serve's log has the line from the RefusalLog either way.
func (p *Proxy) tellPyCharm(line string) {
	if err := p.ensurePyCharm(); err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ide != nil {
		p.ide.send(writeToConsole(p.nextIDESeq(), "sparkdap: "+line+"\n", "2"))
	}
}

// errPIDElsewhere refuses a hello whose pid another host's worker already
// debugs: pydevd's thread ids (pid_<pid>_id_<n>) would clash.
type errPIDElsewhere struct{ pid int64 }

func (e *errPIDElsewhere) Error() string {
	return fmt.Sprintf("pid %d is already debugged on another host (thread ids would clash)", e.pid)
}

// acceptHello admits a verified hello (its proof checked by Handshake;
// then PyCharm reachable, then the registry's caps) and returns the nonce
// its pydevd connection must show (an admission.Admit).
func (p *Proxy) acceptHello(ip string, hello admission.Hello) (nonce string, err error) {
	if err := p.ensurePyCharm(); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.execs[hello.PID]; ok && e.ip != ip {
		return "", &errPIDElsewhere{hello.PID}
	}
	return p.admission.AcceptNonce(ip, hello, len(p.execs))
}

// ensurePyCharm connects to PyCharm's debug server unless connected.
func (p *Proxy) ensurePyCharm() error {
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	p.mu.Lock()
	connected, closed := p.ide != nil, p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("proxy shutting down")
	}
	if connected {
		return nil
	}
	conn, err := net.DialTimeout("tcp", p.cfg.PyCharm, p.cfg.DialTimeout)
	if err != nil {
		p.log.Warn().Err(err).Str("pycharm", p.cfg.PyCharm).Msg("cannot reach PyCharm's debug server")
		return fmt.Errorf("PyCharm's Python Debug Server is not listening at %s", p.cfg.PyCharm)
	}
	ide := newPeer(conn)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ide.close()
		return errors.New("proxy shutting down")
	}
	p.ide, p.st = ide, &session{}
	p.mu.Unlock()
	p.log.Info().Str("pycharm", p.cfg.PyCharm).Msg("connected to PyCharm's debug server")
	p.summary("connected to PyCharm at %s", p.cfg.PyCharm)
	go p.readPyCharm(ide, conn)
	return nil
}

func (p *Proxy) readPyCharm(ide *peer, conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		m, err := ReadMessage(br, MaxLineBytes)
		if err != nil {
			p.log.Debug().Err(err).Msg("PyCharm connection ended")
			break
		}
		p.fromPyCharm(ide, m)
	}
	ide.close()
	p.mu.Lock()
	if p.ide != ide {
		p.mu.Unlock()
		return
	}
	p.ide, p.st = nil, nil
	var gone []*executor
	for pid, e := range p.execs {
		gone = append(gone, e)
		delete(p.execs, pid)
	}
	closed := p.closed
	p.mu.Unlock()
	for _, e := range gone {
		e.p.close()
	}
	if !closed {
		p.log.Info().Int("executors", len(gone)).Msg("PyCharm closed the debug connection; executors run on undebugged")
		p.summary("PyCharm closed the debug connection; %d worker(s) let go", len(gone))
	}
}

// join registers an identified pydevd connection and replays PyCharm's
// session to it.
func (p *Proxy) join(conn net.Conn, pid int64, nonce string) (*executor, error) {
	ip := admission.RemoteIP(conn.RemoteAddr().String())
	p.mu.Lock()
	defer p.mu.Unlock()
	// One use only: Claim forgets it.
	hello, ok := p.admission.Claim(nonce, ip, pid)
	if !ok {
		return nil, errors.New("no hello for this connection (its nonce is unknown or expired, or names another process)")
	}
	if p.st == nil {
		return nil, errors.New("PyCharm is not connected")
	}
	if _, dup := p.execs[pid]; dup {
		return nil, fmt.Errorf("pid %d is already connected", pid)
	}
	e := &executor{pid: pid, ip: ip, hello: hello, p: newPeer(conn), seq: probeSeq,
		paths: newPathRewriter(p.cfg.Paths, hello.Roots), pending: map[int]request{},
		bps: map[string][]string{}, threads: map[string]string{}, hidden: map[string]bool{},
		stopped: map[string]StoppedThread{}}
	e.label = labelOf(hello.TaskInfo)
	p.execs[pid] = e
	st := p.st
	if st.version != nil {
		p.forward(e, *st.version, request{ans: st.versionAns, swallow: st.versionAns.done})
	}
	for _, s := range st.settings {
		p.toExecutor(e, s.m, request{swallow: true})
	}
	if st.run {
		p.forward(e, Message{ID: CmdRun}, request{swallow: true})
	}
	return e, nil
}

// labelOf is the thread-name prefix of an executor's task: the shared
// task label (admission.Label), as the DAP flavour's merged mode writes it.
func labelOf(t admission.TaskInfo) string {
	return "[" + admission.Label(t) + "] "
}

// leave forgets an executor whose connection ended: PyCharm is told its
// threads are gone and gets errors for what it still waits for.
func (p *Proxy) leave(e *executor) {
	e.p.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Also when PyCharm's teardown already forgot e: the proxy's own
	// evals waiting on e fail now (ErrWorkerGone), not at their timeout.
	pending := e.pending
	for _, r := range pending {
		if r.reply != nil {
			close(r.reply)
		}
	}
	e.pending = map[int]request{}
	e.stopMaxStop()
	if p.execs[e.pid] != e {
		return
	}
	delete(p.execs, e.pid)
	if p.ide == nil {
		return
	}
	var seqs []int
	for _, r := range pending {
		if !r.swallow && r.ans == nil {
			seqs = append(seqs, r.ideSeq)
		}
	}
	sort.Ints(seqs)
	for _, s := range seqs {
		p.ide.send(ErrorMessage(s, fmt.Sprintf("sparkdap: the worker (pid %d) went away", e.pid)))
	}
	threads := make([]string, 0, len(e.threads))
	for t := range e.threads {
		threads = append(threads, t)
	}
	sort.Strings(threads)
	for _, t := range threads {
		p.ide.send(Message{ID: CmdThreadKill, Seq: p.nextIDESeq(), Payload: PyQuote(t, payloadSafe)})
	}
}

// nextIDESeq numbers the proxy's own messages to PyCharm (pydevd's style:
// even). Callers hold p.mu and p.st is set.
func (p *Proxy) nextIDESeq() int {
	p.st.seq += 2
	return p.st.seq
}

// forward sends m to one executor under a fresh sequence number, noting
// what to do with the answer. Callers hold p.mu.
func (p *Proxy) forward(e *executor, m Message, r request) {
	e.seq += 2
	r.ideSeq = m.Seq
	m.Seq = e.seq
	if !noResponse[m.ID] {
		e.pending[m.Seq] = r
	}
	e.p.send(m)
}

// toExecutor forwards m with breakpoint files rewritten for e. Callers hold
// p.mu.
func (p *Proxy) toExecutor(e *executor, m Message, r request) {
	key, file, ok := BreakpointKey(m)
	if !ok {
		p.forward(e, m, r)
		return
	}
	var files []string
	if m.ID == CmdSetBreak {
		m = WithAnyFunction(m)
		files = e.paths.toRemote(file)
		e.bps[key] = files
	} else {
		if files = e.bps[key]; files == nil {
			files = e.paths.toRemote(file)
		}
		delete(e.bps, key)
	}
	for _, f := range files {
		p.forward(e, WithBreakpointFile(m, f), r)
	}
}

// fromPyCharm routes one command from PyCharm.
func (p *Proxy) fromPyCharm(ide *peer, m Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ide != ide || p.st == nil {
		return
	}
	st := p.st
	p.log.Debug().Str("msg", m.String()).Msg("from PyCharm")
	switch {
	case m.ID == CmdVersion:
		ans := &answer{}
		st.version, st.versionAns = &m, ans
		for _, e := range p.execs {
			p.forward(e, m, request{ans: ans})
		}
		seq := m.Seq
		ans.timer = time.AfterFunc(p.cfg.VersionTimeout, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if ans.done || p.ide != ide {
				return
			}
			ans.done = true
			p.log.Info().Msg("no executor answered PyCharm's version request in time; the proxy answered it")
			ide.send(Message{ID: CmdVersion, Seq: seq, Payload: PyQuote(p.cfg.FallbackVersion, payloadSafe)})
		})
		return
	case m.ID == CmdSetProtocol:
		// Executors stay on pydevd's default quoted-line protocol: the
		// proxy answers for them.
		if strings.TrimSpace(m.Payload) != "quoted-line" {
			ide.send(ErrorMessage(m.Seq, "sparkdap: only the quoted-line protocol is supported"))
			return
		}
		ide.send(Message{ID: CmdSetProtocol, Seq: m.Seq})
		return
	case m.ID == CmdRun:
		st.run = true
	case m.ID == CmdSetBreak || m.ID == CmdRemoveBreak:
		if key, _, ok := BreakpointKey(m); ok {
			st.record("bp\t"+key, m, m.ID == CmdSetBreak)
		}
	case m.ID == CmdAddExceptionBreak || m.ID == CmdRemoveExceptionBreak:
		name, _, _ := strings.Cut(m.Payload, "\t")
		st.record("exc\t"+name, m, m.ID == CmdAddExceptionBreak)
	case m.ID == CmdAddDjangoExceptionBreak || m.ID == CmdRemoveDjangoExcBreak:
		name, _, _ := strings.Cut(m.Payload, "\t")
		st.record("django\t"+name, m, m.ID == CmdAddDjangoExceptionBreak)
	case recordedByID[m.ID]:
		st.record("cmd\t"+strconv.Itoa(m.ID), m, true)
	case m.ID == CmdConsoleExec:
		// thread\tframe\tscope\tline: a line of the Debug Console.
		f := strings.SplitN(m.Payload, "\t", 4)
		if len(f) == 4 && capture.IsConsoleCommand(f[3]) {
			p.consoleCommand(ide, m, f[0], f[1], f[3])
			return
		}
		fallthrough
	default:
		if thread, all := RoutedThread(m.Payload); thread != "" && !all {
			pid, _ := ThreadPID(thread)
			e := p.execs[pid]
			if e == nil {
				if !noResponse[m.ID] {
					ide.send(ErrorMessage(m.Seq, fmt.Sprintf("sparkdap: thread %s: its worker is gone", thread)))
				}
				return
			}
			p.noteAsked(e)
			p.forward(e, m, request{})
			return
		}
	}
	// Broadcast: every executor gets it; the first answer goes back.
	ans := &answer{}
	for _, e := range p.sortedExecs() {
		p.toExecutor(e, m, request{ans: ans})
	}
}

func (p *Proxy) sortedExecs() []*executor {
	out := make([]*executor, 0, len(p.execs))
	for _, e := range p.execs {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// record keeps (or with keep false, drops) a setting for replay.
func (st *session) record(key string, m Message, keep bool) {
	for i, s := range st.settings {
		if s.key == key {
			st.settings = append(st.settings[:i], st.settings[i+1:]...)
			break
		}
	}
	if keep {
		st.settings = append(st.settings, setting{key: key, m: m})
	}
}

// pycharmEvents are the command ids PyCharm's RemoteDebugger.processResponse
// dispatches as events whatever their sequence number: thread events,
// console output, CMD_EXIT, signature and concurrency logs, input requests,
// process creation and the Cython warning. Anything else is an answer, kept
// only if PyCharm waits for that sequence number.
var pycharmEvents = map[int]bool{
	CmdThreadCreate: true, CmdThreadKill: true, CmdThreadSuspend: true, CmdThreadRun: true,
	CmdShowConsole: true, CmdWriteToConsole: true, CmdExit: true, 130: true, 145: true,
	CmdInputRequested: true, CmdProcessCreated: true, CmdShowCythonWarning: true,
}

// forwardedEvents are the events an executor may send PyCharm unasked.
// Not CMD_EXIT: PyCharm tears down the whole session on it, every worker's
// (fireCommunicationError). Not PROCESS_CREATED, INPUT_REQUESTED, signature
// or concurrency logs: PyCharm's multi-process and console machinery, which
// the proxy's one connection does not stand for.
var forwardedEvents = map[int]bool{
	CmdThreadCreate: true, CmdThreadKill: true, CmdThreadSuspend: true, CmdThreadRun: true,
	CmdShowConsole: true, CmdWriteToConsole: true, CmdShowCythonWarning: true,
}

// eventThreads lists the threads a thread event names: the <thread>
// elements of create, suspend and show-console, the payload of kill, the
// first field of resume.
func eventThreads(m Message) []string {
	switch m.ID {
	case CmdThreadKill:
		return []string{strings.TrimSpace(PyUnquote(m.Payload))}
	case CmdThreadRun:
		id, _, _ := strings.Cut(PyUnquote(m.Payload), "\t")
		return []string{strings.TrimSpace(id)}
	case CmdThreadCreate, CmdThreadSuspend, CmdShowConsole:
		return ThreadIDs(m.Payload)
	}
	return nil
}

// ownThreads reports whether every thread an event names, and at least
// one, is e's: a worker must not announce, suspend or kill another's.
func ownThreads(e *executor, m Message) bool {
	switch m.ID {
	case CmdThreadCreate, CmdThreadKill, CmdThreadSuspend, CmdThreadRun, CmdShowConsole:
	default:
		return true // not a thread event
	}
	ids := eventThreads(m)
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		if pid, ok := ThreadPID(id); !ok || pid != e.pid {
			return false
		}
	}
	return true
}

// fromExecutor relays one message from an executor's pydevd to PyCharm:
// the events PyCharm needs about e's own threads, and answers to requests
// PyCharm is waiting for. Everything else is dropped with a debug line.
// It returns PyCharm's peer if m was console output relayed to it, for
// the caller to pace on once p.mu is released (peer.pace); else nil.
func (p *Proxy) fromExecutor(e *executor, m Message) (paceOn *peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.execs[e.pid] != e || p.ide == nil {
		return
	}
	if m.ID == CmdSendCurrExceptionTrace {
		e.noteExceptionTrace(m)
		return
	}
	if m.ID == CmdSparkdapTask {
		var t admission.TaskInfo
		if err := json.Unmarshal([]byte(PyUnquote(m.Payload)), &t); err == nil {
			t = t.Clean() // the cluster's words, shown to people
			if t.PID == 0 {
				t.PID = e.pid
			}
			old := e.label
			e.label = labelOf(t)
			e.hello.TaskInfo.Label = t.Label
			e.hello.TaskInfo.TaskAttemptID = t.TaskAttemptID
			if e.label != old {
				p.reannounce(e)
			}
		}
		return
	}
	drop := func(why string) {
		p.log.Debug().Int64("pid", e.pid).Str("msg", m.String()).Str("why", why).Msg("dropped a message from an executor")
	}
	if pycharmEvents[m.ID] {
		if !forwardedEvents[m.ID] {
			drop("PyCharm must not get this event from a worker")
			return
		}
		if !ownThreads(e, m) {
			drop("names a thread that is not this worker's")
			return
		}
		if p.hideOwnThread(e, m) || p.holdException(e, m) || e.resumedUnseen(m) {
			return
		}
		m.Seq = p.nextIDESeq()
	} else {
		r, ok := e.pending[m.Seq]
		if !ok || m.Seq%2 == 0 {
			drop("answers no request PyCharm is waiting for")
			return
		}
		delete(e.pending, m.Seq)
		if r.reply != nil {
			r.reply <- m
			return
		}
		if r.swallow {
			return
		}
		if r.ans != nil {
			if r.ans.done {
				return
			}
			r.ans.done = true
			if r.ans.timer != nil {
				r.ans.timer.Stop()
			}
		}
		m.Seq = r.ideSeq
	}
	return p.relay(e, m)
}

// relay sends PyCharm m from e, m.Seq already PyCharm's: thread names and
// frame files rewritten, stops noted. It returns PyCharm's peer if m was
// console output. Callers hold p.mu.
func (p *Proxy) relay(e *executor, m Message) (paceOn *peer) {
	switch m.ID {
	case CmdThreadCreate:
		for _, t := range ThreadList(m.Payload) {
			e.threads[t.ID] = t.Name
		}
	case CmdThreadKill:
		delete(e.threads, strings.TrimSpace(PyUnquote(m.Payload)))
	}
	m.Payload = RewriteFrameFiles(DropPlumbingFrames(m.Payload), e.paths.toLocal)
	if m.ID == CmdThreadCreate || m.ID == CmdReturn {
		m.Payload = PrefixThreadNames(m.Payload, e.label)
	}
	e.noteStop(m)
	if m.ID == CmdThreadSuspend {
		p.armMaxStop(e)
	}
	p.renewLeaseLocked(e)
	p.ide.send(m)
	if m.ID == CmdWriteToConsole {
		return p.ide
	}
	return nil
}

// hideOwnThread keeps the wrapper's own threads (named "sparkdap-…", such
// as the connect guard) out of PyCharm: their events are dropped, and one
// suspended by a suspend-all policy or a pause is resumed at once, so it
// neither shows in PyCharm nor stays stopped inside remote_debug.py. It
// reports whether m was about such a thread. Callers hold p.mu.
func (p *Proxy) hideOwnThread(e *executor, m Message) bool {
	switch m.ID {
	case CmdThreadCreate:
		ts := ThreadList(m.Payload)
		if len(ts) == 0 || !strings.HasPrefix(ts[0].Name, ownThreadPrefix) {
			return false
		}
		for _, t := range ts {
			e.hidden[t.ID] = true
		}
		p.log.Debug().Int64("pid", e.pid).Str("thread", ts[0].ID).Msg("kept the wrapper's own thread out of PyCharm")
		return true
	case CmdThreadKill:
		id := eventThreads(m)[0]
		if !e.hidden[id] {
			return false
		}
		delete(e.hidden, id)
		return true
	case CmdThreadRun:
		return e.hidden[eventThreads(m)[0]]
	case CmdThreadSuspend, CmdShowConsole:
		ids := eventThreads(m)
		if !e.hidden[ids[0]] {
			return false
		}
		for _, id := range ids {
			p.forward(e, Message{ID: CmdThreadRun, Payload: id}, request{swallow: true})
		}
		p.log.Debug().Int64("pid", e.pid).Strs("threads", ids).Msg("resumed the wrapper's own thread")
		return true
	}
	return false
}

// reannounce tells PyCharm the new names of e's threads after its task
// changed: PyCharm takes a thread's name only from CMD_THREAD_CREATE, so a
// reused worker's thread would keep its first task's label. A repeated
// create replaces the thread's entry (RemoteDebugger keeps threads by id).
// Callers hold p.mu.
func (p *Proxy) reannounce(e *executor) {
	ids := make([]string, 0, len(e.threads))
	for id := range e.threads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p.ide.send(Message{ID: CmdThreadCreate, Seq: p.nextIDESeq(), Payload: ThreadCreatePayload(id, e.label+e.threads[id])})
	}
}
