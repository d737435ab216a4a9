package admission

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder keeps what one side of a connection wrote.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out strings.Builder
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(b)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

func (r *recorder) written() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// proxySide runs Handshake on one end of a pipe and replies as a front end
// does; it returns the hello it verified or the error.
func proxySide(r *Registry, c net.Conn) (Hello, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	send := func(b []byte) { _, _ = c.Write(b) }
	h, err := r.Handshake(bufio.NewReader(c), send)
	if err != nil {
		if !errors.Is(err, ErrOldHello) {
			send(Reply("", err))
		}
		return h, err
	}
	if err := r.Accept(AddrKey("ip", h.PID), "ip", h, 0); err != nil {
		send(Reply("", err))
		return h, err
	}
	send(Reply("", nil))
	return h, nil
}

type exchange struct {
	reply, pydevdToken string
	err                error
	hello              Hello
	proxyErr           error
	workerWrote        string
}

// run plays a worker with workerToken against a proxy with proxyToken.
func run(t *testing.T, r *Registry, workerToken string) exchange {
	t.Helper()
	a, b := net.Pipe()
	w := &recorder{Conn: a}
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	var x exchange
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.hello, x.proxyErr = proxySide(r, b)
	}()
	x.reply, x.pydevdToken, x.err = Introduce(w, workerToken, TaskInfo{PID: 7, Host: "node-1", Label: "stage 1"})
	a.Close()
	<-done
	x.workerWrote = w.written()
	return x
}

func TestHandshake(t *testing.T) {
	const token = "s3cret-token-1234"
	r := NewRegistry(Config{Token: token})
	x := run(t, r, token)
	if x.err != nil || x.reply != "OK" || x.proxyErr != nil {
		t.Fatalf("right token: reply %q, %v, proxy %v", x.reply, x.err, x.proxyErr)
	}
	if strings.Contains(x.workerWrote, token) {
		t.Fatalf("the token crossed the wire: %q", x.workerWrote)
	}
	h, ok := r.Claim(AddrKey("ip", 7), "ip", 7)
	if !ok || h.Host != "node-1" {
		t.Fatalf("no pending hello: %+v %v", h, ok)
	}
	if err := r.CheckPydevdToken(h, x.pydevdToken); err != nil {
		t.Errorf("the hello's own pydevd token: %v", err)
	}
	// One hex digit changed (never to itself: the last digit is as often 0
	// as any other).
	last := "0"
	if strings.HasSuffix(x.pydevdToken, "0") {
		last = "1"
	}
	for _, bad := range []string{"", token, x.pydevdToken[:63] + last} {
		if err := r.CheckPydevdToken(h, bad); err == nil {
			t.Errorf("pydevd token %q accepted", bad)
		}
	}

	// A proxy with another token cannot get past the worker, and so never
	// sees what the worker says about itself.
	x = run(t, NewRegistry(Config{Token: "other"}), token)
	if !errors.Is(x.err, ErrProxyUnproven) {
		t.Errorf("proxy with the wrong token: reply %q, %v", x.reply, x.err)
	}
	if strings.Contains(x.workerWrote, "node-1") || strings.Count(x.workerWrote, "\n") != 1 {
		t.Errorf("the worker said more than its nonce to an unproven proxy: %q", x.workerWrote)
	}

	// A worker with the wrong token is refused by the real proxy.
	r2 := NewRegistry(Config{Token: token})
	x = run(t, r2, "guess")
	if x.err == nil || x.reply != "" {
		// The worker stops first: the proxy's proof does not match its token.
		t.Errorf("worker with the wrong token: reply %q, %v", x.reply, x.err)
	}
	if len(r2.Pending()) != 0 {
		t.Error("a wrong-token hello is pending")
	}
}

