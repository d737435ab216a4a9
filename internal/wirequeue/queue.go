// Package wirequeue is the write side of one connection, shared by the
// proxy's front ends: sends never block. When nothing is being written, a
// send writes on the caller's goroutine with one non-blocking write, which
// never waits for the peer; what that write leaves (a full socket buffer),
// and whatever is sent while a write is in progress, goes to a queue that
// one flusher goroutine at a time drains. Either way one writer at a time
// owns the connection, and bytes reach it in the order they were sent. That
// lets callers send while holding their own locks.
//
// Writing on the caller's goroutine saves a request relayed through the
// proxy two goroutine hand-offs (each a futex wake-up).
// The flusher runs only while there is something left to write, so an idle
// connection costs no goroutine (thousands of executors sit idle most of
// the time), and a peer that lets more than a byte cap pile up is cut off,
// so one stuck peer cannot make the proxy grow without bound.
package wirequeue

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned when sending on a queue whose connection has gone.
var ErrClosed = errors.New("connection closed")

// DefaultMaxQueued is the byte cap when Options leave it zero.
const DefaultMaxQueued = 64 << 20

// FlushWait bounds how long CloseAfterFlush waits for a peer to read.
const FlushWait = 2 * time.Second

// WriteHook is a connection that wants a call with its file descriptor
// after each write the queue makes to it (quickack re-arms TCP_QUICKACK,
// which sending data undoes).
type WriteHook interface {
	AfterWrite(fd uintptr)
}

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
// Ownership: after New, only the writer writes to conn: the sender that
// found nobody writing, for its one non-blocking write, or else the flusher
// goroutine; flushing says one is. Close closes conn. mu guards every field
// below it; nothing runs under mu but the queue's own bookkeeping and a
// caller's build function (SendWith), which must not call back into the
// queue.
type Queue struct {
	conn net.Conn
	opts Options
	// raw is conn's file descriptor when a sender may write it itself
	// (rawOf); nil: every write goes through the flusher.
	raw syscall.RawConn
	// after is conn's WriteHook, or nil.
	after func(fd uintptr)

	mu       sync.Mutex
	queue    [][]byte
	queued   int
	flushing bool  // a writer is writing: a sender inline, or the flusher goroutine
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
	q := &Queue{conn: conn, opts: opts, raw: rawOf(conn), done: make(chan struct{})}
	if h, ok := conn.(WriteHook); ok {
		q.after = h.AfterWrite
	}
	return q
}

// Conn is the connection the queue writes to (for its reader).
func (q *Queue) Conn() net.Conn { return q.conn }

// Send queues b. It fails with ErrClosed once the queue is closed,
// including when b takes it over its byte cap (which closes it).
func (q *Queue) Send(b []byte) error {
	return q.SendWith(func() []byte { return b })
}

// SendWith sends what build returns, calling build under the queue's lock,
// so what it numbers (a sequence number) reaches the wire in the order it
// numbered it. build must not call the queue; it is not called once the
// queue is closed. If nothing is being written, it writes on the caller's
// goroutine, without blocking; otherwise it queues.
func (q *Queue) SendWith(build func() []byte) error {
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		return ErrClosed
	}
	b := build()
	if q.raw != nil && !q.flushing && q.closing == nil {
		q.flushing = true // this sender is the writer until writeInline ends
		q.mu.Unlock()
		return q.writeInline(b)
	}
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

// writeInline writes b with one non-blocking write, as the writer (the
// caller set flushing). What the socket did not take goes first in the
// queue, ahead of what others queued meanwhile, and a flusher takes over.
func (q *Queue) writeInline(b []byte) error {
	n, err := writeNonblocking(q.raw, b, q.after)
	if err != nil && n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		// A flusher's write deadline left on conn, now past: not the
		// peer's fault; the flusher sets a fresh one.
		err = nil
	}
	if err != nil {
		q.mu.Lock()
		q.flushing = false
		q.mu.Unlock()
		q.Close(fmt.Errorf("write: %w", err))
		return ErrClosed
	}
	q.mu.Lock()
	if rest := b[n:]; len(rest) > 0 && q.err == nil {
		q.queue = append([][]byte{rest}, q.queue...)
		q.queued += len(rest)
	}
	if len(q.queue) == 0 || q.err != nil {
		q.flushing = false
		closing := q.closing // CloseAfterFlush, called while this wrote, left the close to the writer
		q.mu.Unlock()
		if closing != nil {
			q.Close(closing)
		}
		return nil
	}
	over := q.queued > q.opts.MaxQueued
	q.mu.Unlock()
	go q.flush() // flushing stays set: the flusher is the writer now
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
		_, err := bufs.WriteTo(q.conn)
		if q.after != nil && q.raw != nil {
			// WriteTo wrote the descriptor (writev), not through
			// conn's Write: what that adds is done here.
			_ = q.raw.Control(q.after)
		}
		if err != nil {
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

// Flushing reports whether a writer is writing: a flusher goroutine, or a
// sender's inline write (for tests: an idle queue has no goroutine).
func (q *Queue) Flushing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.flushing
}
