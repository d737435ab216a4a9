package wirequeue

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// backedUp returns a queue whose peer reads nothing (until the test
// reads theirs) with about total bytes waiting for it, sent in 64 KiB
// messages; small socket buffers keep most of it in the queue.
func backedUp(t *testing.T, total int) (*Queue, net.Conn) {
	t.Helper()
	ours, theirs := testenv.TCPPair(t)
	_ = ours.(*net.TCPConn).SetWriteBuffer(64 << 10)
	_ = theirs.(*net.TCPConn).SetReadBuffer(64 << 10)
	q := New(ours, Options{})
	msg := make([]byte, 64<<10)
	for range total / len(msg) {
		if err := q.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.Queued(); n < total/2 {
		t.Fatalf("%d bytes queued of %d sent to a peer that reads nothing", n, total)
	}
	return q, theirs
}

// TestWaitBelowAtOnceWhenUnder: with no more than n bytes waiting,
// WaitBelow returns at once and says it did not wait.
func TestWaitBelowAtOnceWhenUnder(t *testing.T) {
	ours, _ := testenv.TCPPair(t)
	q := New(ours, Options{})
	start := time.Now()
	if q.WaitBelow(0, 10*time.Second, nil) {
		t.Fatal("an empty queue waited")
	}
	if err := q.Send([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if q.WaitBelow(1<<20, 10*time.Second, nil) {
		t.Fatal("a queue under n waited")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestWaitBelowReturnsAsPeerReads: while the peer reads, WaitBelow returns
// once at most n bytes wait, long before its stall bound, and Queued
// counts the bytes the flusher took but has not written.
func TestWaitBelowReturnsAsPeerReads(t *testing.T) {
	q, theirs := backedUp(t, 16<<20)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = theirs.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.Copy(io.Discard, theirs)
	}()
	start := time.Now()
	if !q.WaitBelow(4<<20, 15*time.Second, nil) {
		t.Fatal("did not wait with 16 MiB queued")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("returned after %v: the peer's reading was not seen", d)
	}
	if n := q.Queued(); n > 4<<20 {
		t.Fatalf("returned with %d bytes queued, want at most 4 MiB", n)
	}
	if err := q.Err(); err != nil {
		t.Fatalf("queue closed: %v", err)
	}
}

// TestWaitBelowGivesUpOnStall: a peer that reads nothing holds a waiter
// for the stall bound only; from then on, waits return at once until the
// peer reads again (the byte cap is what deals with it).
func TestWaitBelowGivesUpOnStall(t *testing.T) {
	q, _ := backedUp(t, 8<<20)
	start := time.Now()
	if !q.WaitBelow(1<<20, 500*time.Millisecond, nil) {
		t.Fatal("did not wait with 8 MiB queued")
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Fatalf("gave up after %v, want about 500ms", d)
	}
	start = time.Now()
	q.WaitBelow(1<<20, 500*time.Millisecond, nil)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("a second wait on a stalled peer took %v, want at once", d)
	}
	if q.Err() != nil {
		t.Fatalf("queue closed: %v", q.Err())
	}
}

// TestWaitBelowEndsOnCloseOrAbort: closing the queue, or the caller's
// abort channel, ends a wait.
func TestWaitBelowEndsOnCloseOrAbort(t *testing.T) {
	for _, how := range []string{"close", "abort"} {
		t.Run(how, func(t *testing.T) {
			q, _ := backedUp(t, 8<<20)
			abort := make(chan struct{})
			done := make(chan bool, 1)
			go func() { done <- q.WaitBelow(1<<20, time.Minute, abort) }()
			time.Sleep(100 * time.Millisecond)
			if how == "close" {
				q.Close(nil)
			} else {
				close(abort)
			}
			select {
			case waited := <-done:
				if !waited {
					t.Fatal("did not wait")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("still waiting")
			}
			if how == "close" && q.Queued() != 0 {
				t.Fatalf("a closed queue has %d bytes queued", q.Queued())
			}
		})
	}
}

// TestLargeMessageWrittenInPieces: one message larger than a write piece
// arrives whole and in order with the messages around it.
func TestLargeMessageWrittenInPieces(t *testing.T) {
	ours, theirs := testenv.TCPPair(t)
	q := New(ours, Options{})
	big := make([]byte, 3*writeChunk+123)
	for i := range big {
		big[i] = byte(i % 251)
	}
	want := append(append([]byte("head"), big...), "tail"...)
	for _, b := range [][]byte{[]byte("head"), big, []byte("tail")} {
		if err := q.Send(b); err != nil {
			t.Fatal(err)
		}
	}
	_ = theirs.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(theirs, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("bytes arrived altered or out of order")
	}
	waitIdle(t, q)
	if n := q.Queued(); n != 0 {
		t.Fatalf("%d bytes queued after all were read", n)
	}
}
