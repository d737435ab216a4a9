// Package logsink puts a bounded queue between the proxy and the writer its
// human-facing lines go to (stderr: a terminal, a pipe, a log shipper).
// That writer may stop reading at any time: a terminal paused with Ctrl-S,
// `sparkdap serve 2>&1 | less` left unscrolled, a shipper that stalls. The
// proxy writes summary lines and log lines while it holds its locks and on
// its connections' read loops, so a write that waited for the reader would
// stop every IDE and executor connection, stopped workers included. A
// Sink's Write never waits for the reader: it queues a copy and returns,
// and one writer goroutine of the Sink's own does the writing. When the
// queue is full the line is dropped and counted, and once the reader has
// caught up and the queue has drained, one line says how many were lost.
package logsink

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxQueued is the byte cap of a Sink made with a cap of 0: some
// thousands of log lines, so a reader that is merely slow loses nothing.
const DefaultMaxQueued = 1 << 20

// Sink is an io.Writer whose Write never blocks on the writer behind it.
//
// Ownership: only the Sink's writer goroutine (run) writes to out, so a
// Write never waits for out; mu guards the queue, its size, the drops not
// yet reported and closed, and nothing runs under mu but that bookkeeping.
// Write may be called from any goroutine, holding any lock: it never calls
// back and never blocks on anything but mu.
type Sink struct {
	out  io.Writer
	name string // what out is, for the drop notice ("stderr")
	max  int

	mu      sync.Mutex
	queue   [][]byte
	queued  int   // bytes in queue
	pending int64 // lines dropped since the last notice
	closed  bool

	dropped atomic.Int64  // lines dropped in all
	wake    chan struct{} // run has work (capacity 1: a wake-up is never lost)
	done    chan struct{} // closed when run returns
}

// New starts a Sink writing to out, queueing at most maxQueued bytes (0
// for DefaultMaxQueued) while out is not being read. name says what out is
// in the notice about dropped lines.
func New(out io.Writer, name string, maxQueued int) *Sink {
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueued
	}
	s := &Sink{out: out, name: name, max: maxQueued, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues a copy of p for out and returns at once. If the queue
// already holds its cap (out is not being read), p is dropped and its lines
// counted instead. It never returns an error: a line the user could not be
// shown is no reason to fail what the proxy was doing.
func (s *Sink) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	if s.closed || s.queued+len(p) > s.max {
		n := int64(max(bytes.Count(p, []byte{'\n'}), 1))
		s.pending += n
		s.mu.Unlock()
		s.dropped.Add(n)
		return len(p), nil
	}
	s.queue = append(s.queue, bytes.Clone(p))
	s.queued += len(p)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped counts the lines dropped so far because out was not being read.
func (s *Sink) Dropped() int64 { return s.dropped.Load() }

// run is the only writer of out: it writes what is queued, in order, and
// after the queue drains reports the lines dropped meanwhile.
func (s *Sink) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		closed := s.closed
		var lost int64
		if len(batch) == 0 {
			lost, s.pending = s.pending, 0
		}
		s.mu.Unlock()
		if lost > 0 {
			fmt.Fprintf(s.out, "[sparkdap: %d log line(s) dropped: %s was not being read]\n", lost, s.name)
		}
		if len(batch) == 0 {
			if closed {
				return
			}
			<-s.wake
			continue
		}
		for i, b := range batch {
			_, _ = s.out.Write(b)
			batch[i] = nil
			s.mu.Lock()
			s.queued -= len(b)
			s.mu.Unlock()
		}
	}
}

// Close stops taking lines and waits at most wait for those queued to be
// written; a reader that is still not reading is not waited for longer
// (the writer goroutine is then left blocked in out's Write until out
// reads or closes). It reports whether everything queued was written.
func (s *Sink) Close(wait time.Duration) bool {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}
