package dap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
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
			c, err := l.Accept()
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
	es := newExecutorSession(h, h.nextID.Add(1), conn)
	es.logger().Debug().Msg("executor connected")
	es.serve(ctx)
}

// ServeIDE runs one DAP client connection until it ends.
func (h *Hub) ServeIDE(ctx context.Context, conn net.Conn) {
	s := newIDESession(h, h.nextID.Add(1), conn)
	s.logger().Debug().Msg("IDE connected")
	s.serve(ctx)
}
