package quickack

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/wirequeue"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// splitSender answers each 4-byte request with a header and a body sent
// separately, Nagle on: what pydevd does without the wrapper's
// TCP_NODELAY.
func splitSender(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.(*net.TCPConn).SetNoDelay(false)
	go func() {
		req := make([]byte, 4)
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			if _, err := c.Write([]byte("H")); err != nil {
				return
			}
			if _, err := c.Write([]byte("B")); err != nil {
				return
			}
		}
	}()
}

// slowRoundTrips makes rounds request/answer round trips with send and
// counts those, after the warm-up (Linux ACKs the first few segments of a
// connection at once anyway), that took as long as a delayed ACK (40 ms).
func slowRoundTrips(t *testing.T, c net.Conn, send func([]byte) error) (slow, counted int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	ans := make([]byte, 2)
	for i := range 60 {
		start := time.Now()
		if err := send([]byte("req\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, ans); err != nil {
			t.Fatal(err)
		}
		if i >= 20 {
			counted++
			if time.Since(start) >= 35*time.Millisecond {
				slow++
			}
		}
	}
	return slow, counted
}

// TestNoDelayedACKStall: a peer that splits each answer in two sends,
// Nagle on, is not held up by delayed ACKs once its connection is wrapped,
// whether the request goes through the wrapper's Write or through a
// wirequeue (which writes the descriptor itself); unwrapped, most round
// trips take a delayed ACK's 40 ms (checked too, so the test shows the
// stall it guards against is real on this kernel).
func TestNoDelayedACKStall(t *testing.T) {
	testenv.SkipIfShort(t, "a few seconds of round trips")
	for _, tc := range []struct {
		name      string
		wrap      bool
		viaQueue  bool
		wantStall bool
	}{
		{"unwrapped", false, false, true},
		{"wrapped, Write", true, false, false},
		{"wrapped, wirequeue", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := testenv.TCPPair(t)
			splitSender(t, theirs)
			c := ours
			if tc.wrap {
				c = Wrap(ours)
			}
			send := func(b []byte) error { _, err := c.Write(b); return err }
			if tc.viaQueue {
				q := wirequeue.New(c, wirequeue.Options{})
				send = q.Send
			}
			slow, n := slowRoundTrips(t, c, send)
			t.Logf("%d of %d round trips took 35 ms or more", slow, n)
			if stalled := slow > n/2; stalled != tc.wantStall {
				t.Errorf("%d of %d round trips took 35 ms or more; want stalls: %v", slow, n, tc.wantStall)
			}
		})
	}
}
