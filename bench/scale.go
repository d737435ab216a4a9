package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ScaleConfig sizes the idle-session memory benchmark.
type ScaleConfig struct {
	Ns    []int // ascending
	Token string
	// RealNs are counts of real debugpy workers (testdata/debuggee.py
	// idle), each against a fresh proxy; empty for none.
	RealNs   []int
	Python   string
	Testdata string
}

// Scale connects N idle fake executors to a proxy child and reads its
// memory and goroutines, against the same proxy with an IDE and no
// executors.
func Scale(ctx context.Context, cfg ScaleConfig, logf func(string, ...any)) (*Table, error) {
	need := uint64(cfg.Ns[len(cfg.Ns)-1]) + 256
	if limit := raiseOpenFiles(need); limit < need {
		return nil, fmt.Errorf("open files limit %d is below the %d this needs (raise ulimit -n)", limit, need)
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
	for _, n := range cfg.RealNs {
		s, b, err := scaleReal(ctx, cfg, n)
		if err != nil {
			return nil, fmt.Errorf("%d real workers: %w", n, err)
		}
		f := float64(n)
		t.Add(fmt.Sprintf("%d real debugpy workers (fresh proxy: %.1f MiB before)", n, float64(b.RSS)/(1<<20)),
			fmt.Sprintf("%.1f MiB", float64(s.RSS)/(1<<20)), kib(float64(s.RSS-b.RSS)/f),
			kib((float64(s.HeapInuse)-float64(b.HeapInuse))/f), kib((float64(s.StackInuse)-float64(b.StackInuse))/f),
			kib((float64(s.HeapInuse)+float64(s.StackInuse)-float64(b.HeapInuse)-float64(b.StackInuse))/f),
			fmt.Sprintf("%.2f", float64(s.Goroutines-b.Goroutines)/f))
		logf("scale: %d real workers measured", n)
	}
	t.Note("goal ≤ 16 KiB per idle session: %s RSS per session at %d sessions — %s", kib(perSession), last, goal(perSession <= 16*1024))
	t.Note("per-session figures are (value at N − value with no executors) ÷ N, read inside the proxy child after two forced GCs (Go heap = HeapInuse, stacks = StackInuse, RSS from /proc/self/statm); each session is a fake pydevd that finished the handshake (authorize, system info, initialize, attach, configurationDone) and reported one thread; IDE attached in merged mode")
	return t, nil
}

// scaleReal is the proxy's memory with n real debugpy workers connected
// and running (not stopped), against the same fresh proxy before them.
func scaleReal(ctx context.Context, cfg ScaleConfig, n int) (after, before Stats, err error) {
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
	if err != nil {
		return after, before, err
	}
	defer px.Close()
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		return after, before, err
	}
	defer c.Close()
	time.Sleep(500 * time.Millisecond)
	if before, err = px.Stats(true); err != nil {
		return after, before, err
	}
	script := filepath.Join(cfg.Testdata, "debuggee.py")
	var procs []*debuggeeProc
	defer func() {
		for _, d := range procs {
			d.kill()
		}
	}()
	for range n {
		d, err := startDebuggeeProc(cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, "idle", px.ExecutorAddr, "1")
		if err != nil {
			return after, before, err
		}
		procs = append(procs, d)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := px.WaitExecutors(wctx, n); err != nil {
		return after, before, err
	}
	time.Sleep(2 * time.Second)
	after, err = px.Stats(true)
	return after, before, err
}
