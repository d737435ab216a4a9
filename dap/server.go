package dap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sparkdap/sparkdap/internal/acceptretry"
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
	hub.mu.Lock()
	hub.ideAddr = ide.Addr()
	hub.mu.Unlock()
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
	accept := func(l net.Listener, serve func(net.Conn)) {
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
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}
	wg.Add(2)
	go accept(s.exe, func(c net.Conn) { s.Hub.ServeExecutor(ctx, c) })
	go accept(s.ide, func(c net.Conn) { s.Hub.ServeIDE(ctx, c) })
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

// ServeExecutor runs one pydevd connection until it ends.
func (h *Hub) ServeExecutor(ctx context.Context, conn net.Conn) {
	release, ok := h.holdUnadmitted()
	if !ok {
		h.log.Warn().Str("remote", conn.RemoteAddr().String()).Int("limit", h.cfg.MaxUnadmitted).
			Msg("too many connections still in their handshake; closing this one")
		conn.Close()
		return
	}
	es := newExecutorSession(h, h.nextID.Add(1), conn)
	es.unadmitted = release
	defer release()
	es.logger().Debug().Msg("executor connected")
	es.serve(ctx)
}

// ServeIDE runs one DAP client connection until it ends.
func (h *Hub) ServeIDE(ctx context.Context, conn net.Conn) {
	release, ok := h.holdUnadmitted()
	if !ok {
		h.log.Warn().Str("remote", conn.RemoteAddr().String()).Int("limit", h.cfg.MaxUnadmitted).
			Msg("too many connections still in their handshake; closing this one")
		conn.Close()
		return
	}
	s := newIDESession(h, h.nextID.Add(1), conn)
	s.unadmitted = release
	defer release()
	// A client that does not attach in time goes: a local user must not
	// hold connections open for free.
	deadline := time.AfterFunc(h.cfg.AttachTimeout, func() {
		h.mu.Lock()
		attached := s.attached
		h.mu.Unlock()
		if !attached {
			s.w.close(fmt.Errorf("no attach within %s", h.cfg.AttachTimeout))
		}
	})
	defer deadline.Stop()
	s.logger().Debug().Msg("IDE connected")
	s.serve(ctx)
}

// holdUnadmitted takes one of the Config.MaxUnadmitted places of
// connections that have not yet presented their token (executors) or
// attached (IDEs). release gives it back; it may be called more than once.
func (h *Hub) holdUnadmitted() (release func(), ok bool) {
	if h.unadmitted.Add(1) > int64(h.cfg.MaxUnadmitted) {
		h.unadmitted.Add(-1)
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { h.unadmitted.Add(-1) }) }, true
}
