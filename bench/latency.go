package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/breakmark"
	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/quickack"
)

// LatencyConfig sizes the request-latency benchmark.
type LatencyConfig struct {
	Python   string
	Testdata string // absolute path of bench/testdata
	// Requests is how many of each kind (threads, stackTrace, evaluate) each
	// fast path gets.
	Requests int
	// SlowRequests caps the samples of a path found to cost tens of
	// milliseconds per request (pydevd's Nagle stall), so a run stays short.
	SlowRequests int
	Token        string
}

// latencyPath is one way of reaching a stopped pydevd.
type latencyPath struct {
	key, name, how string
	client         *dapclient.Client
	cleanup        []func()
	threadID       int
	frameID        int
	samples        map[string]Samples
	slow           bool
}

var latencyKinds = []string{"threads", "stackTrace", "evaluate"}

// debuggeeProc is a running testdata/debuggee.py.
type debuggeeProc struct {
	cmd    *exec.Cmd
	lines  chan string
	waited chan error
	stderr *lockedBuffer
}

func startDebuggeeProc(py, script string, env []string, args ...string) (*debuggeeProc, error) {
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startDebuggeeCmd(cmd)
}

// startDebuggeeCmd starts cmd, whose stdout and stderr must be unset, and
// reads its stdout lines.
func startDebuggeeCmd(cmd *exec.Cmd) (*debuggeeProc, error) {
	d := &debuggeeProc{cmd: cmd, lines: make(chan string, 16), waited: make(chan error, 1), stderr: &lockedBuffer{}}
	cmd.Stderr = d.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case d.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { d.waited <- cmd.Wait() }()
	return d, nil
}

func (d *debuggeeProc) waitLine(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l := <-d.lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		case err := <-d.waited:
			return "", fmt.Errorf("debuggee exited (%v) before %q: %s", err, prefix, d.stderr)
		case <-ctx.Done():
			return "", fmt.Errorf("debuggee: no %q line: %w: %s", prefix, ctx.Err(), d.stderr)
		}
	}
}

func (d *debuggeeProc) kill() {
	_ = d.cmd.Process.Kill()
	select {
	case <-d.waited:
	case <-time.After(5 * time.Second):
	}
}

// stopAt waits for the stop and finds the top frame.
func (p *latencyPath) stopAt(ctx context.Context) error {
	st, err := p.client.StoppedEvent(ctx)
	if err != nil {
		return err
	}
	p.threadID = st.ThreadId
	frames, err := p.client.StackTrace(ctx, p.threadID)
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return fmt.Errorf("no frames")
	}
	p.frameID = frames[0].Id
	return nil
}

func (p *latencyPath) close() {
	if p.client != nil {
		p.client.Close()
	}
	for i := len(p.cleanup) - 1; i >= 0; i-- {
		p.cleanup[i]()
	}
}

func (p *latencyPath) request(ctx context.Context, kind string) (time.Duration, error) {
	var args any
	switch kind {
	case "threads":
		args = map[string]any{}
	case "stackTrace":
		args = dap.StackTraceArguments{ThreadId: p.threadID, Levels: 20}
	case "evaluate":
		args = dap.EvaluateArguments{Expression: "x + len(values)", FrameId: p.frameID, Context: "watch"}
	}
	t0 := time.Now()
	resp, err := p.client.Request(ctx, kind, args)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if !resp.Success {
		return 0, resp.Err()
	}
	return d, nil
}

// setupDirect: the bench is the adapter; the debuggee's debugpy.connect
// reaches the bench's listener and the client does the adapter handshake.
// With relay, it reaches the listener through a byte relay child.
func setupDirect(ctx context.Context, cfg LatencyConfig, p *latencyPath, script string, line int, relay bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, func() { ln.Close() })
	addr := ln.Addr().String()
	if relay {
		r, err := StartProxy(ctx, ProxyConfig{RelayTo: addr})
		if err != nil {
			return err
		}
		p.cleanup = append(p.cleanup, r.Close)
		addr = r.ExecutorAddr
	}
	d, err := startDebuggeeProc(cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, "connect", addr, "1")
	if err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, d.kill)
	type acc struct {
		c   net.Conn
		err error
	}
	ch := make(chan acc, 1)
	go func() { c, err := ln.Accept(); ch <- acc{c, err} }()
	var conn net.Conn
	select {
	case a := <-ch:
		if a.err != nil {
			return a.err
		}
		conn = a.c
	case <-ctx.Done():
		return fmt.Errorf("debuggee never connected: %w: %s", ctx.Err(), d.stderr)
	}
	p.client = dapclient.New(quickack.Wrap(conn))
	if os.Getenv("BENCH_TRACE") != "" {
		p.client.SetTrace(func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
	}
	auth, err := p.client.Request(ctx, "pydevdAuthorize", map[string]any{"debugServerAccessToken": nil})
	if err != nil {
		return err
	}
	var ab struct {
		Token string `json:"clientAccessToken"`
	}
	if err := auth.Decode(&ab); err != nil || ab.Token != cfg.Token {
		return fmt.Errorf("pydevdAuthorize: token %q, err %v", ab.Token, err)
	}
	if _, err := p.client.Request(ctx, "pydevdSystemInfo", nil); err != nil {
		return err
	}
	if _, err := p.client.Initialize(ctx, false); err != nil {
		return err
	}
	err = p.client.Attach(ctx, map[string]any{"justMyCode": true, "redirectOutput": true}, func(ctx context.Context) error {
		_, err := p.client.SetBreakpoints(ctx, script, line)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, d.stderr)
	}
	if err := p.stopAt(ctx); err != nil {
		return fmt.Errorf("%w: %s", err, d.stderr)
	}
	return nil
}

