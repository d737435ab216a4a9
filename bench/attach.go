package bench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// AttachConfig sizes the attach-cost benchmark.
type AttachConfig struct {
	Python   string
	Testdata string // absolute path of bench/testdata
	// WrapperDir is workerwrap/python: the sparkdap row imports debugpy
	// the way the worker wrapper does.
	WrapperDir string
	Rounds     int
	Token      string
}

// attachPath is one way a worker gets a debugger attached.
type attachPath struct {
	key, name, how string
	// run starts one worker (debuggee.py) and returns the time from its
	// start until it runs its code with the debugger attached.
	run     func(ctx context.Context) (time.Duration, error)
	samples Samples
}

// timeWorker starts debuggee.py with args and times start → "RUNNING"
// (printed once debugpy.connect/wait_for_client returned). between, if
// set, is the IDE's side, run once the worker started; its error fails the
// round.
func timeWorker(ctx context.Context, py, script string, env []string, between func(ctx context.Context, d *debuggeeProc) error, args ...string) (time.Duration, error) {
	start := time.Now()
	d, err := startDebuggeeProc(py, script, env, args...)
	if err != nil {
		return 0, err
	}
	defer d.kill()
	if between != nil {
		// On this goroutine: it reads the worker's lines first.
		if err := between(ctx, d); err != nil {
			return 0, fmt.Errorf("%w: %s", err, d.stderr)
		}
	}
	if _, err := d.waitLine(ctx, "RUNNING"); err != nil {
		return 0, fmt.Errorf("%w: %s", err, d.stderr)
	}
	took := time.Since(start)
	return took, nil
}

