package admission

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines collects what a RefusalLog prints.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (c *lines) add(s string) { c.mu.Lock(); c.l = append(c.l, s); c.mu.Unlock() }

func (c *lines) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.l...)
}

// TestRefusalFloodCoalesced: 300 refusals from one address print their
// first line and one sum, and another address's first refusal is printed
// in full in the middle of the flood.
func TestRefusalFloodCoalesced(t *testing.T) {
	var out lines
	l := NewRefusalLog(out.add, time.Hour, 0)
	printed := 0
	for i := range 300 {
		if l.Refused("10.0.0.1", fmt.Sprintf("worker pid %d refused", i)) {
			printed++
		}
		if i == 150 && !l.Refused("10.0.0.2", "worker pid 9 refused") {
			t.Error("the quiet address's first refusal was not printed")
		}
	}
	l.Close()
	want := []string{
		"worker pid 0 refused",
		"worker pid 9 refused",
		"… 299 more refused from 10.0.0.1 in the last 1h0m0s; they run undebugged",
	}
	if got := out.get(); strings.Join(got, "\n") != strings.Join(want, "\n") || printed != 1 {
		t.Errorf("printed %d in full; lines:\n%s\nwant:\n%s", printed, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l.Refused("10.0.0.3", "after close") {
		t.Error("printed after Close")
	}
}

// TestRefusalAddressesCapped: a flood from many addresses tracks at most
// the cap and sums the rest in one count.
func TestRefusalAddressesCapped(t *testing.T) {
	var out lines
	l := NewRefusalLog(out.add, time.Hour, 3)
	for i := range 1000 {
		l.Refused(fmt.Sprintf("10.0.%d.%d", i/256, i%256), "refused")
	}
	if n := l.limit.Tracked(); n != 3+1 {
		t.Errorf("%d counts kept, want the cap's 3 addresses and one for the rest", n)
	}
	l.Close()
	got := out.get()
	if len(got) != 4 || got[3] != "… 997 more refused from other addresses (over 3 tracked) in the last 1h0m0s; they run undebugged" {
		t.Errorf("lines: %q", got)
	}
}

// TestRefusalSumsEachIntervalAndForgets: while refusals go on, one sum per
// interval; once an address is quiet it is forgotten (its next refusal is
// printed in full) and the timer stops.
func TestRefusalSumsEachIntervalAndForgets(t *testing.T) {
	var out lines
	l := NewRefusalLog(out.add, 20*time.Millisecond, 0)
	defer l.Close()
	l.Refused("a", "first")
	l.Refused("a", "second")
	for range 500 {
		if l.limit.Tracked() == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.limit.Tracked(); n != 0 {
		t.Fatalf("a quiet address is still tracked (%d)", n)
	}
	got := out.get()
	if len(got) != 2 || !strings.HasPrefix(got[1], "… 1 more refused from a in the last 20ms") {
		t.Errorf("lines: %q", got)
	}
	if !l.Refused("a", "again") {
		t.Error("a forgotten address's next refusal was not printed")
	}
}
