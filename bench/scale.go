package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// ScaleConfig sizes the idle-session memory benchmark.
type ScaleConfig struct {
	Ns    []int // ascending
	Token string
}

// Scale connects N idle fake executors to a proxy child and reads its
// memory and goroutines, against the same proxy with an IDE and no
// executors.
func Scale(ctx context.Context, cfg ScaleConfig, logf func(string, ...any)) (*Table, error) {
	need := uint64(cfg.Ns[len(cfg.Ns)-1]) + 256
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < need {
		if rl.Max >= need {
			rl.Cur = need
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
		if rl.Cur < need {
			return nil, fmt.Errorf("open files limit %d is below the %d this needs (raise ulimit -n)", rl.Cur, need)
		}
	}
	root, err := os.MkdirTemp("", "sparkdap-bench-root")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: root})
	if err != nil {
		return nil, err
	}
	defer px.Close()
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	time.Sleep(500 * time.Millisecond)
	base, err := px.Stats(true)
	if err != nil {
		return nil, err
	}
	t := &Table{Title: "3. Memory per idle executor session (proxy process)",
		Header: []string{"sessions", "RSS total", "RSS / session", "Go heap / session", "goroutine stacks / session", "heap + stacks / session", "goroutines / session"}}
	t.Add("0 (IDE attached)", fmt.Sprintf("%.1f MiB", float64(base.RSS)/(1<<20)), "", "", "", "", strconv.Itoa(base.Goroutines)+" total")
	swarm := &fakeSwarm{}
	defer swarm.close()
	var perSession float64
	var last int
	for _, n := range cfg.Ns {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		start := time.Now()
		err := swarm.grow(gctx, px.ExecutorAddr, cfg.Token, "/job/udf.py", n, 64)
		if err == nil {
			err = px.WaitExecutors(gctx, n)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%d sessions: %w", n, err)
		}
		logf("scale: %d sessions connected in %s", n, time.Since(start).Round(time.Millisecond))
		time.Sleep(2 * time.Second) // let handshake timers and buffers settle
		s, err := px.Stats(true)
		if err != nil {
			return nil, err
		}
		f := float64(n)
		rss := float64(s.RSS-base.RSS) / f
		heap := (float64(s.HeapInuse) - float64(base.HeapInuse)) / f
		stack := (float64(s.StackInuse) - float64(base.StackInuse)) / f
		t.Add(strconv.Itoa(n), fmt.Sprintf("%.1f MiB", float64(s.RSS)/(1<<20)), kib(rss), kib(heap), kib(stack), kib(heap+stack),
			fmt.Sprintf("%.2f", float64(s.Goroutines-base.Goroutines)/f))
		perSession, last = rss, n
	}
	t.Note("goal ≤ 16 KiB per idle session: %s RSS per session at %d sessions — %s", kib(perSession), last, goal(perSession <= 16*1024))
	t.Note("per-session figures are (value at N − value with no executors) ÷ N, read inside the proxy child after two forced GCs (Go heap = HeapInuse, stacks = StackInuse, RSS from /proc/self/statm); each session is a fake pydevd that finished the handshake (authorize, system info, initialize, attach, configurationDone) and reported one thread; IDE attached in merged mode")
	return t, nil
}
