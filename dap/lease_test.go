package dap

import (
	"testing"
	"time"
)

// TestStoppedWorkerHearsFromTheProxy: while a worker has a stopped thread
// the proxy sends it pydevdSystemInfo at a steady interval, however idle
// the IDE: that renews the lease the wrapper holds the stop on. Once the
// worker runs again, its lease needs no renewing.
func TestStoppedWorkerHearsFromTheProxy(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.LeasePing = 20 * time.Millisecond })
	c := p.ide(false, nil)
	f := p.executor(71, nil)
	handshake := f.waitRequest("pydevdSystemInfo", nil).Seq()
	if n := f.Count("pydevdSystemInfo"); n != 1 {
		t.Fatalf("a running worker got %d pydevdSystemInfo requests; want the handshake's alone", n)
	}
	f.stop()
	tid := stoppedOn(p.ctx, t, c)
	// Three pings after the handshake's, the IDE doing nothing.
	last := handshake
	for range 3 {
		last = f.waitRequest("pydevdSystemInfo", func(m Message) bool { return m.Seq() > last }).Seq()
	}
	if n := f.Count("continue"); n != 0 {
		t.Fatalf("the worker was sent %d continue requests while the IDE did nothing", n)
	}
	if err := c.Continue(p.ctx, tid); err != nil {
		t.Fatal(err)
	}
	tx := p.hub.lock()
	var es *ExecutorSession
	for _, e := range tx.executors {
		es = e
	}
	tx.unlock()
	for range 500 {
		tx := p.hub.lock()
		ended := tx.exec(es).leaseTimer == nil
		tx.unlock()
		if ended {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the proxy went on renewing the lease of a running worker")
}
