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

// renewLease makes sure the proxy renews es's lease while it has a
// stopped thread: a timer, made on the first stop, that pings every
// LeasePing and ends itself once nothing is stopped or the session is
// gone.
func (tx *held) renewLease(es *ExecutorSession) {
	x := tx.exec(es)
	if x.leaseTimer != nil || len(x.stopped) == 0 {
		return
	}
	x.leaseTimer = time.AfterFunc(tx.h.cfg.LeasePing, es.leaseTick)
}

// leaseTick runs on es's lease timer, on no lock.
func (es *ExecutorSession) leaseTick() {
	h := es.hub
	tx := h.lock()
	x := tx.exec(es)
	if tx.executors[es.id] != es || len(x.stopped) == 0 {
		x.leaseTimer = nil
		tx.unlock()
		return
	}
	x.leaseTimer.Reset(h.cfg.LeasePing)
	tx.unlock()
	// The send only queues: a proxy that cannot write to a worker gone
	// silent never blocks here, and the request's timeout forgets it.
	es.request("pydevdSystemInfo", nil, h.cfg.RequestTimeout, func(Message, error) {})
}
