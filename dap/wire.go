package dap

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/internal/quickack"
	"github.com/sparkdap/sparkdap/internal/wirequeue"
)

// DefaultMaxMessageBytes bounds one message body unless Config says
// otherwise; anything larger closes the offending connection only.
const DefaultMaxMessageBytes = dapwire.DefaultMaxMessageBytes

// Until a peer is admitted (an executor presented a token that could be
// valid, an IDE attached) its messages are bounded far below
// MaxMessageBytes, so that the connections waiting for admission (up to
// Config.MaxUnadmitted of them) cannot make the proxy hold much: a peer
// that holds no token gets no more than this, each byte of which it must
// send (bodies grow as they arrive: dapwire.FrameReader).
const (
	// maxUnauthorizedMessageBytes: an executor says nothing before its
	// token but its answer to pydevdAuthorize (some 200 bytes).
	maxUnauthorizedMessageBytes = 4 << 10
	// maxUnattachedMessageBytes: an IDE sends initialize and attach before
	// it is attached; attach carries the user's launch configuration
	// (VS Code's is under 1 KiB), hence the margin.
	maxUnattachedMessageBytes = 64 << 10
)

// errClosed is returned when sending on a connection that has gone away.
var errClosed = wirequeue.ErrClosed

// errMalformedMessage marks a frame whose body is not a valid DAP message.
var errMalformedMessage = errors.New("malformed message")

// isBadInput reports whether a connection ended because its peer broke the
// protocol (as opposed to leaving), which is worth a warning.
func isBadInput(err error) bool {
	return errors.Is(err, dapwire.ErrMalformedFrame) || errors.Is(err, dapwire.ErrMessageTooLarge) ||
		errors.Is(err, errMalformedMessage)
}

// wire is one DAP connection: its write queue (wirequeue: sends never
// block; one writer at a time, the sender itself with one non-blocking
// write when nobody is writing, else a flusher goroutine that runs only
// while there is something to write; a byte cap) and the outgoing seq
// counter, which is assigned
// under the queue's lock so seq order is wire order. The connection's reader
// is whoever serves the session (readFrames).
type wire struct {
	conn net.Conn // what the reader reads
	// raw is conn unwrapped, read from once the peer sent its first
	// message (the port's budget has seen it): nil when conn is raw.
	raw net.Conn
	q   *wirequeue.Queue

	seq int64 // guarded by q's lock: only touched inside SendWith
}

// newWire reads from served and writes to conn, the same connection:
// served is conn as the port's budget hands it over (connbudget's
// wrapper, which sees the reads), and the queue gets conn itself, since
// it writes the socket on the sender's goroutine, and re-arms
// TCP_QUICKACK, only on a connection it knows (a plain TCP or quickack
// one): through the wrapper every message went to a new flusher goroutine
// (a hand-off per message) and the executor's socket had no QUICKACK.
// The executor's side re-arms TCP_QUICKACK after each write (quick).
func newWire(served, conn net.Conn, quick bool) *wire {
	out := conn
	if quick {
		out = quickack.Wrap(conn)
	}
	w := &wire{conn: served, q: wirequeue.New(out, wirequeue.Options{})}
	if served != conn {
		w.raw = conn
	}
	return w
}

// send assigns the next seq to m and queues it. onSeq, if set, runs with the
// seq before the message can reach the peer, so a pending-response entry is
// in place before any answer can arrive.
func (w *wire) send(m Message, onSeq func(seq int64)) error {
	delete(m, "seq")
	return w.sendEncoded(m, nil, onSeq)
}

// sendWithBody is send for a message whose body is already encoded (a
// cached merged answer): head gets "body" without decoding it again.
func (w *wire) sendWithBody(head Message, body []byte) error {
	delete(head, "seq")
	delete(head, "body")
	return w.sendEncoded(head, body, nil)
}

func (w *wire) sendEncoded(m Message, body []byte, onSeq func(seq int64)) error {
	enc, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode %s: %w", describe(m), err)
	}
	return w.q.SendWith(func() []byte {
		w.seq++
		if onSeq != nil {
			onSeq(w.seq)
		}
		return frameWithSeq(enc, w.seq, body)
	})
}

var (
	seqKey     = []byte(`{"seq":`)
	comma      = []byte(",")
	bodyKey    = []byte(`,"body":`)
	closeBrace = []byte("}")
)

// frameWithSeq frames the encoded object obj with "seq" put first and, if
// body is not nil, the encoded body as its "body", in one buffer: one copy
// of each. The body may be a merged answer of every executor's threads,
// sent on every stop.
func frameWithSeq(obj []byte, seq int64, body []byte) []byte {
	var num [20]byte
	s := strconv.AppendInt(num[:0], seq, 10)
	fields := obj[1 : len(obj)-1] // without its braces
	var sep, key []byte
	if len(fields) > 0 {
		sep = comma
	}
	if body != nil {
		key = bodyKey
	}
	return dapwire.AppendFrame(nil, seqKey, s, sep, fields, key, body, closeBrace)
}

// close shuts the connection once; the first reason wins.
func (w *wire) close(reason error) { w.q.Close(reason) }

// closeAfterFlush lets what is queued reach the peer, then closes.
func (w *wire) closeAfterFlush(reason error) { w.q.CloseAfterFlush(reason) }

// waitClosed returns once the wire is closed, its last words written (or
// given up on).
func (w *wire) waitClosed() { w.q.WaitClosed() }

// closedErr is why the wire closed, or nil.
func (w *wire) closedErr() error { return w.q.Err() }

// sendRaw queues bytes that are not a DAP message (the hello reply).
func (w *wire) sendRaw(b []byte) { _ = w.q.Send(b) }

// readFrames decodes messages until the connection ends and hands each to
// handle, in order, on the caller's goroutine. It returns why it stopped.
func (w *wire) readFrames(fr *dapwire.FrameReader, decode func([]byte) (Message, error), handle func(Message)) error {
	for {
		var body []byte
		err := fr.Wait()
		if err == nil {
			body, err = fr.ReadFrame()
		}
		if err != nil {
			if closed := w.closedErr(); closed != nil {
				return closed
			}
			return err
		}
		m, err := decode(body)
		if err != nil {
			return fmt.Errorf("%w: %w", errMalformedMessage, err)
		}
		handle(m)
	}
}

// firstTells is handle that, before the first message it handles, calls
// progressed (if set), so the connection's budget learns the peer sent a
// whole message, and has fr read the connection unwrapped from then on
// (the budget's wrapper has seen the peer speak; a frame less under an
// idle reader's park). For the reader goroutine only. Not inlined, so
// its locals stay out of the reader's frames.
//
//go:noinline
func (w *wire) firstTells(fr *dapwire.FrameReader, progressed func(), handle func(Message)) func(Message) {
	if progressed == nil && w.raw == nil {
		return handle
	}
	first := true
	return func(m Message) {
		if first {
			first = false
			if w.raw != nil {
				fr.ReadFromNext(w.raw)
			}
			if progressed != nil {
				progressed()
			}
		}
		handle(m)
	}
}

// describe names a message for logs.
func describe(m Message) string {
	switch m.Type() {
	case "event":
		return "event " + m.Event()
	case "response":
		return "response " + m.Command()
	}
	return m.Type() + " " + m.Command()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
