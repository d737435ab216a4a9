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

// wire is one DAP connection. Sends never block: they append to a queue that
// a single writer goroutine, the only one that writes to conn, drains. That
// lets callers send while holding their own locks. The outgoing seq counter
// lives here, so seq order is wire order.
type wire struct {
	conn      net.Conn
	maxQueued int

	mu      sync.Mutex
	seq     int64
	queue   [][]byte
	queued  int
	writing bool  // writeLoop is writing a batch it took from queue
	closing error // closeAfterFlush's reason: close once the queue is written
	err     error // why the wire closed; nil while open

	wake chan struct{}
	done chan struct{}
}

func newWire(conn net.Conn) *wire {
	w := &wire{conn: conn, maxQueued: defaultMaxQueuedBytes,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.writeLoop()
	return w
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
	frame := appendFrame(nil, withSeq(body, seq))
	w.queue = append(w.queue, frame)
	w.queued += len(frame)
	over := w.queued > w.maxQueued
	w.mu.Unlock()
	if over {
		w.close(fmt.Errorf("peer is not reading: over %d bytes queued", w.maxQueued))
		return errClosed
	}
	select {
	case w.wake <- struct{}{}:
	default:
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

func (w *wire) writeLoop() {
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue, w.queued = nil, 0
		w.writing = len(batch) > 0
		closing := w.closing
		w.mu.Unlock()
		if len(batch) == 0 {
			if closing != nil {
				w.close(closing)
				return
			}
			select {
			case <-w.wake:
				continue
			case <-w.done:
				return
			}
		}
		bufs := net.Buffers(batch)
		_, err := bufs.WriteTo(w.conn)
		w.mu.Lock()
		w.writing = false
		w.mu.Unlock()
		if err != nil {
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
	idle := len(w.queue) == 0 && !w.writing
	w.mu.Unlock()
	if idle {
		w.close(reason)
		return
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(flushWait))
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
		w.queue = append(w.queue, b)
		w.queued += len(b)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
