package dap

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/connbudget"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// Load tests: many in-process fake pydevd peers over loopback TCP against
// one Hub. Every loop is bounded in count and in time. SPARKDAP_LOAD=full
// runs the full sizes under -short too; -short alone runs smaller ones.

func loadSize(full, short int) int {
	if testing.Short() && os.Getenv("SPARKDAP_LOAD") != "full" {
		return short
	}
	return full
}

// lastBreakpointLines is the lines of the last setBreakpoints for path.
func (f *fakePydevd) lastBreakpointLines(path string) ([]int64, bool) {
	history := f.breakpointHistory(path)
	if len(history) == 0 {
		return nil, false
	}
	return history[len(history)-1], true
}

// breakpointHistory is the lines of every setBreakpoints for path, in the
// order the fake got them.
func (f *fakePydevd) breakpointHistory(path string) [][]int64 {
	var history [][]int64
	for _, rec := range f.Recorded() {
		r, err := dapwire.DecodeMessage(rec.Raw)
		if err != nil || r.Command() != "setBreakpoints" {
			continue
		}
		src, _ := r.Arguments()["source"].(map[string]any)
		if src["path"] != path {
			continue
		}
		lines := []int64{}
		bps, _ := r.Arguments()["breakpoints"].([]any)
		for _, b := range bps {
			if m, ok := b.(map[string]any); ok {
				n, _ := toInt(m["line"])
				lines = append(lines, n)
			}
		}
		history = append(history, lines)
	}
	return history
}

type footprint struct {
	goroutines int
	heap       uint64
}

func measure() footprint {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return footprint{runtime.NumGoroutine(), ms.HeapAlloc}
}