// Attach measures what it costs a worker to get a debugger attached: from
// the worker process's start until its code runs under the debugger, for
// sparkdap (debugpy.connect to a running proxy, which does the handshake
// without waiting for anyone), debugpy.listen + wait_for_client (which
// starts debugpy's adapter as a subprocess; the IDE attaches once it
// listens), and debugpy's adapter started beforehand in listen mode (the
// IDE's attach names a port, the worker's debugpy.connect reaches it).
// Every round runs each path once, in rotating order.
func Attach(ctx context.Context, cfg AttachConfig, logf func(string, ...any)) (*Table, error) {
	script := filepath.Join(cfg.Testdata, "debuggee.py")
	px, err := StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
	if err != nil {
		return nil, err
	}
	defer px.Close()
	ide, err := attachIDE(ctx, px.IDEAddr)
	if err != nil {
		return nil, err
	}
	defer ide.Close()
	paths := []*attachPath{
		{key: "none", name: "no debugger (the floor)", how: "python3 debuggee.py: start, import debugpy, run"},
		{key: "sparkdap", name: "sparkdap (debugpy imported as the wrapper does)", how: "remote_debug._import_debugger() as the worker wrapper runs it, then debugpy.connect to a running proxy child (merged-mode IDE attached) with the wrapper's TCP_NODELAY; the proxy does the handshake itself: what a worker under sparkdap pays"},
		{key: "bare", name: "sparkdap, bare debugpy.connect", how: "as sparkdap, without the wrapper's import: debugpy as shipped describes every installed distribution before connecting"},
		{key: "listen", name: "debugpy.listen + wait_for_client", how: "the worker starts debugpy's adapter (a subprocess) and waits; the bench, as the IDE, attaches as soon as it prints its port"},
		{key: "adapter", name: "debugpy's adapter in listen mode", how: "python -m debugpy.adapter started and attached to by the IDE with \"listen\" before the worker starts (untimed); the worker's debugpy.connect reaches it"},
	}
	paths[0].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, nil, nil, "none", "-", "0")
	}
	paths[1].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token, "SPARKDAP_BENCH_WRAPPER_DIR=" + cfg.WrapperDir}, nil, "idle", px.ExecutorAddr, "1")
	}
	paths[2].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, nil, "idle", px.ExecutorAddr, "1")
	}
	paths[3].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, nil, func(ctx context.Context, d *debuggeeProc) error {
			port, err := d.waitLine(ctx, "LISTENING ")
			if err != nil {
				return err
			}
			c, err := dapclient.Dial(ctx, "127.0.0.1:"+port)
			if err != nil {
				return err
			}
			defer func() { go func() { time.Sleep(time.Second); c.Close() }() }()
			if _, err := c.Initialize(ctx, false); err != nil {
				return err
			}
			return c.Attach(ctx, map[string]any{"justMyCode": true}, nil)
		}, "listen", "-", "1")
	}
	paths[4].run = func(ctx context.Context) (time.Duration, error) {
		clientPort, err := freePort()
		if err != nil {
			return 0, err
		}
		serverPort, err := freePort()
		if err != nil {
			return 0, err
		}
		cmd := exec.Command(cfg.Python, "-m", "debugpy.adapter", "--host", "127.0.0.1", "--port", strconv.Itoa(clientPort))
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		var c *dapclient.Client
		for range 200 {
			if c, err = dapclient.Dial(ctx, "127.0.0.1:"+strconv.Itoa(clientPort)); err == nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if err != nil {
			return 0, fmt.Errorf("debugpy adapter: %w: %s", err, stderr)
		}
		defer c.Close()
		if _, err := c.Initialize(ctx, false); err != nil {
			return 0, err
		}
		attached := make(chan error, 1)
		go func() {
			attached <- c.Attach(ctx, map[string]any{"justMyCode": true,
				"listen": map[string]any{"host": "127.0.0.1", "port": serverPort}}, nil)
		}()
		// The adapter answers nothing until a debuggee connects; give it
		// time to listen on serverPort before the worker starts.
		for range 200 {
			if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(serverPort), time.Second); err == nil {
				conn.Close()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		took, err := timeWorker(ctx, cfg.Python, script, nil, nil, "idle", "127.0.0.1:"+strconv.Itoa(serverPort), "1")
		if err != nil {
			return 0, fmt.Errorf("%w: adapter: %s", err, stderr)
		}
		select {
		case err := <-attached:
			if err != nil {
				return 0, fmt.Errorf("attach through debugpy's adapter: %w: %s", err, stderr)
			}
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("attach through debugpy's adapter did not finish")
		}
		return took, nil
	}
	for r := 0; r < cfg.Rounds; r++ {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			d, err := p.run(rctx)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			p.samples = append(p.samples, d)
		}
		logf("attach: round %d/%d done", r+1, cfg.Rounds)
	}
	t := &Table{Title: "8. Attach cost per worker: process start → its code runs under the debugger",
		Header: []string{"path", "rounds", "median", "min … max", "minus no debugger", "÷ sparkdap", "sparkdap ÷ this"}}
	floor := paths[0].samples.Median()
	sp := paths[1].samples.Median()
	best := time.Duration(0)
	for _, p := range paths {
		med := p.samples.Median()
		extra, ratio, inv := "", "", ""
		if p.key != "none" {
			extra = ms(med - floor)
			ratio = fmt.Sprintf("%.2f", float64(med)/float64(sp))
			inv = fmt.Sprintf("%.2f", float64(sp)/float64(med))
		}
		if p.key == "listen" || p.key == "adapter" {
			if best == 0 || med < best {
				best = med
			}
		}
		t.Add(p.name, strconv.Itoa(len(p.samples)), ms(med), ms(p.samples.Quantile(0))+" … "+ms(p.samples.Quantile(1)), extra, ratio, inv)
	}
	for _, p := range paths {
		t.Note("%s: %s", p.name, p.how)
	}
	t.Note("goal sparkdap ≤ 0.5× the best debugpy path at the median: %.2f× — %s (net of the no-debugger floor: %.2f×)",
		float64(sp)/float64(best), goal(float64(sp) <= 0.5*float64(best)), float64(sp-floor)/float64(best-floor))
	t.Note("every round runs each path once, in rotating order; a worker is one python3 process (debuggee.py) killed after it printed RUNNING")
	return t, nil
}
