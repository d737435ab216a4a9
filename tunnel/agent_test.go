package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

func startSilentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l.Addr().String()
}

func TestReadPreamble(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{name: "plain", in: "SPARKDAP-AGENT 2 127.0.0.1:5678\nYAMUX", want: "127.0.0.1:5678"},
		{name: "after shell noise", in: "Welcome!\r\nlast login\nSPARKDAP-AGENT 2 [::1]:9\n", want: "[::1]:9"},
		{name: "older agent", in: "SPARKDAP-AGENT 1 127.0.0.1:1\n", err: "protocol \"1\""},
		{name: "newer agent", in: "SPARKDAP-AGENT 3 127.0.0.1:1\n", err: "protocol \"3\""},
		{name: "bad address", in: "SPARKDAP-AGENT 2 nonsense\n", err: "bad preamble address"},
		{name: "exited", in: "bash: sparkdap: not found\n", err: "exited before"},
		{name: "endless noise", in: strings.Repeat("noise\n", maxPreambleJunk/6+10), err: "no agent preamble"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPreamble(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// agentHarness runs RunAgent over in-memory pipes and plays the laptop.
type agentHarness struct {
	addr    string
	sess    *yamux.Session
	stdin   io.WriteCloser // the laptop's end of the agent's stdin
	done    chan error
	streams chan net.Conn
}

func startAgentHarness(t *testing.T) *agentHarness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &agentHarness{stdin: inW, done: make(chan error, 1), streams: make(chan net.Conn, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		h.done <- RunAgent(ctx, inR, outW, []io.Closer{inR, outW}, AgentConfig{Listen: "127.0.0.1:0", Log: zerolog.Nop()})
	}()
	br := bufio.NewReader(outR)
	addr, err := readPreamble(br)
	if err != nil {
		t.Fatal(err)
	}
	h.addr = addr
	h.sess, err = yamux.Server(stdioConn{Reader: br, Writer: inW, closers: []io.Closer{inW, outR}}, yamuxConfig(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			st, err := h.sess.AcceptStream()
			if err != nil {
				close(h.streams)
				return
			}
			// As the laptop does: the header first, then the executor's.
			_ = st.SetReadDeadline(time.Now().Add(testWait))
			src, err := readStreamHeader(st)
			_ = st.SetReadDeadline(time.Time{})
			if err != nil {
				t.Errorf("stream header: %v", err)
				st.Close()
				continue
			}
			h.streams <- &sourceConn{Conn: st, remote: net.TCPAddrFromAddrPort(src)}
		}
	}()
	t.Cleanup(func() {
		cancel()
		h.sess.Close()
		select {
		case <-h.done:
		case <-time.After(testWait):
			t.Error("agent did not stop within 5s")
		}
	})
	return h
}

func (h *agentHarness) nextStream(t *testing.T) net.Conn {
	t.Helper()
	select {
	case st, ok := <-h.streams:
		if !ok {
			t.Fatal("session closed")
		}
		return st
	case <-time.After(testWait):
		t.Fatal("no stream within 5s")
	}
	return nil
}

// TestAgentCarriesConnections: each executor connection becomes its own
// stream, bytes flow both ways, and half-closes propagate.
func TestAgentCarriesConnections(t *testing.T) {
	h := startAgentHarness(t)
	const n = 20
	var execs []net.Conn
	var streams []net.Conn
	for i := range n {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		execs = append(execs, c)
		st := h.nextStream(t)
		streams = append(streams, st)
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Streams arrive in connection order; check the pairing by content.
	for i, st := range streams {
		b := make([]byte, 1)
		st.SetReadDeadline(time.Now().Add(testWait))
		if _, err := io.ReadFull(st, b); err != nil || int(b[0]) != i {
			t.Fatalf("stream %d read %v, %v", i, b, err)
		}
		big := bytes.Repeat([]byte{byte(i)}, 100_000) // several frames and windows
		go st.Write(big)
		got := make([]byte, len(big))
		execs[i].SetReadDeadline(time.Now().Add(testWait))
		if _, err := io.ReadFull(execs[i], got); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("executor %d: %v", i, err)
		}
	}
	// The proxy ends a stream: the executor sees EOF.
	streams[0].Close()
	execs[0].SetReadDeadline(time.Now().Add(testWait))
	if _, err := execs[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("executor after stream close: %v, want EOF", err)
	}
}

// TestAgentSendsSourceAddress: each stream tells the executor's own
// address, so the proxy's per-source limits see hosts, not the tunnel.
func TestAgentSendsSourceAddress(t *testing.T) {
	h := startAgentHarness(t)
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st := h.nextStream(t)
		if got, want := st.RemoteAddr().String(), c.LocalAddr().String(); got != want {
			t.Errorf("stream's RemoteAddr %s, want the executor's %s", got, want)
		}
		// Nothing of the header is left for the proxy to read as the
		// executor's.
		if _, err := c.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 2)
		st.SetReadDeadline(time.Now().Add(testWait))
		if _, err := io.ReadFull(st, b); err != nil || string(b) != "hi" {
			t.Fatalf("first bytes on the stream %q, %v; want the executor's", b, err)
		}
	}
}

// TestAgentFlowControlIsPerStream: a stream the proxy never reads fills
// its own window only; another stream keeps moving.
func TestAgentFlowControlIsPerStream(t *testing.T) {
	h := startAgentHarness(t)
	hog, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	h.nextStream(t) // never read
	go func() {
		chunk := make([]byte, 64<<10)
		for range 64 { // 4 MiB, far beyond the 256 KiB window
			if _, err := hog.Write(chunk); err != nil {
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)

	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := h.nextStream(t)
	for i := range 50 {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		st.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 5)
		if _, err := io.ReadFull(st, b); err != nil {
			t.Fatalf("round %d: the second stream is starved: %v", i, err)
		}
	}
}

// TestAgentExitsWhenSessionEnds: when the SSH session goes (stdin EOF) the
// agent closes executor connections, so debuggees run on, and frees its
// port for the next agent.
func TestAgentExitsWhenSessionEnds(t *testing.T) {
	h := startAgentHarness(t)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h.nextStream(t)
	h.sess.Close()
	h.stdin.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("agent still running 5s after its session ended")
	}
	h.done <- nil // for the cleanup
	c.SetReadDeadline(time.Now().Add(testWait))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("executor connection still open after the agent exited")
	}
	l, err := net.Listen("tcp", h.addr)
	if err != nil {
		t.Fatalf("port not freed: %v", err)
	}
	l.Close()
}

func TestListenRetryWaitsForBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	time.AfterFunc(300*time.Millisecond, func() { busy.Close() })
	l, err := listenRetry(context.Background(), addr, 5*time.Second, zerolog.Nop())
	if err != nil {
		t.Fatalf("listenRetry: %v", err)
	}
	l.Close()

	busy2, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy2.Close()
	start := time.Now()
	if _, err := listenRetry(context.Background(), busy2.Addr().String(), 300*time.Millisecond, zerolog.Nop()); err == nil {
		t.Fatal("listenRetry on a port that stays busy succeeded")
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("retry not bounded: %v", time.Since(start))
	}
}

// TestIdleStreamMemory measures what an idle executor connection costs in
// the agent: TCP conn, yamux stream and the two copy goroutines. io.Copy
// with its 32 KiB buffers would be ~70 KB; borrowing buffers only while
// bytes move keeps it to goroutine stacks and bookkeeping.
func TestIdleStreamMemory(t *testing.T) {
	testenv.SkipIfShort(t, "measures the memory of 300 idle streams")
	h := startAgentHarness(t)
	const n = 300
	var execs []net.Conn
	var streams []net.Conn
	measure := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	before := measure()
	for range n {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		execs = append(execs, c)
		st := h.nextStream(t)
		streams = append(streams, st)
		// One exchange each way, as a handshake would, then idle.
		c.Write([]byte("x"))
		b := make([]byte, 1)
		io.ReadFull(st, b)
		st.Write([]byte("y"))
		io.ReadFull(c, b)
	}
	time.Sleep(50 * time.Millisecond)
	per := (int64(measure()) - int64(before)) / n
	t.Logf("idle executor connection through the agent: ~%d bytes (both ends, both tunnel sides, in one process)", per)
	// Both the agent's and the laptop's side live in this process, plus the
	// test's own TCP end; still far below one 32 KiB buffer per direction.
	if per > 48<<10 {
		t.Errorf("idle connection costs %d bytes; buffers held while idle?", per)
	}
	// Held until here, so that the measurement counts them live.
	for _, c := range execs {
		c.Close()
	}
	for _, st := range streams {
		st.Close()
	}
}

// TestKeepalive: a server that answers keeps the link; one that goes
// silent is declared dead after max missed intervals.
func TestKeepalive(t *testing.T) {
	testenv.SkipIfShort(t, "waits out 2 s of keepalives")
	t.Setenv("SSH_AUTH_SOCK", "")
	clientSigner, clientPriv := newEd25519(t)
	identity := writeIdentity(t, clientPriv, "")
	host, _ := newEd25519(t)
	var silent sync.Map
	srv := startTestServer(t, []ssh.Signer{host}, clientSigner.PublicKey(), func(r *ssh.Request) {
		if _, ok := silent.Load("on"); ok {
			return // swallow: no reply, like a dead peer
		}
		if r.WantReply {
			r.Reply(false, nil) // OpenSSH refuses the unknown request; still an answer
		}
	})
	kh := t.TempDir() + "/kh"
	dial := func() *ssh.Client {
		c, err := Dial(context.Background(), DialConfig{Target: targetOf(t, srv.addr), IdentityFiles: []string{identity},
			KnownHostsFile: kh, AcceptNewHostKey: true, Timeout: testHandshakeTimeout, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, tc := range []struct {
		name     string
		silent   bool
		wantDead bool
	}{
		{"answering server", false, false},
		{"silent server", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.silent {
				silent.Store("on", true)
				defer silent.Delete("on")
			}
			c := dial()
			// 4 missed 100 ms intervals make a dead peer; an answering one
			// must survive 2 s of it even on a loaded machine under -race.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			dead := make(chan error, 1)
			go keepalive(ctx, c, 100*time.Millisecond, 4, func(err error) { dead <- err })
			select {
			case err := <-dead:
				if !tc.wantDead {
					t.Fatalf("declared dead: %v", err)
				}
			case <-ctx.Done():
				if tc.wantDead {
					t.Fatal("silent server not declared dead")
				}
			}
		})
	}
}
