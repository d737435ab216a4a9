package dap

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// errClosed is returned when sending on a connection that has gone away.
var errClosed = errors.New("connection closed")

// errMalformedMessage marks a frame whose body is not a valid DAP message.
var errMalformedMessage = errors.New("malformed message")

// isBadInput reports whether a connection ended because its peer broke the
// protocol (as opposed to leaving), which is worth a warning.
func isBadInput(err error) bool {
	return errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrMessageTooLarge) ||
		errors.Is(err, errMalformedMessage)
}

// defaultMaxQueuedBytes bounds what may wait for a slow reader before the
// connection is dropped, so one stuck peer cannot make the proxy grow without
// bound.
const defaultMaxQueuedBytes = 64 << 20

// wire is one DAP connection. Sends never block: they append to a queue
// that one flusher goroutine at a time, the only writer of conn, drains.
// That lets callers send while holding their own locks. The flusher runs
// only while there is something to write, so an idle connection costs no
// goroutine (thousands of executors sit idle most of the time). The outgoing
// seq counter lives here, so seq order is wire order.
type wire struct {
	conn      net.Conn
	maxQueued int

	mu       sync.Mutex
	seq      int64
	queue    [][]byte
	queued   int
	flushing bool  // a flusher goroutine is running
	closing  error // closeAfterFlush's reason: close once the queue is written
	err      error // why the wire closed; nil while open

	done chan struct{}
}

func newWire(conn net.Conn) *wire {
	return &wire{conn: conn, maxQueued: defaultMaxQueuedBytes, done: make(chan struct{})}
}

// enqueueLocked adds a frame and starts the flusher if none runs.
func (w *wire) enqueueLocked(frame []byte) {
	w.queue = append(w.queue, frame)
	w.queued += len(frame)
	if !w.flushing {
		w.flushing = true
		go w.flush()
	}
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
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return errClosed
	}
	w.seq++
	seq := w.seq
	if onSeq != nil {
		onSeq(seq)
	}
	w.enqueueLocked(appendFrame(nil, withSeq(body, seq)))
	over := w.queued > w.maxQueued
	w.mu.Unlock()
	if over {
		w.close(fmt.Errorf("peer is not reading: over %d bytes queued", w.maxQueued))
		return errClosed
	}
	return nil
}

// withSeq puts "seq" first in an encoded object, without re-encoding it.
func withSeq(body []byte, seq int64) []byte {
	out := make([]byte, 0, len(body)+24)
	out = append(out, `{"seq":`...)
	out = strconv.AppendInt(out, seq, 10)
	if len(body) > 2 { // not "{}"
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}

// flush writes what is queued until the queue is empty, then ends; it
// closes the wire if closeAfterFlush asked for that.
func (w *wire) flush() {
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue, w.queued = nil, 0
		if len(batch) == 0 || w.err != nil {
			w.flushing = false
			closing := w.closing
			w.mu.Unlock()
			if closing != nil {
				w.close(closing)
			}
			return
		}
		w.mu.Unlock()
		bufs := net.Buffers(batch)
		if _, err := bufs.WriteTo(w.conn); err != nil {
			w.mu.Lock()
			w.flushing = false
			w.mu.Unlock()
			w.close(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// close shuts the connection once; the first reason wins.
func (w *wire) close(reason error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	if reason == nil {
		reason = errClosed
	}
	w.err = reason
	w.queue = nil
	w.mu.Unlock()
	close(w.done)
	w.conn.Close()
}

// closeAfterFlush lets what is queued (and what is sent until then) reach
// the peer, then closes. Used when the last word matters (a refusal, a final
// event). It never blocks; a peer that does not read gets flushWait.
func (w *wire) closeAfterFlush(reason error) {
	if reason == nil {
		reason = errClosed
	}
	w.mu.Lock()
	if w.err != nil || w.closing != nil {
		w.mu.Unlock()
		return
	}
	w.closing = reason
	idle := !w.flushing
	w.mu.Unlock()
	if idle {
		w.close(reason)
		return
	}
	// The running flusher closes the wire when it has written the rest.
	_ = w.conn.SetWriteDeadline(time.Now().Add(flushWait))
}

// flushWait bounds how long closeAfterFlush waits for a peer to read.
const flushWait = 2 * time.Second

// waitClosed returns once the wire is closed, its last words written (or
// given up on). A session returns only then: whoever handed it the
// connection may close it right after (the SSH tunnel does), which would
// cut off a refusal or a hello reply still in the queue.
func (w *wire) waitClosed() {
	select {
	case <-w.done:
	case <-time.After(flushWait + time.Second):
		w.close(errors.New("gave up flushing"))
	}
}

// closedErr is why the wire closed, or nil.
func (w *wire) closedErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// sendRaw queues bytes that are not a DAP message (the hello reply).
func (w *wire) sendRaw(b []byte) {
	w.mu.Lock()
	if w.err == nil {
		w.enqueueLocked(b)
	}
	w.mu.Unlock()
}

// readLoop decodes messages until the connection ends and hands each to
// handle, in order, on the caller's goroutine. It returns why it stopped.
func (w *wire) readLoop(maxBytes int, handle func(Message)) error {
	return w.readFrames(NewFrameReader(w.conn, maxBytes), handle)
}

func (w *wire) readFrames(fr *FrameReader, handle func(Message)) error {
	for {
		body, err := fr.ReadFrame()
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
