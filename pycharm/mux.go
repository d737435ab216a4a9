package pycharm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
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
