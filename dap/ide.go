package dap

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/guard"
)

// IDESession is one connection from a DAP client: the root session, which
// attached without naming an executor, or a child session bound to one
// executor (a startDebugging the proxy asked for).
//
// Ownership: the goroutine running serve reads the connection and handles
// its messages in order; w has one writer at a time, and a send never
// blocks. The Hub's lock guards the session's state, g, which the compiler
// lets only its holder reach (held.ide); id, hub and w never change,
// unadmitted is set before serving, and the rest is atomic or a sync.Once.
type IDESession struct {
	id  uint64
	hub *Hub
	w   *wire
	// logp is the session's logger; attach adds the executor while
	// executors' goroutines log through it, hence atomic.
	logp atomic.Pointer[zerolog.Logger]

	// g is its state guarded by the Hub's lock (held.ide).
	g guard.Guarded[ideState]
	// executor is the executor a child session shows (nil for the root),
	// set once as it attaches.
	executor atomic.Pointer[ExecutorSession]
	// unadmitted gives back its place in the IDE port's budget of
	// connections not yet attached (Hub.take); nil outside serveIDE. Set
	// before serving.
	unadmitted func()
	// progressed tells that budget the client sent a whole first message;
	// nil outside serveIDE. Set before serving; called on the reader.
	progressed func()
	// admitted is attached, set on the reader goroutine (attach) before
	// it reads the next message, which may then be as large as
	// Config.MaxMessageBytes allows.
	admitted atomic.Bool

	goneOnce sync.Once
	// leaving is set once the session has ended (disconnect answered, or
	// terminated sent): the client closes the connection, or grace does
	// (see leave).
	leaving atomic.Bool
	grace   atomic.Pointer[time.Timer]
}

// ideState is an IDESession's state guarded by the Hub's lock, reached
// with held.ide.
type ideState struct {
	childMode  bool // root only: executors appear as child sessions
	configured bool // configurationDone received
	attached   bool
	// ended: the debugging of the job was stopped from another session;
	// this one got terminated and is closing (it is no longer the root or
	// a child), so what it still sends is refused.
	ended bool
	asked map[int64]childAsk // root only: startDebugging seq → the executor it announced
}

func newIDESession(h *Hub, id uint64, served, conn net.Conn) *IDESession {
	s := &IDESession{id: id, hub: h, w: newWire(served, conn, false)}
	s.g = guard.New(&h.mu, ideState{asked: map[int64]childAsk{}})
	s.setLogger(h.log.With().Uint64("ide", id).Str("remote", conn.RemoteAddr().String()).Logger())
	return s
}

func (s *IDESession) logger() *zerolog.Logger { return s.logp.Load() }

func (s *IDESession) setLogger(l zerolog.Logger) { s.logp.Store(&l) }

func (s *IDESession) reply(m Message) { _ = s.w.send(m, nil) }

func (s *IDESession) fail(req Message, format string, args ...any) {
	s.logger().Debug().Str("command", req.Command()).Msgf("error response: "+format, args...)
	s.reply(newErrorResponse(req, format, args...))
}

// isRoot reports whether s shows every executor (as opposed to one).
func (s *IDESession) isRoot() bool { return s.executor.Load() == nil }

// serve reads the client's messages until it leaves.
func (s *IDESession) serve(ctx context.Context) {
	done := make(chan error, 1)
	fr := dapwire.NewFrameReader(s.w.conn, s.hub.cfg.MaxMessageBytes)
	fr.LimitUntil(&s.admitted, maxUnattachedMessageBytes)
	fr.OnAlloc(s.hub.frameAlloc)
	go func() { done <- s.w.readFrames(fr, dapwire.DecodeMessage, s.w.firstTells(fr, s.progressed, s.handle)) }()
	var reason error
	select {
	case reason = <-done:
	case <-ctx.Done():
		reason = ctx.Err()
		s.w.close(reason)
		<-done
	}
	s.w.close(reason)
	if t := s.grace.Load(); t != nil {
		t.Stop()
	}
	switch {
	case s.leaving.Load():
		s.logger().Debug().AnErr("reason", reason).Msg("IDE connection closed after its session ended")
	case isBadInput(reason):
		s.logger().Warn().Err(reason).Msg("closing IDE connection: it broke the protocol")
	case reason != nil && !errors.Is(reason, errClosed):
		s.logger().Info().Err(reason).Msg("IDE connection ended")
	}
	s.gone(leaveDropped)
}
