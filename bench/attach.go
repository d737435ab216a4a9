package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/sshdtest"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// AttachConfig sizes the attach-cost benchmark.
type AttachConfig struct {
	Python   string
	Testdata string // absolute path of bench/testdata
	Rounds   int
	Token    string
}

// The two ways a worker starts: a fresh Python process, or (as PySpark
// starts its workers) a fork of a long-lived daemon process.
const (
	modelFresh = "fresh process"
	modelFork  = "fork of a daemon"
)

// attachPath is one way a worker gets a debugger attached.
type attachPath struct {
	model, key, name, how string
	// run starts one worker (debuggee.py, or a fork of forkdaemon.py) and
	// returns the time from its start (or the fork request) until it runs
	// its code with the debugger attached.
	run     func(ctx context.Context) (time.Duration, error)
	samples Samples
}

// forkDaemon is a running testdata/forkdaemon.py: the stand-in for
// pyspark.daemon, which forks a worker on command. One per preload, for
// the whole section, as PySpark keeps its daemon.
type forkDaemon struct {
	*debuggeeProc
	stdin io.WriteCloser
}

func startForkDaemon(ctx context.Context, py, script string, env []string, preload string) (*forkDaemon, error) {
	cmd := exec.Command(py, script, preload)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	d, err := startDebuggeeCmd(cmd)
	if err != nil {
		return nil, err
	}
	fd := &forkDaemon{debuggeeProc: d, stdin: stdin}
	if _, err := d.waitLine(ctx, "READY"); err != nil {
		fd.close()
		return nil, fmt.Errorf("fork daemon (%s): %w", preload, err)
	}
	return fd, nil
}

func (fd *forkDaemon) close() {
	_ = fd.stdin.Close()
	fd.kill()
}

// timeFork asks the daemon for a worker that attaches in mode to addr, and
// times the request → "RUNNING"; between is as for timeWorker. The worker
// is killed and reaped before it returns.
func (fd *forkDaemon) timeFork(ctx context.Context, mode, addr string, between func(ctx context.Context, d *debuggeeProc) error) (time.Duration, error) {
	start := time.Now()
	if _, err := fmt.Fprintf(fd.stdin, "FORK %s %s\n", mode, addr); err != nil {
		return 0, fmt.Errorf("fork daemon: %w: %s", err, fd.stderr)
	}
	defer func() {
		if _, err := io.WriteString(fd.stdin, "KILL\n"); err == nil {
			kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = fd.waitLine(kctx, "KILLED")
			cancel()
		}
	}()
	if between != nil {
		if err := between(ctx, fd.debuggeeProc); err != nil {
			return 0, fmt.Errorf("%w: %s", err, fd.stderr)
		}
	}
	if _, err := fd.waitLine(ctx, "RUNNING"); err != nil {
		return 0, fmt.Errorf("%w: %s", err, fd.stderr)
	}
	return time.Since(start), nil
}

// attachListening is the IDE's side of debugpy.listen + wait_for_client:
// it attaches as soon as the worker prints the port it listens on.
func attachListening(ctx context.Context, d *debuggeeProc) error {
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
}