// setupProxy: the IDE attaches to a sparkdap proxy child, then the
// debuggee's debugpy.connect reaches the proxy's executor port.
func setupProxy(ctx context.Context, cfg LatencyConfig, p *latencyPath, script string, line int, nodelay bool) error {
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
	if err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, px.Close)
	if p.client, err = dapclient.Dial(ctx, px.IDEAddr); err != nil {
		return err
	}
	if _, err := p.client.Initialize(ctx, false); err != nil {
		return err
	}
	err = p.client.Attach(ctx, map[string]any{"justMyCode": true}, func(ctx context.Context) error {
		_, err := p.client.SetBreakpoints(ctx, script, line)
		return err
	})
	if err != nil {
		return err
	}
	nd := "0"
	if nodelay {
		nd = "1"
	}
	d, err := startDebuggeeProc(cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, "connect", px.ExecutorAddr, nd)
	if err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, d.kill)
	if err := p.stopAt(ctx); err != nil {
		return fmt.Errorf("%w: %s", err, d.stderr)
	}
	return nil
}

// setupDebugpyAdapter: debugpy.listen in the debuggee, which runs
// `python -m debugpy.adapter`; the IDE attaches to the adapter.
func setupDebugpyAdapter(ctx context.Context, cfg LatencyConfig, p *latencyPath, script string, line int, nodelay bool) error {
	nd := "0"
	if nodelay {
		nd = "1"
	}
	d, err := startDebuggeeProc(cfg.Python, script, nil, "listen", "-", nd)
	if err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, d.kill)
	port, err := d.waitLine(ctx, "LISTENING ")
	if err != nil {
		return err
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	if p.client, err = dapclient.Dial(ctx, "127.0.0.1:"+port); err != nil {
		return err
	}
	if _, err := p.client.Initialize(ctx, false); err != nil {
		return err
	}
	err = p.client.Attach(ctx, map[string]any{"justMyCode": true}, func(ctx context.Context) error {
		_, err := p.client.SetBreakpoints(ctx, script, line)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, d.stderr)
	}
	if err := p.stopAt(ctx); err != nil {
		return fmt.Errorf("%w: %s", err, d.stderr)
	}
	return nil
}

