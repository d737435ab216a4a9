package admission

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultRefusalInterval is how often a RefusalLog sums up the refusals it
// did not print one by one.
const DefaultRefusalInterval = 10 * time.Second

// DefaultMaxRefusalAddrs caps the addresses a RefusalLog tracks.
const DefaultMaxRefusalAddrs = 256

// RefusalLog keeps refused workers from flooding the terminal: a
// misconfigured job (or a hostile one) can send hundreds of hellos a
// second. Per source address it prints the first refusal's line in full,
// counts the ones that follow, and prints one "… N more" line per interval
// while they go on; an address quiet for an interval is forgotten, so its
// next refusal is printed in full again. Each address has its own count, so
// one noisy address never hides another's first refusal. Memory is bounded:
// at most MaxAddrs addresses are tracked, and refusals from further ones
// share one count. It also counts the workers refused (Count), for a
// front end's statistics.
//
// count is atomic; mu guards the counts and is held while out runs, so lines come out in
// order; out must not call back into the RefusalLog. The timer runs only
// while there is something to sum up or forget: an idle RefusalLog has no
// timer.
type RefusalLog struct {
	out      func(line string)
	interval time.Duration
	maxAddrs int
	count    atomic.Int64

	mu     sync.Mutex
	addrs  map[string]*refusalCount
	others int // refusals from addresses over the cap, since the last sum
	timer  *time.Timer
	armed  bool
	closed bool
}

type refusalCount struct {
	more int       // refusals not printed since the last sum
	last time.Time // the latest refusal
}

// NewRefusalLog writes refusal lines with out (one line each, without its
// newline). interval ≤ 0 takes DefaultRefusalInterval, maxAddrs ≤ 0
// DefaultMaxRefusalAddrs.
func NewRefusalLog(out func(line string), interval time.Duration, maxAddrs int) *RefusalLog {
	if interval <= 0 {
		interval = DefaultRefusalInterval
	}
	if maxAddrs <= 0 {
		maxAddrs = DefaultMaxRefusalAddrs
	}
	return &RefusalLog{out: out, interval: interval, maxAddrs: maxAddrs, addrs: map[string]*refusalCount{}}
}

// Refused notes a refusal of a worker at addr (an IP address, so that one
// host's connections count together, as RemoteIP gives it): it counts the
// worker (Count) and prints line if it is the first from addr in a while.
// It reports whether it printed, so the caller can log the refusal at a
// level to match.
func (l *RefusalLog) Refused(addr, line string) bool {
	l.count.Add(1)
	return l.Noted(addr, line)
}

// Noted is Refused for a peer that may be no worker at all (its hello
// could not be read): its line is printed, or summed up, as a refusal's,
// but it is not counted.
func (l *RefusalLog) Noted(addr, line string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	now := time.Now()
	l.armLocked()
	if c := l.addrs[addr]; c != nil {
		c.more++
		c.last = now
		return false
	}
	if len(l.addrs) >= l.maxAddrs {
		l.others++
		return false
	}
	l.addrs[addr] = &refusalCount{last: now}
	l.out(line)
	return true
}

func (l *RefusalLog) armLocked() {
	if l.armed {
		return
	}
	l.armed = true
	if l.timer == nil {
		l.timer = time.AfterFunc(l.interval, l.tick)
	} else {
		l.timer.Reset(l.interval)
	}
}

// tick sums up the last interval and forgets the addresses gone quiet.
func (l *RefusalLog) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	if l.closed {
		return
	}
	l.sumLocked(time.Now())
	if len(l.addrs) > 0 {
		l.armLocked()
	}
}

// sumLocked prints the counts and forgets the addresses with nothing
// counted and no refusal in the last interval.
func (l *RefusalLog) sumLocked(now time.Time) {
	addrs := make([]string, 0, len(l.addrs))
	for a, c := range l.addrs {
		if c.more > 0 {
			addrs = append(addrs, a)
		} else if now.Sub(c.last) >= l.interval {
			delete(l.addrs, a)
		}
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		c := l.addrs[a]
		l.out(fmt.Sprintf("… %d more refused from %s in the last %v; they run undebugged", c.more, a, l.interval))
		c.more = 0
	}
	if l.others > 0 {
		l.out(fmt.Sprintf("… %d more refused from other addresses (over %d tracked) in the last %v; they run undebugged",
			l.others, l.maxAddrs, l.interval))
		l.others = 0
	}
}

// Close prints what is counted and not yet summed up, and stops the timer.
// Refusals after Close are not printed.
func (l *RefusalLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.sumLocked(time.Time{})
	clear(l.addrs)
}

// Count is how many workers Refused noted, Close or not.
func (l *RefusalLog) Count() int64 { return l.count.Load() }

// tracked is how many addresses l remembers, for tests.
func (l *RefusalLog) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}