// withListeningAdapter starts debugpy's adapter and attaches to it in
// listen mode, as an IDE does (untimed), then times worker(addr), addr
// being where the adapter waits for the debuggee, and checks that the
// IDE's attach completed.
func withListeningAdapter(ctx context.Context, py string, worker func(addr string) (time.Duration, error)) (time.Duration, error) {
	ports, err := sshdtest.FreePorts("127.0.0.1", 2)
	if err != nil {
		return 0, err
	}
	clientPort, serverPort := ports[0], ports[1]
	cmd := exec.Command(py, "-m", "debugpy.adapter", "--host", "127.0.0.1", "--port", strconv.Itoa(clientPort))
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
	took, err := worker("127.0.0.1:" + strconv.Itoa(serverPort))
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
// the worker's start until its code runs under the debugger, for sparkdap
// (debugpy.connect to a running proxy, which does the handshake without
// waiting for anyone), debugpy.listen + wait_for_client (which starts
// debugpy's adapter as a subprocess; the IDE attaches once it listens), and
// debugpy's adapter started beforehand in listen mode (the IDE's attach
// names a port, the worker's debugpy.connect reaches it). Each in two
// models: the worker a fresh Python process, and the worker forked from a
// long-lived daemon (forkdaemon.py), which is how PySpark starts workers:
// there sparkdap's daemon has loaded the debugger before it forks
// (remote_debug._preload_debugger), while the debugpy paths follow PySpark's
// documented recipe (the worker function imports the debugger), plus the
// adapter path with the import hoisted into the daemon, to show what the
// hoisting alone is worth. Every round runs each path once, in rotating
// order.
func Attach(ctx context.Context, cfg AttachConfig, logf func(string, ...any)) (*Table, error) {
	script := filepath.Join(cfg.Testdata, "debuggee.py")
	daemonScript := filepath.Join(cfg.Testdata, "forkdaemon.py")
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
	// The sparkdap rows run the wrapper `sparkdap wrap` renders, settings
	// baked in its header, as Spark would import it.
	wrapperDir, err := os.MkdirTemp("", "sparkdap-bench-attach-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(wrapperDir)
	o := workerwrap.NewOptions()
	o.Proxy = px.ExecutorAddr
	wrapperFile := filepath.Join(wrapperDir, workerwrap.FileName)
	if err := workerwrap.WriteFile(wrapperFile, o); err != nil {
		return nil, err
	}
	// An executor's Python caches the wrapper's bytecode beside it (the
	// --py-files directory is the executor's and writable), so only its
	// first worker compiles the 150 KB source. This machine may run with
	// PYTHONDONTWRITEBYTECODE=1, which would make every fresh worker here
	// compile it again; debugpy's own modules were compiled at install.
	if out, err := exec.CommandContext(ctx, cfg.Python, "-c",
		"import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)", wrapperFile).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compile the wrapper: %v: %s", err, out)
	}
	daemons := map[string]*forkDaemon{}
	defer func() {
		for _, d := range daemons {
			d.close()
		}
	}()
	for _, preload := range []string{"none", "sparkdap", "debugpy"} {
		d, err := startForkDaemon(ctx, cfg.Python, daemonScript,
			[]string{"SPARKDAP_TOKEN=" + cfg.Token, "SPARKDAP_BENCH_WRAPPER_DIR=" + wrapperDir}, preload)
		if err != nil {
			return nil, err
		}
		daemons[preload] = d
	}
	paths := []*attachPath{
		{model: modelFresh, key: "none", name: "no debugger (the floor)", how: "python3 debuggee.py: start, import debugpy, run"},
		{model: modelFresh, key: "sparkdap", name: "sparkdap (debugpy imported as the wrapper does)", how: "remote_debug._import_debugger() as the worker wrapper runs it, then debugpy.connect to a running proxy child (merged-mode IDE attached) with the wrapper's TCP_NODELAY; the proxy does the handshake itself: what a worker under sparkdap pays"},
		{model: modelFresh, key: "bare", name: "sparkdap, bare debugpy.connect", how: "as sparkdap, without the wrapper's import: debugpy as shipped describes every installed distribution before connecting, and pydevd sleeps 0.1 s after starting its threads"},
		{model: modelFresh, key: "listen", name: "debugpy.listen + wait_for_client", how: "the worker starts debugpy's adapter (a subprocess) and waits; the bench, as the IDE, attaches as soon as it prints its port"},
		{model: modelFresh, key: "adapter", name: "debugpy's adapter in listen mode", how: "python -m debugpy.adapter started and attached to by the IDE with \"listen\" before the worker starts (untimed); the worker's debugpy.connect reaches it"},
		{model: modelFork, key: "none", name: "no debugger (the floor)", how: "forkdaemon.py forks a worker that prints RUNNING; timed from the fork request (a line on the daemon's stdin) to that line"},
		{model: modelFork, key: "sparkdap", name: "sparkdap (debugger loaded in the daemon)", how: "the daemon ran remote_debug._preload_debugger() once, as the wrapper's daemon does before manager(); the worker runs _import_debugger() (already loaded) and debugpy.connect to the proxy with TCP_NODELAY, as the fresh sparkdap row"},
		{model: modelFork, key: "listen", name: "debugpy.listen + wait_for_client, recipe", how: "PySpark's documented recipe: the forked worker function imports debugpy, then listen + wait_for_client; the bench attaches as the IDE"},
		{model: modelFork, key: "adapter", name: "debugpy's adapter in listen mode, recipe", how: "the forked worker function imports debugpy and debugpy.connect()s to an adapter the IDE attached to in listen mode (untimed)"},
		{model: modelFork, key: "hoisted", name: "debugpy's adapter in listen mode, import in the daemon", how: "as the recipe row, but the daemon imported debugpy and debugpy.server.api (pydevd) before forking: what hoisting the import alone is worth, without sparkdap's other changes (no environment description, no 0.1 s sleep)"},
	}
	paths[0].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, nil, nil, "none", "-", "0")
	}
	paths[1].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token, "SPARKDAP_BENCH_WRAPPER_DIR=" + wrapperDir}, nil, "idle", px.ExecutorAddr, "1")
	}
	paths[2].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, []string{"SPARKDAP_TOKEN=" + cfg.Token}, nil, "idle", px.ExecutorAddr, "1")
	}
	paths[3].run = func(ctx context.Context) (time.Duration, error) {
		return timeWorker(ctx, cfg.Python, script, nil, attachListening, "listen", "-", "1")
	}
	paths[4].run = func(ctx context.Context) (time.Duration, error) {
		return withListeningAdapter(ctx, cfg.Python, func(addr string) (time.Duration, error) {
			return timeWorker(ctx, cfg.Python, script, nil, nil, "idle", addr, "1")
		})
	}
	paths[5].run = func(ctx context.Context) (time.Duration, error) {
		return daemons["none"].timeFork(ctx, "none", "-", nil)
	}
	paths[6].run = func(ctx context.Context) (time.Duration, error) {
		return daemons["sparkdap"].timeFork(ctx, "sparkdap", px.ExecutorAddr, nil)
	}
	paths[7].run = func(ctx context.Context) (time.Duration, error) {
		return daemons["none"].timeFork(ctx, "listen", "-", attachListening)
	}
	paths[8].run = func(ctx context.Context) (time.Duration, error) {
		return withListeningAdapter(ctx, cfg.Python, func(addr string) (time.Duration, error) {
			return daemons["none"].timeFork(ctx, "connect", addr, nil)
		})
	}
	paths[9].run = func(ctx context.Context) (time.Duration, error) {
		return withListeningAdapter(ctx, cfg.Python, func(addr string) (time.Duration, error) {
			return daemons["debugpy"].timeFork(ctx, "connect", addr, nil)
		})
	}
	for r := 0; r < cfg.Rounds; r++ {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			d, err := p.run(rctx)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", p.model, p.name, err)
			}
			p.samples = append(p.samples, d)
		}
		logf("attach: round %d/%d done", r+1, cfg.Rounds)
	}
	t := &Table{Title: "8. Attach cost per worker: worker start (process start, or fork request) → its code runs under the debugger",
		Header: []string{"worker", "path", "rounds", "median", "min … max", "minus no debugger", "÷ sparkdap", "sparkdap ÷ this"}}
	median := func(model, key string) time.Duration {
		for _, p := range paths {
			if p.model == model && p.key == key {
				return p.samples.Median()
			}
		}
		return 0
	}
	for _, p := range paths {
		med := p.samples.Median()
		floor, sp := median(p.model, "none"), median(p.model, "sparkdap")
		extra, ratio, inv := "", "", ""
		if p.key != "none" {
			extra = ms(med - floor)
			ratio = fmt.Sprintf("%.2f", float64(med)/float64(sp))
			inv = fmt.Sprintf("%.2f", float64(sp)/float64(med))
		}
		t.Add(p.model, p.name, strconv.Itoa(len(p.samples)), ms(med), ms(p.samples.Quantile(0))+" … "+ms(p.samples.Quantile(1)), extra, ratio, inv)
	}
	for _, p := range paths {
		t.Note("%s, %s: %s", p.model, p.name, p.how)
	}
	// The goal, in each model: sparkdap against the best debugpy path a
	// user gets (in the fork model, PySpark's recipe).
	for _, model := range []string{modelFresh, modelFork} {
		floor, sp := median(model, "none"), median(model, "sparkdap")
		best := min(median(model, "listen"), median(model, "adapter"))
		t.Note("%s: goal sparkdap ≤ 0.5× the best debugpy path at the median: %.2f× — %s (net of the no-debugger floor: %.2f×)",
			model, float64(sp)/float64(best), goal(float64(sp) <= 0.5*float64(best)), float64(sp-floor)/float64(best-floor))
	}
	floor, sp, hoisted := median(modelFork, "none"), median(modelFork, "sparkdap"), median(modelFork, "hoisted")
	t.Note("%s: sparkdap ÷ debugpy's adapter with the import hoisted into the daemon (no recipe does this): %.2f× (net of the floor: %.2f×)",
		modelFork, float64(sp)/float64(hoisted), float64(sp-floor)/float64(hoisted-floor))
	t.Note("every round runs each path once, in rotating order; a fresh worker is one python3 process (debuggee.py) killed after it printed RUNNING; a forked worker is a child of one of three long-lived forkdaemon.py processes (no preload, sparkdap's, debugpy imported), killed and reaped after it printed RUNNING")
	return t, nil
}
