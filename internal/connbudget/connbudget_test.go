package connbudget

import (
	"net"
	"sync"
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

func TestBudgetLimits(t *testing.T) {
	b := New(5, 2)
	a, c, d := tcp("10.0.0.1:1"), tcp("10.0.0.2:1"), tcp("10.0.0.3:1")
	var held []func()
	take := func(addr net.Addr, wantCause string) {
		t.Helper()
		rel, cause, ok := b.Take(addr)
		if ok != (wantCause == "") || cause != wantCause {
			t.Fatalf("Take(%v) = %v, %q; want cause %q", addr, ok, cause, wantCause)
		}
		if ok {
			held = append(held, rel)
		}
	}
	take(a, "")
	take(a, "")
	take(a, CausePerSource) // one host holds its share at most
	take(c, "")
	take(c, "")
	take(d, "")
	take(d, CauseTotal)
	if n, s := b.InUse(); n != 5 || s != 3 {
		t.Fatalf("InUse = %d places, %d sources; want 5, 3", n, s)
	}
	held[0]()
	held[0]() // twice gives back one place
	take(a, "")
	take(d, CauseTotal)
	for _, r := range held {
		r()
	}
	if n, s := b.InUse(); n != 0 || s != 0 {
		t.Fatalf("InUse after releasing all = %d, %d", n, s)
	}
}

func TestBudgetDefaults(t *testing.T) {
	if b := New(0, 0); b.Total() != DefaultTotal || b.PerSource() != DefaultTotal {
		t.Errorf("New(0, 0) = %d, %d", b.Total(), b.PerSource())
	}
	if b := New(4, 10); b.PerSource() != 4 {
		t.Errorf("per source over total: %d", b.PerSource())
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := New(50, 10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := tcp("10.0.0." + string(rune('1'+i)) + ":1")
			for range 1000 {
				if rel, _, ok := b.Take(addr); ok {
					rel()
				}
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
