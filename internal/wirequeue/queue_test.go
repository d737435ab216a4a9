package wirequeue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

func waitIdle(t *testing.T, q *Queue) {
	t.Helper()
	for range 500 {
		if !q.Flushing() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the flusher never ended")
}

// TestNoGoroutineWhenIdle: an idle queue runs no goroutine; one runs while
// there is something to write and ends when it is written.
func TestNoGoroutineWhenIdle(t *testing.T) {
	ours, theirs := testenv.TCPPair(t)
	before := runtime.NumGoroutine()
	qs := make([]*Queue, 200)
	for i := range qs {
		qs[i] = New(ours, Options{})
	}
	if q := qs[0]; q.Flushing() {
		t.Fatal("a new queue is flushing")
	}
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Fatalf("200 idle queues cost %d goroutines", n)
	}
	q := qs[0]
	for _, s := range []string{"one ", "two ", "three\n"} {
		if err := q.Send([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	theirs.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len("one two three\n"))
	if _, err := io.ReadFull(theirs, got); err != nil || string(got) != "one two three\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	waitIdle(t, q)
}

// TestByteCap: a peer that reads nothing is cut off once more than
// MaxQueued bytes wait, and later sends fail.
func TestByteCap(t *testing.T) {
	ours, _ := testenv.TCPPair(t)
	q := New(ours, Options{MaxQueued: 1 << 20})
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var err error
	for i := 0; i < 4096 && err == nil; i++ { // 256 MB at most; the socket buffers far less
		err = q.Send(chunk)
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("send never failed on a peer that does not read: %v", err)
	}
	if e := q.Err(); e == nil || !strings.Contains(e.Error(), "not reading") {
		t.Errorf("closed for %v, want the byte cap", e)
	}
	if err := q.Send([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: %v", err)
	}
	select {
	case <-q.Done():
	case <-time.After(10 * time.Second):
		t.Error("Done not closed")
	}
}

// TestCloseAfterFlush: the last words reach the peer before the close.
func TestCloseAfterFlush(t *testing.T) {
	ours, theirs := testenv.TCPPair(t)
	q := New(ours, Options{WriteTimeout: 10 * time.Second})
	n := 0
	for i := range 100 {
		if err := q.SendWith(func() []byte { n++; return []byte{byte('a' + i%26)} }); err != nil {
			t.Fatal(err)
		}
	}
	q.CloseAfterFlush(errors.New("bye"))
	q.WaitClosed()
	theirs.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(theirs)
	if err != nil || len(got) != 100 || n != 100 || got[99] != byte('a'+99%26) {
		t.Fatalf("peer read %q (%v), built %d", got, err, n)
	}
	if e := q.Err(); e == nil || e.Error() != "bye" {
		t.Errorf("closed for %v", e)
	}
	if q.Flushing() {
		t.Error("flusher still running after close")
	}
}

// TestSendWritesInline: a send to an idle TCP connection is written by the
// sender before Send returns (one non-blocking write), with no flusher
// goroutine left behind; a connection whose Write is not its file
// descriptor's (a pipe) still goes through the flusher. Where the platform
// has no inline writes (off Unix) only the delivery is checked: every send
// goes through the flusher there, so one may still run when Send returns.
func TestSendWritesInline(t *testing.T) {
	if !inlineWrites {
		t.Log("no inline writes on this platform (raw_other.go): checking delivery through the flusher only")
	}
	ours, theirs := testenv.TCPPair(t)
	q := New(ours, Options{})
	for i := range 50 {
		if err := q.Send([]byte{byte('a' + i%26)}); err != nil {
			t.Fatal(err)
		}
		if inlineWrites && q.Flushing() {
			t.Fatalf("send %d: a writer still runs after Send returned", i)
		}
	}
	theirs.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 50)
	if _, err := io.ReadFull(theirs, got); err != nil || got[49] != byte('a'+49%26) {
		t.Fatalf("read %q, %v", got, err)
	}
	waitIdle(t, q)

	p1, p2 := net.Pipe()
	t.Cleanup(func() { p1.Close(); p2.Close() })
	pq := New(p1, Options{})
	if err := pq.Send([]byte("x")); err != nil {
		t.Fatal(err)
	}
	p2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(p2, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, pq)
}

// TestOrderInlineAndQueued: senders racing each other, to a peer that
// reads slowly enough that the socket buffer fills (so inline writes end
// partway and the flusher takes over), get every byte to the peer once and
// in the order build numbered them; and the same where a platform has no
// inline writes (off Unix) and the flusher writes everything.
func TestOrderInlineAndQueued(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline %v", inline), func(t *testing.T) {
			if inline && !inlineWrites {
				t.Skip("no inline writes on this platform (raw_other.go: no raw descriptor to write)")
			}
			testOrder(t, inline)
		})
	}
}