// TestHandshakeSquatter plays a program that bound the executor port
// before the proxy: it learns no token, and what it captured (here, a whole
// successful exchange it relayed) is refused when replayed to the real
// proxy, whose nonce differs each time.
func TestHandshakeSquatter(t *testing.T) {
	const token = "s3cret-token-1234"
	// The squatter answers the worker's nonce with a challenge of its own;
	// it cannot compute the proof, so it sends garbage.
	a, b := net.Pipe()
	w := &recorder{Conn: a}
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_ = b.SetDeadline(time.Now().Add(10 * time.Second))
	var heard string
	squatted := make(chan struct{})
	go func() {
		defer close(squatted)
		br := bufio.NewReader(b)
		heard, _ = br.ReadString('\n')
		_, _ = io.WriteString(b, HelloPrefix+"CHALLENGE "+strings.Repeat("0", 32)+" "+strings.Repeat("ab", 32)+"\n")
		rest, _ := io.ReadAll(br)
		heard += string(rest)
		b.Close()
	}()
	_, _, err := Introduce(w, token, TaskInfo{PID: 7})
	a.Close()
	<-squatted
	if !errors.Is(err, ErrProxyUnproven) {
		t.Fatalf("the worker went on with a squatter: %v", err)
	}
	if strings.Contains(w.written(), token) || !strings.HasPrefix(heard, HelloPrefix+"HELLO ") {
		t.Fatalf("the squatter heard %q", w.written())
	}

	// Replay: a passive observer of a real exchange sends the worker's lines
	// again to the real proxy.
	r := NewRegistry(Config{Token: token})
	x := run(t, r, token)
	if x.reply != "OK" {
		t.Fatalf("real exchange: %q %v", x.reply, x.err)
	}
	r.Claim(AddrKey("ip", 7), "ip", 7)
	c, p := net.Pipe()
	done := make(chan error, 1)
	go func() { _, err := proxySide(r, p); done <- err }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.Copy(io.Discard, c) }()
	_, _ = io.WriteString(c, x.workerWrote)
	if err := <-done; !errors.Is(err, ErrBadProof) {
		t.Errorf("replayed hello: %v, want %v", err, ErrBadProof)
	}
	c.Close()
	if len(r.Pending()) != 0 {
		t.Error("the replayed hello is pending")
	}
}

// TestProofsAreDirectional: the three values differ, so none stands in for
// another (a proxy's proof reflected as the worker's is refused).
func TestProofsAreDirectional(t *testing.T) {
	wn, pn := strings.Repeat("1", 32), strings.Repeat("2", 32)
	p, w, d := ProxyProof("t", wn, pn), WorkerProof("t", wn, pn), PydevdToken("t", wn, pn)
	if p == w || w == d || p == d || ProxyProof("t", pn, wn) == p {
		t.Fatal("proofs not bound to direction and nonce order")
	}
}

func TestHandshakeRefusesBadFirstLines(t *testing.T) {
	r := NewRegistry(Config{Token: "t"})
	for _, tt := range []struct {
		line string
		want error
		sent string
	}{
		{`SPARKDAP/1 {"token":"t","pid":7}` + "\n", ErrOldHello, "SPARKDAP/1 REFUSED outdated hello"},
		{"SPARKDAP/2 HELLO short\n", ErrBadHello, ""},
		{"SPARKDAP/2 HELLO " + strings.Repeat("G", 32) + "\n", ErrBadHello, ""},
		{"SPARKDAP/2 {\"pid\":7}\n", ErrBadHello, ""},
	} {
		var sent strings.Builder
		br := bufio.NewReader(strings.NewReader(tt.line))
		if !IsHello(br) {
			t.Fatalf("%q: not a hello", tt.line)
		}
		_, err := r.Handshake(br, func(b []byte) { sent.Write(b) })
		if !errors.Is(err, tt.want) || !strings.HasPrefix(sent.String(), tt.sent) || (tt.sent == "" && sent.Len() != 0) {
			t.Errorf("%q: %v, sent %q", tt.line, err, sent.String())
		}
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// endless is a line that never ends: head, then 1 MiB of "a".
func endless(head string) io.Reader {
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatA{}, 1<<20))
}

type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestHelloLinesBounded: a peer that has proved nothing can make the
// proxy read (and hold) little: the first line is refused once past a
// nonce's length, the description line past maxHelloBytes; an old hello is
// still told apart, however long its line.
func TestHelloLinesBounded(t *testing.T) {
	const buf = 256 // the DAP front end's read buffer
	wn := strings.Repeat("a1", 16)
	for _, tt := range []struct {
		name string
		in   io.Reader
		want error
		most int // bytes the proxy may read
	}{
		{"endless first line", endless(HelloPrefix + "HELLO "), ErrBadHello, maxFirstLineBytes + buf},
		{"endless nonce-less line", endless(HelloPrefix), ErrBadHello, maxFirstLineBytes + buf},
		{"endless description", endless(HelloPrefix + "HELLO " + wn + "\n" + HelloPrefix + `{"pid":7,"x":"`), ErrBadHello, maxHelloBytes + 2*buf},
		{"long old hello", endless(helloV1Prefix + `{"token":"t","pid":7,"x":"`), ErrOldHello, buf},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &countingReader{r: tt.in}
			br := bufio.NewReaderSize(src, buf)
			if !IsHello(br) {
				t.Fatal("not taken for a hello")
			}
			_, err := NewRegistry(Config{Token: "s3cret"}).Handshake(br, func([]byte) {})
			if !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
			if src.n > tt.most {
				t.Errorf("the proxy read %d bytes before refusing, want at most %d", src.n, tt.most)
			}
		})
	}
}
