package pycharm

import "time"

// SetMaxPendingHellos lowers the cap on pending hellos for a test; the
// returned func restores it.
func SetMaxPendingHellos(n int) func() {
	old := maxPendingHellos
	maxPendingHellos = n
	return func() { maxPendingHellos = old }
}

// SetIdentifyTimeout changes how long a new connection has to say which
// process it is, for a test; the returned func restores it.
func SetIdentifyTimeout(d time.Duration) func() {
	old := identifyTimeout
	identifyTimeout = d
	return func() { identifyTimeout = old }
}

// MaxUnidentifiedBytes is what a pydevd connection may send before its
// answer to the proxy's probe.
const MaxUnidentifiedBytes = maxUnidentifiedBytes

// SetClock replaces p's MaxStop clock; call it before any worker stops.
func SetClock(p *Proxy, now func() time.Time) {
	p.mu.Lock()
	p.now = now
	p.mu.Unlock()
}

// CheckMaxStop runs worker pid's MaxStop check now, as its timer would.
func CheckMaxStop(p *Proxy, pid int64) {
	p.mu.Lock()
	e := p.execs[pid]
	p.mu.Unlock()
	if e != nil {
		p.checkMaxStop(e)
	}
}