// settle waits (bounded) for goroutines to wind down to base+slack.
func settle(base footprint, slack int) footprint {
	var now footprint
	for range 200 {
		now = measure()
		if now.goroutines <= base.goroutines+slack {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return now
}

// checkEmpty asserts the Hub holds nothing for executors that left.
func checkEmpty(t *testing.T, h *Hub) {
	t.Helper()
	if n := len(h.Executors()); n != 0 {
		t.Errorf("%d executors still listed after all left", n)
	}
	for k := range nKinds {
		if n := h.ids.Len(k); n != 0 {
			t.Errorf("%d %s ids still held after all executors left", n, k)
		}
	}
	h.ids.mu.Lock()
	sessions := len(h.ids.sessions)
	h.ids.mu.Unlock()
	tx := h.lock()
	executors, hellos := len(tx.executors), len(h.admission.Pending())
	tx.unlock()
	if sessions != 0 || executors != 0 {
		t.Errorf("hub still holds %d id sessions and %d executors", sessions, executors)
	}
	if hellos != 0 {
		t.Errorf("%d hellos still pending after their TTL", hellos)
	}
}

func waitNoExecutors(t *testing.T, h *Hub) {
	t.Helper()
	for range 3000 {
		tx := h.lock()
		n := len(tx.executors)
		tx.unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("executors never all left: %d remain", len(h.Executors()))
}

func quietProxy(t *testing.T, mod func(*Config)) *testProxy {
	return startProxy(t, func(c *Config) {
		c.Log = zerolog.Nop()
		c.HandshakeTimeout = 30 * time.Second
		c.FanoutTimeout = 30 * time.Second
		c.HelloTTL = 200 * time.Millisecond
		// The fakes stand for many hosts' workers, all from one loopback
		// address: the port's total alone bounds them.
		c.MaxUnadmittedPerSource = connbudget.DefaultTotal
		if mod != nil {
			mod(c)
		}
	})
}

// TestLoadManyExecutorsConnectAtOnce: 1,000 executors connect within about
// a second while the IDE changes its breakpoints. Every one ends up in
// service with the IDE's current breakpoints; once all leave, the Hub
// holds nothing for them and goroutines and heap are back where they were.
func TestLoadManyExecutorsConnectAtOnce(t *testing.T) {
	n := loadSize(1000, 200)
	p := quietProxy(t, nil)
	const src = "/job/udf.py"
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, src, 5)
		return err
	})
	base := measure()

	addr := p.srv.ExecutorAddr().String()
	fakes := make([]*fakePydevd, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	var dialed atomic.Int64
	const dialers = 50
	for d := range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < n; i += dialers {
				conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- fmt.Errorf("executor %d: dial: %w", i, err)
					continue
				}
				fakes[i] = newFake(t, conn, testToken, 10000+i, nil)
				dialed.Add(1)
			}
		}()
	}
	// Change the breakpoints while executors are arriving.
	time.Sleep(20 * time.Millisecond)
	if _, err := c.SetBreakpoints(p.ctx, src, 5, 7); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	dialTime := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ready sync.WaitGroup
	readyErrs := make(chan error, n)
	for _, f := range fakes {
		ready.Add(1)
		go func() {
			defer ready.Done()
			if _, err := f.awaitRequest("configurationDone", nil, 60*time.Second); err != nil {
				readyErrs <- err
			}
		}()
	}
	ready.Wait()
	readyTime := time.Since(start)
	close(readyErrs)
	for err := range readyErrs {
		t.Fatal(err)
	}
	t.Logf("%d executors: all dialed in %v, all in service after %v", n, dialTime.Round(time.Millisecond), readyTime.Round(time.Millisecond))

	// Every executor in service is listed, exactly once.
	listed := map[int64]bool{}
	for _, e := range p.hub.Executors() {
		listed[e.Process.PID] = true
	}
	if len(listed) != n {
		t.Errorf("Executors() lists %d, want %d", len(listed), n)
	}
	// Every executor got the current breakpoints (lines 5 and 7), whether
	// it arrived before, during or after the change.
	lost := 0
	for _, f := range fakes {
		if !listed[int64(f.pid)] {
			t.Errorf("executor pid %d in service but not listed", f.pid)
		}
		var lines []int64
		for range 500 {
			if lines, _ = f.lastBreakpointLines(src); slices.Equal(lines, []int64{5, 7}) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !slices.Equal(lines, []int64{5, 7}) {
			lost++
			if lost < 5 {
				t.Errorf("executor pid %d's last breakpoints for %s are %v, want [5 7]", f.pid, src, lines)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d executors lost a breakpoint change", lost, n)
	}
	during := measure()

	for _, f := range fakes {
		f.Close()
	}
	waitNoExecutors(t, p.hub)
	fakes = nil
	checkEmpty(t, p.hub)
	after := settle(base, 10)
	// What remains on the heap is mostly the runtime's cache of exited
	// goroutines' descriptors (runtime.malg, ~2 MB for 5,000), not ours.
	t.Logf("goroutines: %d before, %d with %d executors, %d after; heap: %.1f MB before, %.1f MB with, %.1f MB after",
		base.goroutines, during.goroutines, n, after.goroutines,
		float64(base.heap)/1e6, float64(during.heap)/1e6, float64(after.heap)/1e6)
	if after.goroutines > base.goroutines+10 {
		t.Errorf("goroutine leak: %d before, %d after all %d executors left", base.goroutines, after.goroutines, n)
	}
	if after.heap > base.heap+8<<20 {
		t.Errorf("heap grew from %d to %d bytes after all %d executors left", base.heap, after.heap, n)
	}
}

// cycleKind is how one executor of the connect/disconnect test behaves.
type cycleKind int

const (
	cyclePlain      cycleKind = iota // debugpy.connect, handshake, breakpoints, leave
	cycleHello                       // hello first, then as plain
	cycleHelloOnly                   // hello, then never connects (expires)
	cycleEarlyLeave                  // leaves in the middle of the handshake
	cycleWrongToken                  // refused
	nCycleKinds
)

// TestLoadConnectDisconnectCycles: 10,000 executors come and go, in every
// way they may, a few dozen at a time. No goroutine, id, hello or heap
// is left behind and every executor that reached service got the
// breakpoints.
func TestLoadConnectDisconnectCycles(t *testing.T) {
	cycles := loadSize(10000, 1000)
	// A hello's pydevd connection must come within its TTL: it presents the
	// hello's one-time token, which expires with it. 200 ms is too short
	// for 32 workers under the race detector on a shared 2-core machine.
	p := quietProxy(t, func(c *Config) { c.HelloTTL = 2 * time.Second })
	const src = "/job/udf.py"
	p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		_, err := c.SetBreakpoints(ctx, src, 5)
		return err
	})
	addr := p.srv.ExecutorAddr().String()
	// One warm-up cycle so that lazily created state counts as baseline.
	if err := oneCycle(t, addr, cyclePlain, 1, src); err != nil {
		t.Fatal(err)
	}
	waitNoExecutors(t, p.hub)
	base := measure()

	const workers = 32
	var next atomic.Int64
	var failures atomic.Int64
	errs := make(chan error, 10)
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(cycles) || time.Now().After(deadline) {
					return
				}
				if err := oneCycle(t, addr, cycleKind(i%int64(nCycleKinds)), 100000+int(i), src); err != nil {
					failures.Add(1)
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := next.Load() - 1; n < int64(cycles) {
		t.Fatalf("only %d of %d cycles ran within the time bound", n, cycles)
	}
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d cycles failed", f, cycles)
	}
	waitNoExecutors(t, p.hub)
	for range 200 { // hellos that were never claimed expire (HelloTTL)
		tx := p.hub.lock()
		n := len(p.hub.admission.Pending())
		tx.unlock()
		if n == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkEmpty(t, p.hub)
	after := settle(base, 10)
	t.Logf("%d cycles in %v (%.0f/s); goroutines %d before, %d after; heap %.1f MB before, %.1f MB after",
		cycles, elapsed.Round(time.Millisecond), float64(cycles)/elapsed.Seconds(),
		base.goroutines, after.goroutines, float64(base.heap)/1e6, float64(after.heap)/1e6)
	if after.goroutines > base.goroutines+10 {
		t.Errorf("goroutine leak: %d before, %d after %d cycles", base.goroutines, after.goroutines, cycles)
	}
	if after.heap > base.heap+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over %d cycles", base.heap, after.heap, cycles)
	}
}

