package connbudget

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func tcp(s string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err)
	}
	return a
}

type strAddr string

func (a strAddr) Network() string { return "test" }
func (a strAddr) String() string  { return string(a) }

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{tcp("10.0.0.1:5678"), "10.0.0.1"},
		{tcp("[::ffff:10.0.0.1]:1"), "10.0.0.1"},
		{tcp("[2001:db8:1:2:3:4:5:6]:1"), "2001:db8:1:2::/64"},
		{tcp("[2001:db8:1:2:ffff::1]:9"), "2001:db8:1:2::/64"},
		{strAddr("10.1.2.3:4"), "10.1.2.3"},
		{strAddr("[fe80::1%eth0]:4"), "fe80::/64"},
		{strAddr("pipe"), "unknown"},
		{strAddr("yamux:remote"), "unknown"},
		{nil, "unknown"},
	} {
		if got := Source(tc.addr); got != tc.want {
			t.Errorf("Source(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// testConn is one side of a pipe from addr that records its Close.
type testConn struct {
	net.Conn
	addr   net.Addr
	closed atomic.Bool
}

func (c *testConn) RemoteAddr() net.Addr { return c.addr }
func (c *testConn) Close() error         { c.closed.Store(true); return c.Conn.Close() }

func newConn(t *testing.T, addr string) (*testConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &testConn{Conn: a, addr: tcp(addr)}, b
}

// take holds a place for a new connection from addr, failing the test on
// a refusal.
func take(t *testing.T, b *Budget, addr string) (*testConn, *Place, net.Conn) {
	t.Helper()
	c, peer := newConn(t, addr)
	p, served, err := b.Take(c, 0)
	if err != nil {
		t.Fatalf("Take from %s: %v", addr, err)
	}
	return c, p, &pipePair{served: served, peer: peer}
}

// pipePair is a served connection and its peer's end.
type pipePair struct {
	served, peer net.Conn
	net.Conn
}

// speak sends a byte from the peer and reads it on the served side, as
// the front end's reader does.
func speak(t *testing.T, conn net.Conn) {
	t.Helper()
	pp := conn.(*pipePair)
	go pp.peer.Write([]byte{1})
	if _, err := pp.served.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

// TestBudgetMakesRoom: a full budget never refuses the newcomer. It
// closes the oldest connection silent for the silent grace; else the
// oldest that has sent bytes for the grace but no whole message; else the
// oldest silent one; else the oldest that sent bytes; else the oldest of
// all. Released places are never touched.
func TestBudgetMakesRoom(t *testing.T) {
	b := NewWith(Options{Total: 3, SilentGrace: time.Hour, AdmitGrace: time.Hour})
	age := func(p *Place, d time.Duration) {
		b.mu.Lock()
		p.since = p.since.Add(-d)
		p.spokeAt = p.spokeAt.Add(-d)
		b.mu.Unlock()
	}
	closed := func(cs ...*testConn) []bool {
		var out []bool
		for _, c := range cs {
			out = append(out, c.closed.Load())
		}
		return out
	}
	c1, p1, s1 := take(t, b, "10.0.0.1:1")
	c2, _, _ := take(t, b, "10.0.0.1:2")
	c3, p3, _ := take(t, b, "10.0.0.1:3")
	speak(t, s1) // c1 sent bytes; c2 is silent
	p3.Release() // admitted: no longer in the budget
	c4, p4, _ := take(t, b, "10.0.0.1:4")
	if c1.closed.Load() || c2.closed.Load() || c3.closed.Load() || c4.closed.Load() {
		t.Fatal("a connection was closed while the budget had room")
	}
	// c1 has only just sent its first bytes (an honest peer's message
	// between its read and its parse): the oldest silent one, c2, goes.
	c5, _, s5 := take(t, b, "10.0.0.1:5")
	if got := closed(c1, c2, c4); got[0] || !got[1] || got[2] {
		t.Fatalf("closed c1, c2, c4 = %v; want c2, the oldest silent one", got)
	}
	// Once c1 has sent bytes for the grace without a whole message, it
	// goes before the silent ones that are new.
	age(p1, 2*time.Hour)
	c6, p6, _ := take(t, b, "10.0.0.1:6")
	if got := closed(c1, c4, c5); !got[0] || got[1] || got[2] {
		t.Fatalf("closed c1, c4, c5 = %v; want c1, bytes but no message for the grace", got)
	}
	// Silent for the whole grace, c4 goes before c5, which just spoke.
	speak(t, s5)
	age(p4, 2*time.Hour)
	c7, _, _ := take(t, b, "10.0.0.1:7")
	if got := closed(c4, c5, c6); !got[0] || got[1] || got[2] {
		t.Fatalf("closed c4, c5, c6 = %v; want c4, silent past the grace", got)
	}
	// One that sent a whole message outlasts the rest: with c6 progressed,
	// the silent c7 goes; then, with no silent one left, c5, the oldest
	// that sent bytes.
	p6.Progressed()
	c8, _, s8 := take(t, b, "10.0.0.1:8")
	if got := closed(c5, c6, c7); got[0] || got[1] || !got[2] {
		t.Fatalf("closed c5, c6, c7 = %v; want c7, the silent one", got)
	}
	speak(t, s8)
	take(t, b, "10.0.0.1:9")
	if got := closed(c5, c6, c8); !got[0] || got[1] || got[2] {
		t.Fatalf("closed c5, c6, c8 = %v; want c5, the oldest that sent bytes", got)
	}
	if n, _ := b.InUse(); n != 3 {
		t.Fatalf("InUse = %d, want 3", n)
	}
}

// tcpPair is an accepted loopback connection whose peer first sent sent
// (nothing if empty), waiting unread in the kernel.
func tcpPair(t *testing.T, ln net.Listener, sent string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if sent != "" {
		if _, err := c.Write([]byte(sent)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Where nothing can look (canPeek false) the bytes are left to arrive
	// when they do: the tests there read them, or count them as unseen.
	for deadline := time.Now().Add(10 * time.Second); sent != "" && canPeek; time.Sleep(time.Millisecond) {
		if some, _ := pendingBytes(s); some {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bytes sent never showed in the kernel buffer")
		}
	}
	return s
}

// closedConn says whether the budget closed c.
func closedConn(c net.Conn) bool {
	_, err := c.Write(nil)
	return errors.Is(err, net.ErrClosed)
}

// TestBudgetLooksInTheKernelBuffer: bytes that arrived but have not been
// read (the reader not yet scheduled, on a machine a flood keeps busy)
// count: a connection with a line waiting outlasts ones that dribble
// bytes, and one with bytes waiting outlasts idle ones.
func TestBudgetLooksInTheKernelBuffer(t *testing.T) {
	if !canPeek {
		t.Skip("this platform cannot look at the kernel buffer (peek_other.go); TestBudgetWithoutPeek covers it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := NewWith(Options{Total: 3, SilentGrace: time.Hour, AdmitGrace: time.Hour})
	takeConn := func(c net.Conn) {
		t.Helper()
		if _, _, err := b.Take(c, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Under connections that dribbled bytes, an honest hello waiting unread.
	var slow []*testConn
	for i := range 2 {
		c, _, s := take(t, b, "10.0.0.1:"+strconv.Itoa(i+1))
		speak(t, s)
		slow = append(slow, c)
	}
	honest := tcpPair(t, ln, "SPARKDAP/2 HELLO 0123\n")
	takeConn(honest)
	takeConn(tcpPair(t, ln, "SPARKDAP/2 HEL")) // closes slow[0]
	takeConn(tcpPair(t, ln, "SPARKDAP/2 HEL")) // closes slow[1]
	if closedConn(honest) || !slow[0].closed.Load() || !slow[1].closed.Load() {
		t.Fatalf("closed: honest %v, slow %v %v; want the slow ones", closedConn(honest), slow[0].closed.Load(), slow[1].closed.Load())
	}

	// Under idle connections silent for the grace, one with a message
	// waiting unread.
	b = NewWith(Options{Total: 2, SilentGrace: 50 * time.Millisecond, AdmitGrace: time.Hour})
	waiting := tcpPair(t, ln, "Content-Length: 2\r\n\r\n{}")
	takeConn(waiting)
	idle := tcpPair(t, ln, "")
	takeConn(idle)
	time.Sleep(60 * time.Millisecond)
	takeConn(tcpPair(t, ln, ""))
	if closedConn(waiting) || !closedConn(idle) {
		t.Fatalf("closed: waiting %v, idle %v; want the idle one", closedConn(waiting), closedConn(idle))
	}
}

// TestBudgetWithoutPeek: where the kernel buffer cannot be looked at
// (off Unix), a connection whose message waits unread counts as silent,
// the oldest silent one goes to make room, until its reader has read the
// bytes; with the Unix look it outlasts an idle one either way.
func TestBudgetWithoutPeek(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name        string
		peek        func(net.Conn) (some, line bool)
		read        bool // its reader took the bytes before the newcomer
		wantWaiting bool // the waiting one is closed, not the idle one
	}{
		{"unix peek, unread", pendingBytes, false, false},
		{"unix peek, read", pendingBytes, true, false},
		{"no peek, unread", noPeek, false, true},
		{"no peek, read", noPeek, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "unix peek") && !canPeek {
				t.Skip("this platform cannot look at the kernel buffer (peek_other.go)")
			}
			b := NewWith(Options{Total: 2, SilentGrace: time.Hour, AdmitGrace: time.Hour})
			b.peek = tc.peek
			waiting := tcpPair(t, ln, "Content-Length: 2\r\n\r\n{}")
			_, wc, err := b.Take(waiting, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.read {
				if _, err := wc.Read(make([]byte, 64)); err != nil {
					t.Fatal(err)
				}
			}
			idle := tcpPair(t, ln, "")
			for _, c := range []net.Conn{idle, tcpPair(t, ln, "")} {
				if _, _, err := b.Take(c, 0); err != nil {
					t.Fatal(err)
				}
			}
			if closedConn(waiting) != tc.wantWaiting || closedConn(idle) == tc.wantWaiting {
				t.Errorf("closed: waiting %v, idle %v; want the waiting one: %v", closedConn(waiting), closedConn(idle), tc.wantWaiting)
			}
		})
	}
}

// TestBudgetProgressedGoLast: a connection that sent a whole message
// outlasts every one that only sent bytes, however old.
func TestBudgetProgressedGoLast(t *testing.T) {
	b := NewWith(Options{Total: 3, SilentGrace: time.Hour, AdmitGrace: time.Hour})
	honest, ph, _ := take(t, b, "10.0.0.1:1")
	ph.Progressed()
	slow1, _, s1 := take(t, b, "10.0.0.1:2")
	speak(t, s1)
	slow2, _, s2 := take(t, b, "10.0.0.1:3")
	speak(t, s2)
	take(t, b, "10.0.0.1:4")
	if honest.closed.Load() || !slow1.closed.Load() || slow2.closed.Load() {
		t.Fatalf("closed: honest %v, slow %v %v; want the oldest slow one", honest.closed.Load(), slow1.closed.Load(), slow2.closed.Load())
	}
}

// TestBudgetKeepsExpectedConnections: as many connections from a source
// as the caller expects (workers whose hello was accepted, whose pydevd
// then connects and waits to be spoken to) are never closed to make room;
// a budget full of them refuses the newcomer instead.
func TestBudgetKeepsExpectedConnections(t *testing.T) {
	b := NewWith(Options{Total: 3, SilentGrace: time.Hour, AdmitGrace: time.Hour})
	var expected []*testConn
	for i := range 2 {
		c, _ := newConn(t, "10.0.0.1:"+strconv.Itoa(i+1))
		if _, _, err := b.Take(c, 2); err != nil {
			t.Fatal(err)
		}
		expected = append(expected, c)
	}
	idle, _, _ := take(t, b, "10.0.0.1:3") // a third from there: not expected
	for i := range 3 {
		take(t, b, "10.0.0.1:"+strconv.Itoa(10+i))
	}
	if expected[0].closed.Load() || expected[1].closed.Load() || !idle.closed.Load() {
		t.Fatalf("closed: expected %v %v, idle %v; want only the idle one", expected[0].closed.Load(), expected[1].closed.Load(), idle.closed.Load())
	}

	b = NewWith(Options{Total: 1, SilentGrace: time.Hour, AdmitGrace: time.Hour})
	c, _ := newConn(t, "10.0.0.1:1")
	if _, _, err := b.Take(c, 1); err != nil {
		t.Fatal(err)
	}
	c2, _ := newConn(t, "10.0.0.1:2")
	_, _, err := b.Take(c2, 1)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Cause != CauseTotal || c.closed.Load() {
		t.Fatalf("newcomer to a budget of expected connections: %v (expected one closed: %v)", err, c.closed.Load())
	}
}

// TestBudgetPerSourceOnlyWhenAsked: by default one address may hold the
// whole budget (workers share addresses); a share given refuses the
// newcomer over it.
func TestBudgetPerSourceOnlyWhenAsked(t *testing.T) {
	b := New(5, 0)
	for i := range 5 {
		take(t, b, "10.0.0.1:"+strconv.Itoa(i+1))
	}
	if n, s := b.InUse(); n != 5 || s != 1 {
		t.Fatalf("InUse = %d, %d; want 5 from 1 source", n, s)
	}

	b = New(5, 2)
	take(t, b, "10.0.0.1:1")
	take(t, b, "10.0.0.1:2")
	c, _ := newConn(t, "10.0.0.1:3")
	_, _, err := b.Take(c, 0)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Cause != CausePerSource {
		t.Fatalf("third from one source: %v, want %q", err, CausePerSource)
	}
	take(t, b, "10.0.0.2:1")
}

func TestBudgetDefaults(t *testing.T) {
	if b := New(0, 0); b.Total() != DefaultTotal || b.PerSource() != DefaultTotal {
		t.Errorf("New(0, 0) = %d, %d", b.Total(), b.PerSource())
	}
	if b := New(4, 10); b.PerSource() != 4 {
		t.Errorf("per source over total: %d", b.PerSource())
	}
}

// TestBudgetGracesUnderPressureOnly: with at most half the budget held,
// silent and unadmitted connections keep their places. Past half, a
// silent one goes after SilentGrace and one that spoke but is not
// admitted after AdmitGrace, until the pressure is gone; each is reported
// once, and admitted ones stay.
func TestBudgetGracesUnderPressureOnly(t *testing.T) {
	type shed struct{ why, how string }
	sheds := make(chan shed, 16)
	const silentGrace, admitGrace = 30 * time.Millisecond, 150 * time.Millisecond
	b := NewWith(Options{Total: 4, SilentGrace: silentGrace, AdmitGrace: admitGrace,
		Shed: func(_ net.Addr, why, how string) { sheds <- shed{why, how} }})
	b.lookable = func(net.Conn) bool { return true } // the pipes hold nothing unseen
	quiet, _, _ := take(t, b, "10.0.0.1:1")
	time.Sleep(admitGrace + 100*time.Millisecond)
	if quiet.closed.Load() {
		t.Fatal("a silent connection was closed without pressure")
	}

	_, pa, _ := take(t, b, "10.0.0.1:2")
	pa.Release()
	t1, _, s1 := take(t, b, "10.0.0.1:3")
	speak(t, s1)
	t2, _, s2 := take(t, b, "10.0.0.1:4")
	speak(t, s2) // 3 held of 4: pressure
	waitSheds := func(n int) map[shed]int {
		t.Helper()
		got := map[shed]int{}
		for i := 0; i < n; i++ {
			select {
			case s := <-sheds:
				got[s]++
			case <-time.After(10 * time.Second):
				t.Fatalf("%d sheds, want %d: %v", i, n, got)
			}
		}
		time.Sleep(admitGrace) // and no more
		if len(sheds) > 0 {
			t.Fatalf("more sheds than %d: %v and %v", n, got, <-sheds)
		}
		return got
	}
	if got := waitSheds(1); got[shed{CauseUnadmitted, "past its grace"}] != 1 {
		t.Fatalf("sheds %v, want one unadmitted past its grace", got)
	}
	if t1.closed.Load() == t2.closed.Load() {
		t.Fatalf("unadmitted talkers closed: %v, %v; want one, which ends the pressure", t1.closed.Load(), t2.closed.Load())
	}
	silent, _, _ := take(t, b, "10.0.0.1:5") // 3 held again
	if got := waitSheds(1); got[shed{CauseSilent, "past its grace"}] != 1 || !silent.closed.Load() {
		t.Fatalf("sheds %v (closed %v), want the silent newcomer past its grace", got, silent.closed.Load())
	}
	if quiet.closed.Load() {
		t.Fatal("the connection whose graces passed without pressure was closed later")
	}
}

// TestBudgetSilenceCountsOnlyWhereSeen: under pressure, a connection
// silent past the silent grace goes then only if what its peer sent
// could be seen unread (a socket); one whose bytes may wait out of sight
// (a tunnel stream) keeps its place until the admission grace.
func TestBudgetSilenceCountsOnlyWhereSeen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := lookableConn(tcpPair(t, ln, "")); got != canPeek {
		t.Errorf("a TCP connection lookable: %v, want %v (canPeek)", got, canPeek)
	}
	if c, _ := newConn(t, "10.0.0.1:1"); lookableConn(c) {
		t.Error("a connection with no socket under it is lookable")
	}

	const silentGrace = 20 * time.Millisecond
	for _, tc := range []struct {
		name     string
		lookable bool
	}{
		{"seen silent", true},
		{"unseen", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sheds := make(chan string, 4)
			// An hour's admission grace: a shed within the test is the
			// silent grace's.
			b := NewWith(Options{Total: 2, SilentGrace: silentGrace, AdmitGrace: time.Hour,
				Shed: func(_ net.Addr, why, how string) { sheds <- why + " " + how }})
			b.lookable = func(net.Conn) bool { return tc.lookable }
			first, _, _ := take(t, b, "10.0.0.1:1")
			second, _, _ := take(t, b, "10.0.0.1:2") // 2 held of 2: pressure
			// Seen silent, it must go (only the silent grace can close it
			// within the hour); unseen, it must not within ten graces.
			wait := 10 * time.Second
			if !tc.lookable {
				wait = 10 * silentGrace
			}
			select {
			case got := <-sheds:
				if !tc.lookable {
					t.Fatalf("shed %q at the silent grace; want its place kept until the admission grace", got)
				}
				// Either may go first; its going ends the pressure.
				closed := first.closed.Load() || second.closed.Load()
				if want := CauseSilent + " past its grace"; got != want || !closed {
					t.Fatalf("shed %q (a connection closed: %v), want %q of one of them", got, closed, want)
				}
			case <-time.After(wait):
				if tc.lookable {
					t.Fatal("a connection seen silent under pressure kept its place past the silent grace")
				}
			}
		})
	}

	// Unseen, it goes at the admission grace.
	sheds := make(chan string, 4)
	b := NewWith(Options{Total: 2, SilentGrace: silentGrace, AdmitGrace: 5 * silentGrace,
		Shed: func(_ net.Addr, why, how string) { sheds <- why + " " + how }})
	b.lookable = notLookable
	take(t, b, "10.0.0.1:1")
	take(t, b, "10.0.0.1:2")
	// The first shed ends the pressure.
	select {
	case got := <-sheds:
		if want := CauseSilent + " past its grace"; got != want {
			t.Fatalf("shed %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an unseen silent connection under pressure outlived the admission grace")
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := New(50, 10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 500 {
				c, peer := net.Pipe()
				tc := &testConn{Conn: c, addr: tcp("10.0.0." + strconv.Itoa(i+1) + ":" + strconv.Itoa(j+1))}
				if p, served, err := b.Take(tc, 0); err == nil {
					if j%3 == 0 {
						go peer.Write([]byte{1})
						_, _ = served.Read(make([]byte, 1))
					}
					p.Release()
				}
				c.Close()
				peer.Close()
			}
		}()
	}
	wg.Wait()
	if n, s := b.InUse(); n != 0 || s != 0 {
		t.Fatalf("InUse = %d, %d", n, s)
	}
}

type sum struct {
	cause string
	n     int
}

func TestLimiterOneLinePerCause(t *testing.T) {
	sums := make(chan sum, 16)
	l := NewLimiter(50*time.Millisecond, func(cause string, n int, _ time.Duration) { sums <- sum{cause, n} })
	defer l.Close()
	if !l.Allow("a") || !l.Allow("b") {
		t.Fatal("the first refusal of a cause was held back")
	}
	for range 100 {
		if l.Allow("a") {
			t.Fatal("a repeated refusal was let through")
		}
	}
	if l.Allow("b") {
		t.Fatal("a repeated refusal was let through")
	}
	got := map[string]int{}
	for len(got) < 2 {
		select {
		case s := <-sums:
			got[s.cause] += s.n
		case <-time.After(10 * time.Second):
			t.Fatalf("no sum; got %v", got)
		}
	}
	if got["a"] != 100 || got["b"] != 1 {
		t.Fatalf("sums %v, want a:100 b:1", got)
	}
	// Quiet for an interval: forgotten, so the next is let through.
	deadline := time.Now().Add(10 * time.Second)
	for l.Tracked() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("quiet causes were never forgotten")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Nothing tracked: the timer lapses, so an idle Limiter costs nothing.
	for l.mu.Lock(); l.armed; l.mu.Lock() {
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("an idle Limiter keeps its timer armed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Unlock()
	if !l.Allow("a") {
		t.Fatal("the first refusal after a quiet interval was held back")
	}
}

func TestLimiterCloseReportsAndBoundsCauses(t *testing.T) {
	var got []sum
	l := NewLimiter(time.Hour, func(cause string, n int, _ time.Duration) { got = append(got, sum{cause, n}) })
	for i := range DefaultMaxCauses + 10 {
		l.Allow(string(rune('A' + i)))
	}
	l.Allow("A")
	l.Close()
	if l.Allow("A") {
		t.Error("let through after Close")
	}
	want := []sum{{"A", 1}, {OtherCauses, 10}} // over the cap: counted, never let through
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Close reported %v, want %v", got, want)
	}
}
