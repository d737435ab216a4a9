package dap

import "time"

// DefaultLeasePing is how often the proxy speaks to a worker that has a
// thread stopped, by default (Config.LeasePing).
//
// The wrapper holds every stop on a lease (its --lease, at least 10 s,
// workerwrap.MinLease): a stopped worker that hears nothing from the proxy
// for that long resumes and runs on undebugged, so that a proxy gone silent
// without closing the connection (SIGSTOP, a closed laptop, a firewall
// dropping packets) cannot hold a task forever. DAP has no ping, so the
// proxy renews the lease with a request pydevd answers on its reader thread
// without side effects, whatever the stopped thread and the IDE do:
// pydevdSystemInfo, the request of the handshake that reads the process's
// pid and Python version. The wrapper only counts the bytes pydevd reads;
// the answer is dropped.
const DefaultLeasePing = 2 * time.Second

// renewLeaseLocked makes sure the proxy renews es's lease while it has a
// stopped thread: a timer, made on the first stop, that pings every
// LeasePing and ends itself once nothing is stopped or the session is
// gone. Callers hold hub.mu, which guards leaseTimer.
func (es *ExecutorSession) renewLeaseLocked() {
	if es.leaseTimer != nil || len(es.stopped) == 0 {
		return
	}
	es.leaseTimer = time.AfterFunc(es.hub.cfg.LeasePing, es.leaseTick)
}

// leaseTick runs on es's lease timer, on no lock.
func (es *ExecutorSession) leaseTick() {
	h := es.hub
	h.mu.Lock()
	if h.executors[es.id] != es || len(es.stopped) == 0 {
		es.leaseTimer = nil
		h.mu.Unlock()
		return
	}
	es.leaseTimer.Reset(h.cfg.LeasePing)
	h.mu.Unlock()
	// The send only queues: a proxy that cannot write to a worker gone
	// silent never blocks here, and the request's timeout forgets it.
	es.request("pydevdSystemInfo", nil, h.cfg.RequestTimeout, func(Message, error) {})
}
