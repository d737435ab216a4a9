package admission

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/internal/connbudget"
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
// at most maxAddrs addresses are tracked, and refusals from further ones
// share one count. It also counts the workers refused (Count), for a
// front end's statistics.
//
// The per-address limiting is a connbudget.Limiter keyed by address (the
// same limiter that keeps the budgets' refusals of connections to a line
// per cause). out runs under the limiter's lock for the sums and on the
// caller's goroutine for a first line; it must not call back into the
// RefusalLog. count is atomic.
type RefusalLog struct {
	out        func(line string)
	maxAddrs   int
	limit      *connbudget.Limiter
	count      atomic.Int64
	undebugged atomic.Int64
	lastReason atomic.Pointer[string] // the latest Undebugged reason
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
	l := &RefusalLog{out: out, maxAddrs: maxAddrs}
	l.limit = connbudget.NewLimiterMax(interval, maxAddrs, l.sum)
	return l
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
	if !l.limit.Allow(addr) {
		return false
	}
	l.out(line)
	return true
}

// Undebugged notes a worker at addr that cannot load a debugger, for the
// reason given (cleaned): it counts it (UndebuggedCount), keeps the reason
// (LastUndebugged) and prints line as Noted does. It reports whether it
// printed.
func (l *RefusalLog) Undebugged(addr, reason, line string) bool {
	l.undebugged.Add(1)
	l.lastReason.Store(&reason)
	return l.Noted(addr, line)
}

// UndebuggedCount is how many workers Undebugged noted.
func (l *RefusalLog) UndebuggedCount() int64 { return l.undebugged.Load() }

// LastUndebugged is the reason Undebugged noted last, or "".
func (l *RefusalLog) LastUndebugged() string {
	if p := l.lastReason.Load(); p != nil {
		return *p
	}
	return ""
}

// sum prints what the limiter held back from addr in the last interval.
func (l *RefusalLog) sum(addr string, more int, interval time.Duration) {
	if addr == connbudget.OtherCauses {
		l.out(fmt.Sprintf("… %d more refused from other addresses (over %d tracked) in the last %v; they run undebugged",
			more, l.maxAddrs, interval))
		return
	}
	l.out(fmt.Sprintf("… %d more refused from %s in the last %v; they run undebugged", more, addr, interval))
}

// Close prints what is counted and not yet summed up, and stops the timer.
// Refusals after Close are not printed.
func (l *RefusalLog) Close() { l.limit.Close() }

// Count is how many workers Refused noted, Close or not.
func (l *RefusalLog) Count() int64 { return l.count.Load() }
