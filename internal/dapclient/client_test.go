package dapclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// fakeAdapter is the far end of a net.Pipe that a test scripts by hand.
type fakeAdapter struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func newPair(t *testing.T) (*Client, *fakeAdapter) {
	t.Helper()
	// Loopback TCP rather than net.Pipe: a pipe write blocks until the other
	// side reads, which would serialise the scripted exchange.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, &fakeAdapter{t: t, conn: b, r: bufio.NewReader(b)}
}

func (f *fakeAdapter) send(msg map[string]any) {
	f.t.Helper()
	content, err := json.Marshal(msg)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := dap.WriteBaseMessage(f.conn, content); err != nil {
		f.t.Fatalf("fake adapter write: %v", err)
	}
}

func (f *fakeAdapter) recv() map[string]any {
	f.t.Helper()
	content, err := dap.ReadBaseMessage(f.r)
	if err != nil {
		f.t.Fatalf("fake adapter read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(content, &m); err != nil {
		f.t.Fatal(err)
	}
	return m
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRequestUnknownCommandAndOutOfOrderResponses(t *testing.T) {
	ctx := testCtx(t, 5*time.Second)
	c, f := newPair(t)

	first, err := c.Send(ctx, "pydevdAuthorize", map[string]any{"debugServerAccessToken": nil})
	if err != nil {
		t.Fatal(err)
	}
	req1 := f.recv()
	second, err := c.Send(ctx, "threads", nil)
	if err != nil {
		t.Fatal(err)
	}
	req2 := f.recv()
	if req1["command"] != "pydevdAuthorize" || req2["command"] != "threads" || req1["seq"] == req2["seq"] {
		t.Fatalf("unexpected requests %v / %v", req1, req2)
	}
	// Answer in reverse order: each response must find its own request.
	f.send(map[string]any{"seq": 1, "type": "response", "request_seq": req2["seq"], "command": "threads",
		"success": false, "message": "nope"})
	f.send(map[string]any{"seq": 2, "type": "response", "request_seq": req1["seq"], "command": "pydevdAuthorize",
		"success": true, "body": map[string]any{"clientAccessToken": "T"}})

	r1, err := first.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ ClientAccessToken string }
	if err := r1.Decode(&body); err != nil || body.ClientAccessToken != "T" {
		t.Fatalf("pydevdAuthorize body %s: %v", r1.Body, err)
	}
	r2, err := second.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Success || r2.Err() == nil || !strings.Contains(r2.Err().Error(), "nope") {
		t.Fatalf("threads response %+v, Err %v", r2, r2.Err())
	}
}

func TestEventsAreLoggedBeforeAnyoneWaits(t *testing.T) {
	ctx := testCtx(t, 5*time.Second)
	c, f := newPair(t)

	for i, id := range []int{1, 2, 3} {
		f.send(map[string]any{"seq": i + 1, "type": "event", "event": "stopped",
			"body": map[string]any{"reason": "breakpoint", "threadId": id}})
	}
	f.send(map[string]any{"seq": 4, "type": "event", "event": "debugpyAttach", "body": map[string]any{"x": 1}})

	// Out of order on purpose: the match picks thread 3 first, then the
	// plain waits get the remaining ones oldest first.
	ev, err := c.WaitEvent(ctx, "stopped", func(b json.RawMessage) bool { return strings.Contains(string(b), `"threadId":3`) })
	if err != nil {
		t.Fatal(err)
	}
	var s dap.StoppedEventBody
	if err := ev.Decode(&s); err != nil || s.ThreadId != 3 {
		t.Fatalf("got %s: %v", ev.Body, err)
	}
	for _, want := range []int{1, 2} {
		s, err := c.StoppedEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.ThreadId != want {
			t.Fatalf("stopped threadId %d, want %d", s.ThreadId, want)
		}
	}
	if _, err := c.WaitEvent(ctx, "debugpyAttach", nil); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.StoppedEvent(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fourth stopped: %v, want deadline exceeded", err)
	}
	if n := len(c.Events()); n != 4 {
		t.Fatalf("Events() has %d entries, want 4", n)
	}
}

func TestReverseRequests(t *testing.T) {
	ctx := testCtx(t, 5*time.Second)
	c, f := newPair(t)

	f.send(map[string]any{"seq": 1, "type": "request", "command": "runInTerminal", "arguments": map[string]any{}})
	if m := f.recv(); m["type"] != "response" || m["success"] != false || m["request_seq"] != float64(1) {
		t.Fatalf("default answer %v", m)
	}
	c.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
		return command == "runInTerminal", map[string]any{"processId": 42}
	})
	f.send(map[string]any{"seq": 2, "type": "request", "command": "runInTerminal", "arguments": map[string]any{}})
	m := f.recv()
	if m["success"] != true || m["command"] != "runInTerminal" {
		t.Fatalf("hooked answer %v", m)
	}
	if body, _ := m["body"].(map[string]any); body["processId"] != float64(42) {
		t.Fatalf("hooked answer body %v", m)
	}
	_ = ctx
}

func TestCloseReleasesWaiters(t *testing.T) {
	ctx := testCtx(t, 5*time.Second)
	c, f := newPair(t)

	p, err := c.Send(ctx, "threads", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.recv()
	evErr := make(chan error, 1)
	go func() {
		_, err := c.WaitEvent(ctx, "stopped", nil)
		evErr <- err
	}()
	f.conn.Close() // the adapter hangs up
	if _, err := p.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("pending request: %v, want ErrClosed", err)
	}
	if err := <-evErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("event waiter: %v, want ErrClosed", err)
	}
	if _, err := c.Request(ctx, "threads", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after close: %v, want ErrClosed", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after the adapter hung up")
	}
}

// TestPeerFramingIsBounded: the CLI's doctor probes whatever program holds
// the IDE port with this client. A peer whose header never ends, or that
// announces a body over the limit, ends the connection with a framing
// error; the client does not keep reading it into memory.
func TestPeerFramingIsBounded(t *testing.T) {
	tests := []struct {
		name string
		send []byte
	}{
		{"header line that never ends", []byte(strings.Repeat("A", 256<<10))},
		{"body over the limit", []byte("Content-Length: 17000000\r\n\r\n{")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := newPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := c.Send(ctx, "threads", nil)
			if err != nil {
				t.Fatal(err)
			}
			f.recv()
			// The peer keeps the connection open: only the client's own
			// limit can end the read.
			if _, err := f.conn.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			_, err = p.Wait(ctx)
			if !errors.Is(err, ErrClosed) || !(errors.Is(err, dapwire.ErrMalformedFrame) || errors.Is(err, dapwire.ErrMessageTooLarge)) {
				t.Fatalf("want the connection closed on a framing error, got %v", err)
			}
		})
	}
}
