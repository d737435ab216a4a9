package dap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/internal/acceptretry"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/connbudget"
)

// Server owns the two listeners of a Hub: the IDE side and the executor side.
type Server struct {
	Hub *Hub
	ide net.Listener
	exe net.Listener
}

// Listen opens both listeners. Use port 0 for any free port; Addrs tells
// which were taken.
func Listen(hub *Hub, ideAddr, executorAddr string) (*Server, error) {
	ide, err := net.Listen("tcp", ideAddr)
	if err != nil {
		return nil, fmt.Errorf("IDE listener on %s: %w", ideAddr, err)
	}
	exe, err := net.Listen("tcp", executorAddr)
	if err != nil {
		ide.Close()
		return nil, fmt.Errorf("executor listener on %s: %w", executorAddr, err)
	}
	tx := hub.lock()
	tx.ideAddr = ide.Addr()
	tx.unlock()
	return &Server{Hub: hub, ide: ide, exe: exe}, nil
}

// IDEAddr is where DAP clients attach.
func (s *Server) IDEAddr() net.Addr { return s.ide.Addr() }

// ExecutorAddr is where debugpy.connect reaches the proxy.
func (s *Server) ExecutorAddr() net.Addr { return s.exe.Addr() }

// Serve accepts connections until ctx ends, then closes every connection and
// returns once their goroutines are done.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	// A connection over its port's budget is closed here, unread, before
	// anything (a goroutine included) is spent on it.
	accept := func(l net.Listener, b *connbudget.Budget, port string) {
		defer wg.Done()
		for {
			c, err := acceptretry.Accept(ctx, l, nil, func(err error, wait time.Duration) {
				s.Hub.log.Warn().Err(err).Stringer("listener", l.Addr()).Dur("retry_in", wait).Msg("accept failed; still serving")
			})
			if err != nil {
				if ctx.Err() == nil {
					errs <- fmt.Errorf("accept on %s: %w", l.Addr(), err)
					cancel()
				}
				return
			}
			place, served, ok := s.Hub.take(b, port, c)
			if !ok {
				continue
			}
			// The session's method is the goroutine itself: an idle
			// session is its reader parked under these frames, and each
			// frame less keeps its stack small enough to shrink (see
			// ExecutorSession.serve).
			wg.Add(1)
			if b == s.Hub.exeBudget {
				go s.Hub.serveExecutor(ctx, served, c, place, wg.Done)
			} else {
				go s.Hub.serveIDE(ctx, served, c, place, wg.Done)
			}
		}
	}
	wg.Add(2)
	go accept(s.exe, s.Hub.exeBudget, "executor")
	go accept(s.ide, s.Hub.ideBudget, "IDE")
	<-ctx.Done()
	s.ide.Close()
	s.exe.Close()
	wg.Wait()
	s.Hub.WaitCallbacks()
	select {
	case err := <-errs:
		return err
	default:
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}

// ServeExecutor runs one pydevd connection until it ends. It counts
// against the executor port's budget like a connection the Server
// accepted: over it, conn is closed unread. A connection carried from
// elsewhere (an SSH tunnel stream) must report its origin as RemoteAddr.
func (h *Hub) ServeExecutor(ctx context.Context, conn net.Conn) {
	place, served, ok := h.take(h.exeBudget, "executor", conn)
	if !ok {
		return
	}
	h.serveExecutor(ctx, served, conn, place, nil)
}

// serveExecutor runs one pydevd connection that holds place in the
// executor port's budget: read through served (the budget's watch on
// it), written straight to conn (see newWire); then calls done, if set.
func (h *Hub) serveExecutor(ctx context.Context, served, conn net.Conn, place *connbudget.Place, done func()) {
	if done != nil {
		defer done()
	}
	defer place.Release()
	es := newExecutorSession(h, h.nextID.Add(1), served, conn)
	es.unadmitted, es.progressed = place.Release, place.Progressed
	es.logger().Debug().Msg("executor connected")
	es.serve(ctx)
}

// ServeIDE runs one DAP client connection until it ends. It counts
// against the IDE port's budget like a connection the Server accepted.
func (h *Hub) ServeIDE(ctx context.Context, conn net.Conn) {
	place, served, ok := h.take(h.ideBudget, "IDE", conn)
	if !ok {
		return
	}
	h.serveIDE(ctx, served, conn, place, nil)
}

// serveIDE runs one DAP client connection that holds place in the IDE
// port's budget, read through served and written to conn (see newWire);
// then calls done, if set.
func (h *Hub) serveIDE(ctx context.Context, served, conn net.Conn, place *connbudget.Place, done func()) {
	if done != nil {
		defer done()
	}
	defer place.Release()
	s := newIDESession(h, h.nextID.Add(1), served, conn)
	s.unadmitted, s.progressed = place.Release, place.Progressed
	// A client that does not attach in time goes: a local user must not
	// hold connections open for free.
	deadline := time.AfterFunc(h.cfg.AttachTimeout, func() {
		tx := h.lock()
		attached := tx.ide(s).attached
		tx.unlock()
		if !attached {
			s.w.close(fmt.Errorf("no attach within %s", h.cfg.AttachTimeout))
		}
	})
	defer deadline.Stop()
	s.logger().Debug().Msg("IDE connected")
	s.serve(ctx)
}

// take holds a place in budget b (of the port named port) for conn and
// returns the connection to serve in its stead, or closes conn unread and
// logs the refusal, rate-limited per cause.
func (h *Hub) take(b *connbudget.Budget, port string, conn net.Conn) (place *connbudget.Place, served net.Conn, ok bool) {
	expected := 0
	if b == h.exeBudget {
		// Workers from there whose hello was accepted connect pydevd next.
		expected = h.admission.PendingFrom(admission.RemoteIP(conn.RemoteAddr().String()))
	}
	place, served, err := b.Take(conn, expected)
	if err == nil {
		return place, served, true
	}
	conn.Close()
	cause := port + " port: " + err.Error()
	level := h.log.Debug()
	if h.logLimit.Allow(cause) {
		level = h.log.Warn()
	}
	level.Str("remote", conn.RemoteAddr().String()).Str("cause", cause).Int("limit", b.Total()).
		Int("per_source", b.PerSource()).Msg("too many connections not yet admitted; closing this one unread")
	return nil, nil, false
}

// shedLogger is a Budget's Shed for port: closing connections that proved
// nothing to make room, or for their time under pressure, is logged once
// per cause and interval, the rest summed up.
func shedLogger(log *zerolog.Logger, limit *connbudget.Limiter, port string) func(net.Addr, string, string) {
	return func(remote net.Addr, why, how string) {
		cause := port + " port: closed a connection that " + why + " " + how
		level := log.Debug()
		if limit.Allow(cause) {
			level = log.Warn()
		}
		level.Str("remote", remote.String()).Str("cause", cause).Msg("many connections not yet admitted; closed one that proved nothing")
	}
}

// refusalLogged notes a refusal of cause and reports whether to log it at
// warning level: the first of each cause per interval is, the rest are
// summed up in one line per interval (see connbudget.Limiter).
func (h *Hub) refusalLogged(cause string) bool { return h.logLimit.Allow(cause) }
