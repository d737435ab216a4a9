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
//
// A relay that can slow its own source (stop reading the connection the
// bytes come from) need not let a slow peer pile up that much: Queued says
// how much waits for the peer, and WaitBelow waits, bounded, until the
// peer has read enough of it.
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

// writeChunk bounds one write of the flusher: what it took is written in
// pieces of this size, so that Queued goes down, and WaitBelow sees
// progress, while a slow peer reads a large batch, not only once the
// whole batch is written.
const writeChunk = 1 << 20

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

	mu     sync.Mutex
	queue  [][]byte
	queued int // bytes in queue: what the byte cap counts
	// inflight is what the flusher took from queue and has not written
	// yet. It is not counted against the byte cap (it never was: the
	// flusher takes the whole queue at once), but it waits for the peer
	// all the same, so Queued counts it.
	inflight int
	// progressAt is when the bytes waiting for the peer (queued+inflight)
	// last went down, or went up from none: WaitBelow's stall clock.
	progressAt time.Time
	// progress, if not nil, is closed (and reset to nil) when bytes are
	// written or the queue closes: WaitBelow's wake-up. Made by a waiter,
	// so a queue nobody waits on never makes one.
	progress chan struct{}
	flushing bool  // a writer is writing: a sender inline, or the flusher goroutine
	closing  error // CloseAfterFlush's reason: close once the queue is written
	err      error // why the queue closed; nil while open

	done chan struct{}
}

// New starts the write side of conn. No goroutine runs until something is
// sent.
func New(conn net.Conn, opts Options) *Queue { return newQueue(conn, opts, inlineWrites) }

// newQueue is New where a sender may write conn's descriptor itself if
// inline (inlineWrites: the platform has a non-blocking write for it),
// else where every write goes through the flusher.
func newQueue(conn net.Conn, opts Options, inline bool) *Queue {
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	q := &Queue{conn: conn, opts: opts, done: make(chan struct{})}
	if inline {
		q.raw = rawOf(conn)
	}
	if h, ok := conn.(WriteHook); ok {
		q.after = h.AfterWrite
	}
	return q
}

// Conn is the connection the queue writes to (for its reader).
func (q *Queue) Conn() net.Conn { return q.conn }

// WritesInline reports whether a sender may write the connection itself
// (a plain TCP or Unix connection, or a PlainConn of one), and whether
// each write re-arms the connection's WriteHook: otherwise every send is
// handed to a flusher goroutine.
func (q *Queue) WritesInline() (inline, hooked bool) { return q.raw != nil, q.after != nil }

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
	if q.queued+q.inflight == 0 {
		q.progressAt = time.Now()
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
	if n > 0 {
		q.progressed()
	}
	if rest := b[n:]; len(rest) > 0 && q.err == nil {
		if q.queued+q.inflight == 0 {
			q.progressAt = time.Now()
		}
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
// closes the queue if CloseAfterFlush asked for that. It takes the whole
// queue at once (so the byte cap counts only what was sent since) and
// writes it in pieces of writeChunk.
func (q *Queue) flush() {
	var pieces net.Buffers
	for {
		q.mu.Lock()
		batch := q.queue
		q.inflight += q.queued
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
		for len(batch) > 0 {
			piece := pieces[:0]
			piece, batch = takeChunk(piece, batch)
			pieces = piece
			n := 0
			for _, b := range piece {
				n += len(b)
			}
			_, err := piece.WriteTo(q.conn)
			if q.after != nil && q.raw != nil {
				// WriteTo wrote the descriptor (writev), not through
				// conn's Write: what that adds is done here.
				_ = q.raw.Control(q.after)
			}
			q.mu.Lock()
			if err != nil || q.err != nil {
				q.flushing = false
				q.mu.Unlock()
				if err != nil {
					q.Close(fmt.Errorf("write: %w", err))
				}
				return
			}
			q.inflight -= n
			q.progressed()
			q.mu.Unlock()
		}
		clear(pieces[:cap(pieces)]) // let what was written go
	}
}

// takeChunk appends to piece the first writeChunk bytes of batch (cutting
// a buffer if it must) and returns piece and what is left of batch.
func takeChunk(piece net.Buffers, batch [][]byte) (net.Buffers, [][]byte) {
	n := 0
	for len(batch) > 0 && n < writeChunk {
		b := batch[0]
		if k := writeChunk - n; len(b) > k {
			piece = append(piece, b[:k])
			batch[0] = b[k:]
			break
		}
		piece = append(piece, b)
		n += len(b)
		batch = batch[1:]
	}
	return piece, batch
}

// progressed notes, under mu, that bytes reached the peer: WaitBelow's
// stall clock starts again and its waiters look again.
func (q *Queue) progressed() {
	q.progressAt = time.Now()
	if q.progress != nil {
		close(q.progress)
		q.progress = nil
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
	if q.progress != nil {
		close(q.progress)
		q.progress = nil
	}
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

// Queued is how many bytes wait for the peer: queued, or taken by the
// flusher and not written yet. 0 once the queue is closed.
func (q *Queue) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0
	}
	return q.queued + q.inflight
}

// WaitBelow returns once at most n bytes wait for the peer (Queued), the
// queue is closed, abort (may be nil) is closed, or the queue has written
// nothing for stall. It reports whether it had to wait. It costs nothing
// when at most n bytes wait: no goroutine, no timer.
//
// The stall is measured from the queue's last progress (bytes written, or
// bytes waiting after none did), not from the call: once a peer has read
// nothing for stall, every wait returns at once until it reads again, so a
// peer that stopped reading is still cut off by the byte cap, and whoever
// waits is not held by it.
//
// It blocks: call it from a goroutine that may wait (a connection's
// reader), never while holding a lock that a sender or the flusher may
// need.
func (q *Queue) WaitBelow(n int, stall time.Duration, abort <-chan struct{}) (waited bool) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		q.mu.Lock()
		if q.err != nil || q.queued+q.inflight <= n {
			q.mu.Unlock()
			return waited
		}
		left := stall - time.Since(q.progressAt)
		if left <= 0 {
			q.mu.Unlock()
			return waited
		}
		if q.progress == nil {
			q.progress = make(chan struct{})
		}
		progress := q.progress
		q.mu.Unlock()
		waited = true
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-progress:
		case <-timer.C:
		case <-abort:
			return waited
		}
	}
}