// oneCycle plays one executor from connect to leave.
func oneCycle(t *testing.T, addr string, kind cycleKind, pid int, src string) error {
	const wait = 60 * time.Second
	if kind == cycleHello || kind == cycleHelloOnly {
		if err := hello(addr, pid); err != nil {
			return err
		}
		if kind == cycleHelloOnly {
			return nil
		}
	}
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	defer conn.Close()
	token := testToken
	if kind == cycleWrongToken {
		token = "wrong"
	}
	f := newFake(t, conn, token, pid, nil)
	switch kind {
	case cycleEarlyLeave:
		_, err = f.awaitRequest("pydevdSystemInfo", nil, wait)
		return err
	case cycleWrongToken:
		if _, err := f.awaitRequest("configurationDone", nil, wait); err != nil {
			return err
		}
		select {
		case <-f.Done():
			return nil
		case <-time.After(wait):
			return fmt.Errorf("pid %d: refused executor not let go", pid)
		}
	}
	if _, err := f.awaitRequest("configurationDone", nil, wait); err != nil {
		return err
	}
	if lines, ok := f.lastBreakpointLines(src); !ok || !slices.Equal(lines, []int64{5}) {
		return fmt.Errorf("pid %d: in service with breakpoints %v for %s, want [5]", pid, lines, src)
	}
	return nil
}

// hello plays the wrapper's hello.
func hello(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	reply, derived, err := admission.Introduce(c, testToken, admission.TaskInfo{PID: int64(pid)})
	if err != nil || reply != "OK" {
		return fmt.Errorf("pid %d: hello: no OK (%q): %v", pid, reply, err)
	}
	helloTokens.Store(helloTokenKey(addr, pid), derived)
	return nil
}
