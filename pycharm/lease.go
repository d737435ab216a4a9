package pycharm

import "time"

// DefaultLeasePing is how often the proxy speaks to a worker that has a
// thread stopped, by default (Config.LeasePing).
//
// The wrapper holds every stop on a lease (its --lease, at least 10 s): a
// stopped worker that hears nothing from the proxy for that long resumes
// and runs on undebugged, so that a proxy gone silent without closing the
// connection (SIGSTOP, a closed laptop, a firewall dropping packets)
// cannot hold a task forever. The proxy renews it with CMD_LIST_THREADS,
// the request it already probes every connection with: pydevd-pycharm
// answers it on its reader thread, without side effects, whatever the
// stopped thread and PyCharm do. The wrapper only counts the bytes pydevd
// reads; the answer is swallowed.
const DefaultLeasePing = 2 * time.Second

// renewLeaseLocked makes sure the proxy renews e's lease while it has a
// stopped thread: a timer, made on the first stop, that pings every
// LeasePing and ends itself once nothing is stopped or e left. Callers
// hold p.mu, which guards e.leaseTimer and e.leasePing.
func (p *Proxy) renewLeaseLocked(e *executor) {
	if e.leaseTimer != nil || len(e.stopped) == 0 {
		return
	}
	e.leaseTimer = time.AfterFunc(p.cfg.LeasePing, func() { p.leaseTick(e) })
}

// leaseTick runs on e's lease timer.
func (p *Proxy) leaseTick(e *executor) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.execs[e.pid] != e || len(e.stopped) == 0 {
		e.leaseTimer = nil
		return
	}
	e.leaseTimer.Reset(p.cfg.LeasePing)
	// One ping waits for its answer at most: a worker gone silent must not
	// pile up pending requests until its connection ends.
	if e.leasePing != 0 {
		delete(e.pending, e.leasePing)
	}
	p.forward(e, Message{ID: CmdListThreads}, request{swallow: true})
	e.leasePing = e.seq
}
