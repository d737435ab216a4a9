package dap

import (
	"testing"
	"time"
)

// TestAbandonedHelloGivesBackItsSlot: a worker that said hello but never
// connected its debugger (it died, or debugpy failed to load) holds a
// --max-sessions slot only until the hello expires, even if no other hello
// comes along to sweep it away.
func TestAbandonedHelloGivesBackItsSlot(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.MaxSessions = 1; c.HelloTTL = 100 * time.Millisecond })
	if got := sayHello(t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": 5}); got != "OK" {
		t.Fatalf("hello: %q", got)
	}
	for range 500 {
		tx := p.hub.lock()
		n := len(p.hub.admission.Pending())
		tx.unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A plain debugpy.connect (no hello) needs the slot the abandoned
	// hello held.
	p.executor(6, nil)
	if got := len(p.hub.Executors()); got != 1 {
		t.Fatalf("%d executors in service, want 1", got)
	}
}
