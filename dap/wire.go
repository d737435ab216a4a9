package dap

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/sparkdap/sparkdap/internal/wirequeue"
)

// errClosed is returned when sending on a connection that has gone away.
var errClosed = wirequeue.ErrClosed

// errMalformedMessage marks a frame whose body is not a valid DAP message.
var errMalformedMessage = errors.New("malformed message")

// isBadInput reports whether a connection ended because its peer broke the
// protocol (as opposed to leaving), which is worth a warning.
func isBadInput(err error) bool {
	return errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrMessageTooLarge) ||
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
	conn net.Conn
	q    *wirequeue.Queue

	seq int64 // guarded by q's lock: only touched inside SendWith
}

func newWire(conn net.Conn) *wire {
	return &wire{conn: conn, q: wirequeue.New(conn, wirequeue.Options{})}
}

// send assigns the next seq to m and queues it. onSeq, if set, runs with the
// seq before the message can reach the peer, so a pending-response entry is
// in place before any answer can arrive.
func (w *wire) send(m Message, onSeq func(seq int64)) error {
	delete(m, "seq")
	body, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode %s: %w", describe(m), err)
	}
	return w.q.SendWith(func() []byte {
		w.seq++
		if onSeq != nil {
			onSeq(w.seq)
		}
		return frameWithSeq(body, w.seq)
	})
}

// frameWithSeq frames an encoded object with "seq" put first, in one
// buffer: one copy of the body, not two.
func frameWithSeq(body []byte, seq int64) []byte {
	var num [20]byte
	s := strconv.AppendInt(num[:0], seq, 10)
	n := len(`{"seq":`) + len(s) + len(body) - 1
	if len(body) > 2 { // not "{}"
		n++
	}
	out := make([]byte, 0, len("Content-Length: \r\n\r\n")+20+n)
	out = append(out, "Content-Length: "...)
	out = strconv.AppendInt(out, int64(n), 10)
	out = append(out, "\r\n\r\n{\"seq\":"...)
	out = append(out, s...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}

// sendWithBody is send for a message whose body is already encoded (a
// cached merged answer): head gets "body" without decoding it again.
func (w *wire) sendWithBody(head Message, body []byte) error {
	delete(head, "seq")
	delete(head, "body")
	enc, err := head.Encode()
	if err != nil {
		return fmt.Errorf("encode %s: %w", describe(head), err)
	}
	// One copy of body, straight into the frame: it may be a merged
	// answer of every executor's threads, sent on every stop.
	return w.q.SendWith(func() []byte {
		w.seq++
		var seq [20]byte
		s := strconv.AppendInt(seq[:0], w.seq, 10)
		n := len(`{"seq":,`) + len(s) + len(enc) - 2 + len(`,"body":`) + len(body) + 1
		out := make([]byte, 0, n+32)
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, int64(n), 10)
		out = append(out, "\r\n\r\n{\"seq\":"...)
		out = append(out, s...)
		out = append(out, ',')
		out = append(out, enc[1:len(enc)-1]...)
		out = append(out, `,"body":`...)
		out = append(out, body...)
		return append(out, '}')
	})
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
func (w *wire) readFrames(fr *FrameReader, handle func(Message)) error {
	for {
		var body []byte
		err := fr.wait()
		if err == nil {
			body, err = fr.ReadFrame()
		}
		if err != nil {
			if closed := w.closedErr(); closed != nil {
				return closed
			}
			return err
		}
		m, err := DecodeMessage(body)
		if err != nil {
			return fmt.Errorf("%w: %w", errMalformedMessage, err)
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
