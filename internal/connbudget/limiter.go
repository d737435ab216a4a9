package connbudget

import (
	"sort"
	"sync"
	"time"
)

// DefaultLogInterval is how often a Limiter sums up what it held back.
const DefaultLogInterval = 10 * time.Second

// DefaultMaxCauses bounds the causes a Limiter tracks by default;
// refusals of further causes share OtherCauses.
const DefaultMaxCauses = 64

// OtherCauses is the cause refusals are counted under once a Limiter's
// cap of causes is tracked; they are never let through, only counted.
const OtherCauses = "other causes"

// Limiter rate-limits log lines per cause: Allow lets the first refusal of
// a cause through, then counts that cause's refusals, and once per interval
// hands the count to out (one line per cause per interval, whatever the
// rate). A cause with no refusal for a whole interval is forgotten, so its
// next refusal is let through again.
//
// mu guards the counts and is held while out runs, so lines come out in
// order; out must not call back into the Limiter. The timer runs only while
// a cause is tracked: an idle Limiter has no timer.
type Limiter struct {
	interval  time.Duration
	maxCauses int
	out       func(cause string, suppressed int, interval time.Duration)

	mu     sync.Mutex
	causes map[string]*causeCount
	timer  *time.Timer
	armed  bool
	closed bool
}

type causeCount struct {
	held int       // refusals held back since the last sum
	last time.Time // the latest refusal
}

// NewLimiter returns a Limiter that reports held-back refusals with out.
// interval ≤ 0 takes DefaultLogInterval; it tracks DefaultMaxCauses causes.
func NewLimiter(interval time.Duration, out func(cause string, suppressed int, interval time.Duration)) *Limiter {
	return NewLimiterMax(interval, 0, out)
}

// NewLimiterMax is NewLimiter tracking at most maxCauses causes (≤ 0:
// DefaultMaxCauses): a flood of distinct causes (source addresses, say)
// costs bounded memory.
func NewLimiterMax(interval time.Duration, maxCauses int, out func(cause string, suppressed int, interval time.Duration)) *Limiter {
	if interval <= 0 {
		interval = DefaultLogInterval
	}
	if maxCauses <= 0 {
		maxCauses = DefaultMaxCauses
	}
	return &Limiter{interval: interval, maxCauses: maxCauses, out: out, causes: map[string]*causeCount{}}
}

// Allow notes one refusal of cause and reports whether to log it in full
// (at warning level, say); when false, log it at debug level at most: out
// will count it.
func (l *Limiter) Allow(cause string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	now := time.Now()
	c := l.causes[cause]
	if c == nil && len(l.causes) >= l.maxCauses {
		cause = OtherCauses
		c = l.causes[cause]
		if c == nil {
			c = &causeCount{}
			l.causes[cause] = c
		}
	}
	l.armLocked()
	if c != nil {
		c.held++
		c.last = now
		return false
	}
	l.causes[cause] = &causeCount{last: now}
	return true
}

func (l *Limiter) armLocked() {
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

func (l *Limiter) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	if l.closed {
		return
	}
	l.sumLocked(time.Now())
	if len(l.causes) > 0 {
		l.armLocked()
	}
}

// sumLocked reports the held-back counts, by cause, and forgets the causes
// with nothing held and no refusal in the last interval.
func (l *Limiter) sumLocked(now time.Time) {
	causes := make([]string, 0, len(l.causes))
	for k, c := range l.causes {
		if c.held > 0 {
			causes = append(causes, k)
		} else if now.Sub(c.last) >= l.interval {
			delete(l.causes, k)
		}
	}
	sort.Strings(causes)
	for _, k := range causes {
		c := l.causes[k]
		l.out(k, c.held, l.interval)
		c.held = 0
	}
}

// Close reports what is held back and stops the timer; refusals after it
// are neither let through nor counted.
func (l *Limiter) Close() {
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
	clear(l.causes)
}

// Tracked is how many causes l remembers now (OtherCauses included):
// what its memory holds, bounded by its cap plus one.
func (l *Limiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.causes)
}
