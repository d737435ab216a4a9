package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// allocLog records the body buffers a Hub's frame readers make.
type allocLog struct {
	mu    sync.Mutex
	caps  []int
	total int
}

func (l *allocLog) add(capacity int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caps = append(l.caps, capacity)
	l.total += capacity
}

func (l *allocLog) snapshot() (count, largest, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.caps {
		largest = max(largest, c)
	}
	return len(l.caps), largest, l.total
}

// waitFor waits, bounded, until cond holds.
func (l *allocLog) waitFor(t *testing.T, what string, cond func(count, largest, total int) bool) {
	t.Helper()
	for range 3000 {
		if cond(l.snapshot()) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	count, largest, total := l.snapshot()
	t.Fatalf("%s: still %d buffers, largest %d, %d bytes in all", what, count, largest, total)
}

// startMeasuredProxy is startProxy with every frame reader's buffers
// recorded. Its handshake and attach deadlines are long, so that only a
// refusal ends a connection the test holds.
func startMeasuredProxy(t *testing.T) (*testProxy, *allocLog) {
	t.Helper()
	log := &allocLog{}
	hub := NewHub(Config{Token: testToken, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
		HandshakeTimeout: 5 * time.Minute, AttachTimeout: 5 * time.Minute})
	hub.frameAlloc = log.add
	srv, err := Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && err != context.DeadlineExceeded {
			t.Errorf("Serve: %v", err)
		}
		hub.Close()
	})
	return &testProxy{t: t, hub: hub, srv: srv, ctx: ctx}, log
}

// hugeHeader declares the largest body --max-message-bytes allows.
var hugeHeader = fmt.Sprintf("Content-Length: %d\r\n\r\n", DefaultMaxMessageBytes)

// dialPartial connects and sends head and then n bytes of a body that
// never ends. A write the proxy refuses by hanging up is no failure.
func dialPartial(t *testing.T, addr, head string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	const start = `{"type":"response","x":"`
	if _, err := c.Write([]byte(head + start + strings.Repeat("x", n-len(start)))); isTimeout(err) {
		t.Fatalf("sending a partial body: %v", err)
	}
	return c
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// waitHungUp reads (and drops) what the proxy sends until it closes c
// (an end or a reset: it hangs up on bytes it did not read).
func waitHungUp(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); isTimeout(err) {
		t.Fatalf("%s: the proxy did not hang up: %v", what, err)
	}
}

// TestUnadmittedPeersHoldLittle: peers on either port that have not
// presented a token (or attached) and declare huge bodies are hung up on
// without the proxy making a buffer for them; peers that declare what an
// unadmitted one may send, and send part of it, hold a buffer the size of
// what they sent (rounded up to the first chunk), not what they declared.
func TestUnadmittedPeersHoldLittle(t *testing.T) {
	const conns = 16
	for _, port := range []struct {
		name  string
		limit int
		addr  func(*Server) net.Addr
	}{
		{"executor port", maxUnauthorizedMessageBytes, (*Server).ExecutorAddr},
		{"IDE port", maxUnattachedMessageBytes, (*Server).IDEAddr},
	} {
		t.Run(port.name, func(t *testing.T) {
			p, allocs := startMeasuredProxy(t)
			addr := port.addr(p.srv).String()

			for i := range conns {
				c := dialPartial(t, addr, hugeHeader, 64<<10)
				waitHungUp(t, c, fmt.Sprintf("connection %d declaring %d bytes", i, DefaultMaxMessageBytes))
			}
			if count, largest, _ := allocs.snapshot(); count != 0 {
				t.Fatalf("%d unadmitted connections declaring %d bytes made the proxy allocate %d buffers, the largest %d bytes",
					conns, DefaultMaxMessageBytes, count, largest)
			}

			const sent = 1000
			head := fmt.Sprintf("Content-Length: %d\r\n\r\n", port.limit)
			for range conns {
				dialPartial(t, addr, head, sent)
			}
			allocs.waitFor(t, "the proxy reading the partial bodies", func(count, _, _ int) bool { return count >= conns })
			count, largest, total := allocs.snapshot()
			if count != conns || largest > dapwire.BodyChunk || total > conns*dapwire.BodyChunk {
				t.Errorf("%d unadmitted connections, each %d bytes into a %d-byte body, hold %d buffers, the largest %d bytes, "+
					"%d in all; want one of at most %d each", conns, sent, port.limit, count, largest, total, dapwire.BodyChunk)
			}
		})
	}
}

// TestAdmittedBodyGrowsAsItArrives: once attached, an IDE may send bodies
// up to --max-message-bytes, but one that declares that and sends 64 KiB
// makes the proxy hold about twice what it sent, not what it declared; the
// whole body, once sent, is read.
func TestAdmittedBodyGrowsAsItArrives(t *testing.T) {
	p, allocs := startMeasuredProxy(t)
	r := dialRaw(t, p.srv.IDEAddr().String())
	r.send(map[string]any{"type": "request", "command": "initialize", "arguments": map[string]any{"adapterID": "debugpy"}})
	r.send(map[string]any{"type": "request", "command": "attach", "arguments": map[string]any{}})
	for m := r.read(); m == nil || m.Command() != "attach"; m = r.read() {
		if m == nil {
			t.Fatal("the proxy hung up before attach was answered")
		}
	}
	allocs.waitFor(t, "the proxy reading initialize and attach", func(count, _, _ int) bool { return count >= 2 })
	_, before, _ := allocs.snapshot()

	// A request as large as the limit allows, sent in two parts.
	const first = 64 << 10
	body, _ := json.Marshal(map[string]any{"seq": 99, "type": "request", "command": "loadedSources",
		"arguments": map[string]any{"pad": strings.Repeat("x", DefaultMaxMessageBytes-200)}})
	body = append(body, strings.Repeat(" ", DefaultMaxMessageBytes-len(body))...)
	frame := dapwire.AppendFrame(nil, body)
	head := len(frame) - len(body)
	_ = r.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.conn.Write(frame[:head+first]); err != nil {
		t.Fatal(err)
	}
	allocs.waitFor(t, "the proxy reading the first part", func(_, _, total int) bool { return total >= first })
	if _, largest, _ := allocs.snapshot(); largest > max(before, 2*first) {
		t.Fatalf("%d bytes into a body declared %d bytes long, the proxy made a %d-byte buffer; want at most %d",
			first, DefaultMaxMessageBytes, largest, 2*first)
	}
	if _, err := r.conn.Write(frame[head+first:]); err != nil {
		t.Fatal(err)
	}
	// The request reached the proxy whole: it answers it.
	for m := r.read(); m == nil || m.Type() != "response" || m.RequestSeq() != 99; m = r.read() {
		if m == nil {
			t.Fatal("the proxy hung up on a body within --max-message-bytes")
		}
	}
}
