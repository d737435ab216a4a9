// Package wirequeue is the write side of one connection, shared by the
// proxy's front ends: sends never block and never write; they append to a
// queue that one flusher goroutine at a time, the only writer of the
// connection, drains. That lets callers send while holding their own locks.
// The flusher runs only while there is something to write, so an idle
// connection costs no goroutine (thousands of executors sit idle most of the
// time), and a peer that lets more than a byte cap pile up is cut off, so
// one stuck peer cannot make the proxy grow without bound.
package wirequeue

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned when sending on a queue whose connection has gone.
var ErrClosed = errors.New("connection closed")

// DefaultMaxQueued is the byte cap when Options leave it zero.
const DefaultMaxQueued = 64 << 20

// FlushWait bounds how long CloseAfterFlush waits for a peer to read.
const FlushWait = 2 * time.Second

// Options tune a Queue. Zero values take the defaults.
type Options struct {
	// MaxQueued is how many bytes may wait for a slow reader before the
	// connection is closed (default DefaultMaxQueued).
	MaxQueued int
	// WriteTimeout, if set, bounds each write to the connection; a peer
	// that reads nothing for that long is cut off.
	WriteTimeout time.Duration
}

// Queue owns the writes of one connection.
//
// Ownership: after New, only the flusher goroutine writes to conn; Close
// closes it. mu guards every field below it; nothing runs under mu but the
// queue's own bookkeeping and a caller's Locked function (SendLocked),
// which must not call back into the queue.
type Queue struct {
	conn net.Conn
	opts Options

	mu       sync.Mutex
	queue    [][]byte
	queued   int
	flushing bool  // a flusher goroutine is running
	closing  error // CloseAfterFlush's reason: close once the queue is written
	err      error // why the queue closed; nil while open

	done chan struct{}
}

// New starts the write side of conn. No goroutine runs until something is
// sent.
func New(conn net.Conn, opts Options) *Queue {
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	return &Queue{conn: conn, opts: opts, done: make(chan struct{})}
}

// Conn is the connection the queue writes to (for its reader).
func (q *Queue) Conn() net.Conn { return q.conn }

// Send queues b. It fails with ErrClosed once the queue is closed,
// including when b takes it over its byte cap (which closes it).
func (q *Queue) Send(b []byte) error {
	return q.SendWith(func() []byte { return b })
}

// SendWith queues what build returns, calling build under the queue's lock,
// so what it numbers (a sequence number) reaches the wire in the order it
// numbered it. build must not call the queue; it is not called once the
// queue is closed.
func (q *Queue) SendWith(build func() []byte) error {
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		return ErrClosed
	}
	b := build()
	q.queue = append(q.queue, b)
	q.queued += len(b)
	if !q.flushing {
		q.flushing = true
		go q.flush()
	}
	over := q.queued > q.opts.MaxQueued
	q.mu.Unlock()
	if over {
		q.Close(fmt.Errorf("peer is not reading: over %d bytes queued", q.opts.MaxQueued))
		return ErrClosed
	}
	return nil
}

// flush writes what is queued until the queue is empty, then ends; it
// closes the queue if CloseAfterFlush asked for that.
func (q *Queue) flush() {
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue, q.queued = nil, 0
		if len(batch) == 0 || q.err != nil {
			q.flushing = false
			closing := q.closing
			q.mu.Unlock()
			if closing != nil {
				q.Close(closing)
			}
			return
		}
		q.mu.Unlock()
		if q.opts.WriteTimeout > 0 {
			_ = q.conn.SetWriteDeadline(time.Now().Add(q.opts.WriteTimeout))
		}
		bufs := net.Buffers(batch)
		if _, err := bufs.WriteTo(q.conn); err != nil {
			q.mu.Lock()
			q.flushing = false
			q.mu.Unlock()
			q.Close(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// Close shuts the connection once; the first reason wins. What is still
// queued is dropped.
func (q *Queue) Close(reason error) {
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		return
	}
	if reason == nil {
		reason = ErrClosed
	}
	q.err = reason
	q.queue = nil
	q.mu.Unlock()
	close(q.done)
	q.conn.Close()
}

// CloseAfterFlush lets what is queued (and what is sent until then) reach
// the peer, then closes. Used when the last word matters (a refusal, a
// final event). It never blocks; a peer that does not read gets FlushWait.
func (q *Queue) CloseAfterFlush(reason error) {
	if reason == nil {
		reason = ErrClosed
	}
	q.mu.Lock()
	if q.err != nil || q.closing != nil {
		q.mu.Unlock()
		return
	}
	q.closing = reason
	idle := !q.flushing
	q.mu.Unlock()
	if idle {
		q.Close(reason)
		return
	}
	// The running flusher closes the queue when it has written the rest.
	_ = q.conn.SetWriteDeadline(time.Now().Add(FlushWait))
}

// WaitClosed returns once the queue is closed, its last words written (or
// given up on). Whoever handed a session its connection may close it right
// after the session returns (the SSH tunnel does), which would cut off a
// reply still in the queue; sessions return only after this.
func (q *Queue) WaitClosed() {
	select {
	case <-q.done:
	case <-time.After(FlushWait + time.Second):
		q.Close(errors.New("gave up flushing"))
	}
}

// Done is closed when the queue closes.
func (q *Queue) Done() <-chan struct{} { return q.done }

// Err is why the queue closed, or nil while it is open.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Flushing reports whether a flusher goroutine runs (for tests: an idle
// queue has none).
func (q *Queue) Flushing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.flushing
}
