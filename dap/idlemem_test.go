//go:build !race

// The race detector doubles the runtime's nosplit reserve and grows every
// frame, so stack sizes are only meaningful without it.

package dap

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

const idleFakesEnv = "SPARKDAP_TEST_IDLE_FAKES_ADDR"

// idleCost is what the proxy's goroutines hold, read after forced GCs
// (which is when the runtime shrinks stacks).
type idleCost struct {
	goroutines int
	// stackUsed is the stack the live goroutines use, stack top down to
	// where each is parked, as the last GC scanned it.
	stackUsed int64
	// stackSpans is StackInuse: the stack allocator's 32 KiB spans,
	// with their free slots and the threads' own stacks.
	stackSpans int64
}

func measureIdle() idleCost {
	for range 4 {
		runtime.GC()
	}
	s := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return idleCost{runtime.NumGoroutine(), int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())}
}

// The runtime (shrinkstack in runtime/stack.go) halves a parked
// goroutine's stack at GC only while the stack it uses plus a nosplit
// reserve (800 bytes without -race) is under a quarter of the stack. So a
// reader whose stack grew to 8 KiB while handling messages comes back to
// 4 KiB at the next GC if it parks using under 2048 − 800 bytes. 4 KiB is
// the floor: 2 KiB would take under 224 bytes, less than the netpoller's
// own frames under a read.
const (
	stackNosplit       = 800
	parkedStackMaxUsed = 8<<10/4 - stackNosplit
)

// TestIdleExecutorSessionStackShrinks: an idle executor session is one
// goroutine, its reader, parked in a read on a 4 KiB stack, which is most
// of what it costs (bench, idle sessions). It asserts that condition rather
// than a stack size: whether a reader's stack ever reached 8 KiB depends
// on what it handled (these fakes' handshake may not take it there), and
// the per-goroutine size is not observable. The fake executors run in a
// child process (this test binary again), so only the proxy's goroutines
// are counted.
//
// StackInuse per session is logged, not bounded: it counts whole 32 KiB
// spans of the stack allocator, and after the burst of handshakes (stacks
// growing, exiting, moving at GC) the spans' free slots, kept for later
// stacks, lie scattered among the parked readers: 4.9–7.9 KiB per session
// here at 200 sessions on two cores, with every reader on a 4 KiB stack
// (read from the runtime's goroutine list), and 4.0–4.2 KiB at 1,000 and
// 10,000 (bench, idle sessions).
func TestIdleExecutorSessionStackShrinks(t *testing.T) {
	const n = 200
	if addr := os.Getenv(idleFakesEnv); addr != "" {
		idleFakes(t, addr, n)
		return
	}
	p := quietProxy(t, nil)
	base := measureIdle()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIdleExecutorSessionStackShrinks$", "-test.count=1")
	cmd.Env = append(os.Environ(), idleFakesEnv+"="+p.srv.ExecutorAddr().String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
	}
	for range 250 {
		if len(p.hub.Executors()) == n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := len(p.hub.Executors()); got != n {
		t.Fatalf("%d executors in service, want %d", got, n)
	}
	// Beside the readers: os/exec's goroutine watching ctx.
	const others = 4
	for range 250 { // the handshakes' goroutines end
		if runtime.NumGoroutine()-base.goroutines <= n+others {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	idle := measureIdle()
	goroutines := idle.goroutines - base.goroutines
	used := float64(idle.stackUsed-base.stackUsed) / n
	t.Logf("%d goroutines for %d idle executor sessions; stack used per session %.0f bytes (shrinks to 4 KiB below %d); StackInuse per session %.0f bytes",
		goroutines, n, used, parkedStackMaxUsed, float64(idle.stackSpans-base.stackSpans)/n)
	if goroutines > n+others {
		t.Errorf("%d goroutines for %d idle executor sessions, want one each (its reader)", goroutines, n)
	} else if used >= parkedStackMaxUsed {
		t.Errorf("stack used per idle executor session: %.0f bytes, want under %d (else a reader whose stack grew to 8 KiB stays there)", used, parkedStackMaxUsed)
	}
}

// idleFakes is the child's side: n fake pydevd peers that finish the
// handshake and stay idle until stdin closes.
func idleFakes(t *testing.T, addr string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peers := make([]*fakepydevd.Peer, 0, n)
	for i := range n {
		p, err := fakepydevd.Dial(ctx, addr, fakepydevd.Config{Token: testToken, PID: 20000 + i})
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, p)
	}
	for _, p := range peers {
		select {
		case <-p.Configured():
		case <-ctx.Done():
			t.Fatal("fake pydevd not configured in time")
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, p := range peers {
		p.Close()
	}
}