// Latency runs the request-latency benchmark: every path is set up first,
// then requests go to each path in turn, in rounds, so all paths see the
// same machine load.
func Latency(ctx context.Context, cfg LatencyConfig, logf func(string, ...any)) (*Table, error) {
	script := filepath.Join(cfg.Testdata, "debuggee.py")
	line, err := breakmark.Line(script, "")
	if err != nil {
		return nil, err
	}
	paths := []*latencyPath{
		{key: "a", name: "(a) direct: client ↔ pydevd", how: "bench is the adapter; TCP_NODELAY on pydevd's socket (as the wrapper sets it); client re-arms TCP_QUICKACK"},
		{key: "a1", name: "(a1) direct through a byte relay", how: "as (a), through a child process that copies bytes both ways and parses nothing: the floor of any proxy in its own process"},
		{key: "b", name: "(b) through sparkdap", how: "proxy child (dap.Hub as `serve` builds it, path mapping on); TCP_NODELAY on pydevd's socket (as the wrapper sets it); proxy re-arms TCP_QUICKACK"},
		{key: "b0", name: "(b0) through sparkdap, bare debugpy.connect", how: "as (b) but no TCP_NODELAY: a worker that calls debugpy.connect itself, without the wrapper"},
		{key: "c", name: "(c) through debugpy's adapter, as shipped", how: "debugpy.listen + wait_for_client (runs python -m debugpy.adapter); nothing changed"},
		{key: "c1", name: "(c1) through debugpy's adapter + TCP_NODELAY", how: "as (c) with TCP_NODELAY set on pydevd's socket the way sparkdap's wrapper does"},
	}
	defer func() {
		for _, p := range paths {
			p.close()
		}
	}()
	setupCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for _, p := range paths {
		p.samples = map[string]Samples{}
		var err error
		switch p.key {
		case "a":
			err = setupDirect(setupCtx, cfg, p, script, line, false)
		case "a1":
			err = setupDirect(setupCtx, cfg, p, script, line, true)
		case "b":
			err = setupProxy(setupCtx, cfg, p, script, line, true)
		case "b0":
			err = setupProxy(setupCtx, cfg, p, script, line, false)
		case "c":
			err = setupDebugpyAdapter(setupCtx, cfg, p, script, line, false)
		case "c1":
			err = setupDebugpyAdapter(setupCtx, cfg, p, script, line, true)
		}
		if err != nil {
			return nil, fmt.Errorf("latency path %s: %w", p.name, err)
		}
		logf("latency: %s stopped at the breakpoint (thread %d, frame %d)", p.key, p.threadID, p.frameID)
	}
	// Warm up (imports, caches) and find the slow paths.
	for _, p := range paths {
		var w Samples
		for range 20 {
			for _, k := range latencyKinds {
				d, err := p.request(ctx, k)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", p.key, k, err)
				}
				w = append(w, d)
			}
		}
		p.slow = w.Median() > 5*time.Millisecond
	}
	const batch = 50
	rounds := max(1, cfg.Requests/batch)
	slowBatch := max(1, cfg.SlowRequests/rounds)
	start := time.Now()
	for r := range rounds {
		for i := range paths {
			p := paths[(i+r)%len(paths)] // rotate who goes first
			n := batch
			if p.slow {
				n = slowBatch
				if len(p.samples["threads"]) >= cfg.SlowRequests {
					continue
				}
			}
			for _, k := range latencyKinds {
				for range n {
					d, err := p.request(ctx, k)
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", p.key, k, err)
					}
					p.samples[k] = append(p.samples[k], d)
				}
			}
		}
		if r%20 == 19 {
			logf("latency: round %d/%d (%s)", r+1, rounds, time.Since(start).Round(time.Second))
		}
	}

	t := &Table{Title: "1. Request latency to a pydevd stopped at a breakpoint",
		Header: []string{"path", "request", "n", "p50", "p99", "p50 ÷ (a)", "p50 ÷ (c)", "p50 ÷ (c1)"}}
	by := map[string]*latencyPath{}
	for _, p := range paths {
		by[p.key] = p
	}
	for _, p := range paths {
		for _, k := range latencyKinds {
			s := p.samples[k]
			p50 := float64(s.Median())
			t.Add(p.name, k, strconv.Itoa(len(s)), ms(s.Median()), ms(s.Quantile(0.99)),
				ratio(p50, float64(by["a"].samples[k].Median())),
				ratio(p50, float64(by["c"].samples[k].Median())),
				ratio(p50, float64(by["c1"].samples[k].Median())))
		}
	}
	for _, p := range paths {
		t.Note("%s: %s", p.name, p.how)
	}
	var worstBA, worstBC, worstBC1 float64
	for _, k := range latencyKinds {
		b := float64(by["b"].samples[k].Median())
		worstBA = max(worstBA, b/float64(by["a"].samples[k].Median()))
		worstBC = max(worstBC, b/float64(by["c"].samples[k].Median()))
		worstBC1 = max(worstBC1, b/float64(by["c1"].samples[k].Median()))
	}
	t.Note("goal b/a ≤ 1.2 at p50: worst request kind %.3f — %s", worstBA, goal(worstBA <= 1.2))
	var worstA1, worstBA1 float64
	for _, k := range latencyKinds {
		a1 := float64(by["a1"].samples[k].Median())
		worstA1 = max(worstA1, a1/float64(by["a"].samples[k].Median()))
		if k != "threads" { // answered by the proxy itself: no second hop
			worstBA1 = max(worstBA1, float64(by["b"].samples[k].Median())/a1)
		}
	}
	t.Note("a second hop alone, with nothing parsed (a1/a, worst kind): %.3f; what sparkdap adds over that floor (b/a1, worst relayed kind): %.3f", worstA1, worstBA1)
	t.Note("goal b/c ≤ 0.5 at p50: worst %.3f against debugpy as shipped (%s), %.3f against debugpy with the wrapper's TCP_NODELAY fix (%s)",
		worstBC, goal(worstBC <= 0.5), worstBC1, goal(worstBC1 <= 0.5))
	t.Note("requests are sequential (one in flight), rounds of %d per kind rotate through the paths; paths slower than 5 ms at warm-up get %d samples per kind", batch, cfg.SlowRequests)
	return t, nil
}
