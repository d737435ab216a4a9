package dap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

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
