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
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/fakepydevd"
)

const idleFakesEnv = "SPARKDAP_TEST_IDLE_FAKES_ADDR"

func stackInuse() uint64 {
	for range 4 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}

// TestIdleExecutorSessionStackShrinks: an idle executor session is one
// goroutine parked in a read, and its stack is most of what it costs
// (bench section 3). The runtime halves a parked goroutine's stack at GC
// only while it uses under a quarter of it (plus an 800-byte reserve), so
// the frames under the parked read must stay under ~1.2 KiB for its stack
// to come down from 8 KiB to 4 KiB. The fake executors run in a child
// process (this test binary again), so only the proxy's stacks are counted.
func TestIdleExecutorSessionStackShrinks(t *testing.T) {
	const n = 200
	if addr := os.Getenv(idleFakesEnv); addr != "" {
		idleFakes(t, addr, n)
		return
	}
	p := quietProxy(t, nil)
	base := stackInuse()
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
	time.Sleep(200 * time.Millisecond) // the handshakes' goroutines end
	per := float64(stackInuse()-base) / n
	t.Logf("goroutine stacks per idle executor session: %.0f bytes", per)
	if per > 6<<10 {
		t.Errorf("goroutine stacks per idle executor session: %.0f bytes, want ≤ 6 KiB (its reader should park on a 4 KiB stack)", per)
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
