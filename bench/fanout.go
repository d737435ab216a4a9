package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// FanoutConfig sizes the breakpoint fan-out benchmark.
type FanoutConfig struct {
	Python   string
	Testdata string
	// Ns are the fake executor counts, ascending; RealNs the counts of real
	// debugpy processes.
	Ns, RealNs []int
	Repeats    int
	Token      string
}

// fakeSwarm connects fake pydevd peers to addr.
type fakeSwarm struct {
	mu    sync.Mutex
	peers []*fakepydevd.Peer
}

// grow connects peers until there are n, at most conc handshakes at a time.
func (s *fakeSwarm) grow(ctx context.Context, addr, token, framePath string, n, conc int) error {
	s.mu.Lock()
	have := len(s.peers)
	s.mu.Unlock()
	if n <= have {
		return nil
	}
	sem := make(chan struct{}, conc)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for i := have; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			p, err := fakepydevd.Dial(ctx, addr, fakepydevd.Config{Token: token, PID: 100000 + i, FramePath: framePath})
			if err == nil {
				select {
				case <-p.Configured():
				case <-p.Done():
					err = fmt.Errorf("fake %d: connection ended during the handshake: %v", i, p.Err())
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			if err != nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
			s.mu.Lock()
			s.peers = append(s.peers, p)
			s.mu.Unlock()
		}(i)
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (s *fakeSwarm) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.peers {
		p.Close()
	}
	for _, p := range s.peers {
		<-p.Done()
	}
	s.peers = nil
}

// attachIDE attaches a merged-mode IDE client to a proxy.
func attachIDE(ctx context.Context, addr string) (*dapclient.Client, error) {
	c, err := dapclient.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Initialize(ctx, false); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Attach(ctx, map[string]any{"justMyCode": true}, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// timeSetBreakpoints times repeats setBreakpoints requests on path, each
// changing the lines, and checks each merged answer.
func timeSetBreakpoints(ctx context.Context, c *dapclient.Client, path string, lines []int, repeats int) (Samples, error) {
	var s Samples
	for r := range repeats {
		// Alternate between all lines and all but the last, so each
		// request changes something.
		ls := lines
		if r%2 == 1 {
			ls = lines[:len(lines)-1]
		}
		bps := make([]dap.SourceBreakpoint, len(ls))
		for i, l := range ls {
			bps[i] = dap.SourceBreakpoint{Line: l}
		}
		t0 := time.Now()
		resp, err := c.Request(ctx, "setBreakpoints", dap.SetBreakpointsArguments{Source: dap.Source{Path: path}, Breakpoints: bps})
		d := time.Since(t0)
		if err != nil {
			return nil, err
		}
		var body dap.SetBreakpointsResponseBody
		if err := resp.Err(); err != nil {
			return nil, err
		}
		if err := resp.Decode(&body); err != nil {
			return nil, err
		}
		if len(body.Breakpoints) != len(ls) {
			return nil, fmt.Errorf("merged answer has %d breakpoints, want %d", len(body.Breakpoints), len(ls))
		}
		s = append(s, d)
	}
	return s, nil
}

func fanoutLines(path, marker string) ([]int, error) {
	var out []int
	b, err := readLines(path)
	if err != nil {
		return nil, err
	}
	for i, l := range b {
		if containsMarker(l, marker) {
			out = append(out, i+1)
		}
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("want at least 2 %s lines in %s", marker, path)
	}
	return out, nil
}

// Fanout measures the time from the IDE's setBreakpoints to the proxy's
// merged answer with N executors connected.
func Fanout(ctx context.Context, cfg FanoutConfig, logf func(string, ...any)) (*Table, error) {
	script := filepath.Join(cfg.Testdata, "debuggee.py")
	lines, err := fanoutLines(script, "# FANOUT")
	if err != nil {
		return nil, err
	}
	t := &Table{Title: "2. Breakpoint fan-out: setBreakpoints → merged answer",
		Header: []string{"executors", "kind", "repeats", "p50", "p99", "p50 per executor"}}
	var p50At1, p50AtMax float64
	var nMax int

	// Fake peers, one proxy, growing N.
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
	if err != nil {
		return nil, err
	}
	defer px.Close()
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	swarm := &fakeSwarm{}
	defer swarm.close()
	for _, n := range cfg.Ns {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := swarm.grow(gctx, px.ExecutorAddr, cfg.Token, script, n, 64)
		if err == nil {
			err = px.WaitExecutors(gctx, n)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("fan-out to %d fakes: %w", n, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		// Warm-up, then measure.
		_, err = timeSetBreakpoints(rctx, c, script, lines, 2)
		var s Samples
		if err == nil {
			s, err = timeSetBreakpoints(rctx, c, script, lines, cfg.Repeats)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("fan-out to %d fakes: %w", n, err)
		}
		logf("fanout: %d fake executors: p50 %s", n, ms(s.Median()))
		t.Add(strconv.Itoa(n), "fake pydevd (in the bench process)", strconv.Itoa(len(s)), ms(s.Median()), ms(s.Quantile(0.99)),
			fmt.Sprintf("%.1f µs", float64(s.Median())/float64(n)/1e3))
		if n == cfg.Ns[0] {
			p50At1 = float64(s.Median())
		}
		p50AtMax, nMax = float64(s.Median()), n
	}
	swarm.close()
	c.Close()
	px.Close()

	// Real debugpy processes.
	for _, n := range cfg.RealNs {
		s, err := fanoutReal(ctx, cfg, script, lines, n)
		if err != nil {
			return nil, fmt.Errorf("fan-out to %d debugpy processes: %w", n, err)
		}
		logf("fanout: %d debugpy processes: p50 %s", n, ms(s.Median()))
		t.Add(strconv.Itoa(n), "real debugpy (TCP_NODELAY as the wrapper sets it)", strconv.Itoa(len(s)), ms(s.Median()),
			ms(s.Quantile(0.99)), fmt.Sprintf("%.1f µs", float64(s.Median())/float64(n)/1e3))
	}
	if nMax > cfg.Ns[0] {
		t.Note("growth: p50 goes from %s at %d executor(s) to %s at %d, %.1f µs per added executor",
			ms(time.Duration(p50At1)), cfg.Ns[0], ms(time.Duration(p50AtMax)), nMax,
			(p50AtMax-p50At1)/float64(nMax-cfg.Ns[0])/1e3)
	}
	if nMax >= 1000 {
		t.Note("goal fan-out to 1,000 executors under 50 ms: p50 %s — %s", ms(time.Duration(p50AtMax)), goal(p50AtMax < float64(50*time.Millisecond)))
	}
	t.Note("one setBreakpoints with 2–3 lines per request, alternating so every request changes the set; the IDE is one merged-mode DAP client; fakes answer from one goroutine each in the bench process, which shares the 2 CPUs with the proxy")
	return t, nil
}

func fanoutReal(ctx context.Context, cfg FanoutConfig, script string, lines []int, n int) (Samples, error) {
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
	if err != nil {
		return nil, err
	}
	defer px.Close()
	c, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var procs []*debuggeeProc
	defer func() {
		for _, d := range procs {
			d.kill()
		}
	}()
	for range n {
		d, err := startDebuggeeProc(cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, "idle", px.ExecutorAddr, "1")
		if err != nil {
			return nil, err
		}
		procs = append(procs, d)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := px.WaitExecutors(wctx, n); err != nil {
		return nil, err
	}
	if _, err := timeSetBreakpoints(wctx, c, script, lines, 2); err != nil {
		return nil, err
	}
	return timeSetBreakpoints(wctx, c, script, lines, cfg.Repeats)
}