func testOrder(t *testing.T, inline bool) {
	ours, theirs := testenv.TCPPair(t)
	q := newQueue(ours, Options{}, inline)
	if got, _ := q.WritesInline(); got != inline {
		t.Fatalf("WritesInline %v, want %v", got, inline)
	}
	const senders, each, size = 4, 200, 4 << 10
	var next uint32
	done := make(chan error, senders)
	for range senders {
		go func() {
			for range each {
				if err := q.SendWith(func() []byte {
					b := bytes.Repeat([]byte{0}, size)
					n := next
					next++
					for i := 0; i+4 <= size; i += 4 {
						b[i], b[i+1], b[i+2], b[i+3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
					}
					return b
				}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	theirs.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, size)
	for want := uint32(0); want < senders*each; want++ {
		if want%64 == 0 {
			time.Sleep(2 * time.Millisecond) // let the socket buffer fill now and then
		}
		if _, err := io.ReadFull(theirs, buf); err != nil {
			t.Fatalf("message %d: %v", want, err)
		}
		for i := 0; i+4 <= size; i += 4 {
			got := uint32(buf[i])<<24 | uint32(buf[i+1])<<16 | uint32(buf[i+2])<<8 | uint32(buf[i+3])
			if got != want {
				t.Fatalf("message %d: byte %d belongs to message %d", want, i, got)
			}
		}
	}
	for range senders {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, q)
}

// sendDuringWrite is a plain TCP connection whose AfterWrite runs during
// the queue's inline write, on the sender's goroutine, after the socket
// took what it could and before the queue decides where the rest goes.
type sendDuringWrite struct {
	*net.TCPConn
	during func()
}

func (c *sendDuringWrite) PlainConn() net.Conn { return c.TCPConn }

func (c *sendDuringWrite) AfterWrite(uintptr) {
	if f := c.during; f != nil {
		c.during = nil
		f()
	}
}

// TestInlineRestGoesFirst: what the socket did not take of an inline write
// is written before a message another sender queued while that write ran.
func TestInlineRestGoesFirst(t *testing.T) {
	ours, theirs := testenv.TCPPair(t)
	tcp := ours.(*net.TCPConn)
	// Small buffers so the first message cannot fit at once.
	if err := tcp.SetWriteBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	if err := theirs.(*net.TCPConn).SetReadBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	conn := &sendDuringWrite{TCPConn: tcp}
	q := New(conn, Options{})
	if inline, hooked := q.WritesInline(); !inline || !hooked {
		t.Skipf("no inline writes here (inline %v, hooked %v)", inline, hooked)
	}
	first := bytes.Repeat([]byte{'a'}, 256<<10)
	second := bytes.Repeat([]byte{'b'}, 1<<10)
	var duringErr error
	conn.during = func() { duringErr = q.Send(second) }
	if err := q.Send(first); err != nil {
		t.Fatal(err)
	}
	if duringErr != nil {
		t.Fatal(duringErr)
	}
	theirs.SetReadDeadline(time.Now().Add(60 * time.Second))
	got := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(theirs, got); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexByte(got, 'b'); i != len(first) {
		t.Fatalf("the second message starts at byte %d, want %d: the first's rest went after it", i, len(first))
	}
	waitIdle(t, q)
}
