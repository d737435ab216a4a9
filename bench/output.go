package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// The real-debugpy output section: workers that print() 80-byte lines
// (testdata/printer.py) through pydevd's redirection, the proxy and a
// merged-mode IDE, three ways in the same run: no debugger at all, pydevd's
// output as shipped (one event per write), and with the worker wrapper's
// output batching (workerwrap/python/remote_debug/output.py, _batch_output).

// OutputConfig sizes the real-debugpy output benchmark.
type OutputConfig struct {
	Python     string
	Testdata   string
	WrapperDir string // workerwrap/python, where the remote_debug package is
	Workers    []int  // worker processes per run
	Lines      int    // print() lines per worker per run
	Rounds     int
	Token      string
}

// OutputModes are printer.py's modes, in the order the report lists them.
var OutputModes = []string{"plain", "unbatched", "batched"}

var outputModeNames = map[string]string{
	"plain":     "no debugger: the print() loop alone",
	"unbatched": "debugpy as shipped: one output event per write",
	"batched":   "debugpy + the wrapper's output batching",
}

// OutputRun is one run: n workers printing under one mode.
type OutputRun struct {
	Mode    string
	Workers int
	Bytes   int64 // text printed, all workers
	Elapsed time.Duration
	Events  int64 // output events the IDE received
	// OrderErrors counts lines that arrived out of order, twice or not at
	// all (a gap), over all workers.
	OrderErrors int
	ProxyCPU    time.Duration
	WorkerCPU   time.Duration // the workers' process CPU from "go" to the end of the run
	WorkerPeak  int64         // largest worker peak RSS (VmHWM), bytes
}

// MBps is the run's throughput in 10⁶ bytes of printed text per second.
func (r OutputRun) MBps() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// outputIDE is a merged-mode DAP client that checks the workers' lines as
// they arrive: every "w<id> <seq>" line in sequence, each worker's
// "END w<id>" last.
type outputIDE struct {
	conn   net.Conn
	attach attachWatch
	done   chan struct{}

	mu     sync.Mutex // guards the fields below; the reader goroutine writes them
	events int64
	next   map[string]int
	ended  map[string]bool
	errs   int
	err    error
	change chan struct{}
}

func dialOutputIDE(ctx context.Context, addr string) (*outputIDE, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &outputIDE{conn: c, attach: newAttachWatch(), done: make(chan struct{}), next: map[string]int{}, ended: map[string]bool{}, change: make(chan struct{}, 1)}
	if err := sendMergedAttach(c); err != nil {
		c.Close()
		return nil, err
	}
	go r.read()
	err = r.attach.wait(ctx, r.done, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	})
	if err != nil {
		r.conn.Close()
		<-r.done
		return nil, err
	}
	return r, nil
}

func (r *outputIDE) read() {
	defer close(r.done)
	fr := dapwire.NewFrameReader(bufio.NewReaderSize(r.conn, 256<<10), 0)
	var buf []byte
	for {
		var err error
		if buf, err = fr.ReadFrameInto(buf); err != nil {
			r.fail(err)
			return
		}
		if !bytes.Contains(buf, outputMarker) {
			if err := r.attach.see(buf); err != nil {
				r.fail(err)
				return
			}
			continue
		}
		var m struct {
			Event string `json:"event"`
			Body  struct {
				Output string `json:"output"`
			} `json:"body"`
		}
		if err := json.Unmarshal(buf, &m); err != nil || m.Event != "output" {
			continue
		}
		r.take(m.Body.Output)
	}
}

func (r *outputIDE) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// take checks one output event. Every line of a worker's arrives whole in
// one event (pydevd sends each write as it is, the batcher cuts batches
// after newlines), after the proxy's "[label] " prefix.
func (r *outputIDE) take(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	for line := range strings.SplitSeq(text, "\n") {
		if _, rest, ok := strings.Cut(line, "] "); ok {
			line = rest
		}
		if id, ok := strings.CutPrefix(line, "END w"); ok {
			r.ended[id] = true
			select {
			case r.change <- struct{}{}:
			default:
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "w")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 3 {
			continue
		}
		seq, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		if r.ended[f[0]] || seq != r.next[f[0]] {
			r.errs++
		}
		r.next[f[0]] = seq + 1
	}
}

// wait returns once every worker's END line arrived.
func (r *outputIDE) wait(ctx context.Context, workers int) error {
	for {
		r.mu.Lock()
		n, err := len(r.ended), r.err
		r.mu.Unlock()
		if n >= workers {
			return nil
		}
		select {
		case <-r.change:
		case <-r.done:
			return fmt.Errorf("IDE connection ended after %d of %d workers' output: %v", n, workers, err)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d workers' output arrived: %w", n, workers, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// check counts the order errors, including lines that never came.
func (r *outputIDE) check(lines int) (events int64, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs = r.errs
	for _, next := range r.next {
		if next != lines {
			errs += max(lines-next, 1)
		}
	}
	return r.events, errs
}

func (r *outputIDE) close() { r.conn.Close(); <-r.done }

// printerProc is a running testdata/printer.py.
type printerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	cpu    chan time.Duration
	waited chan error
	stderr *lockedBuffer
}

func startPrinter(cfg OutputConfig, mode, addr string, id int) (*printerProc, error) {
	cmd := exec.Command(cfg.Python, cfg.Testdata+"/printer.py", mode, addr, strconv.Itoa(id), strconv.Itoa(cfg.Lines))
	cmd.Env = append(os.Environ(), "SPARKDAP_TOKEN="+cfg.Token, "SPARKDAP_WRAPPER_DIR="+cfg.WrapperDir)
	p := &printerProc{cmd: cmd, ready: make(chan struct{}), cpu: make(chan time.Duration, 1), waited: make(chan error, 1), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// The real stdout stands for the executor log: read it all, keep the
	// control lines.
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if line == "READY" {
				close(p.ready)
			} else if v, ok := strings.CutPrefix(line, "CPU "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				p.cpu <- time.Duration(f * float64(time.Second))
			}
		}
	}()
	go func() { p.waited <- cmd.Wait() }()
	return p, nil
}

func (p *printerProc) waitFor(ctx context.Context, ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case err := <-p.waited:
		p.waited <- err
		return fmt.Errorf("printer exited (%v) before %s: %s", err, what, p.stderr)
	case <-ctx.Done():
		return fmt.Errorf("printer: no %s: %w: %s", what, ctx.Err(), p.stderr)
	}
}

func (p *printerProc) kill() {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.waited:
	case <-time.After(5 * time.Second):
	}
}

// peakRSS is a process's VmHWM in bytes (Linux), or 0.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is a process's user+system CPU time (Linux, 100 ticks/s), or 0.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state); utime, stime are fields 14, 15
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// RunOutput runs n printers in one mode: a fresh proxy child and IDE for
// the debugged modes; start → every worker ready → "go" to all at once →
// every END line in the IDE (no debugger: every worker's loop done).
func RunOutput(ctx context.Context, cfg OutputConfig, mode string, n int) (OutputRun, error) {
	run := OutputRun{Mode: mode, Workers: n, Bytes: int64(n) * int64(cfg.Lines) * 80}
	var px *Proxy
	var ide *outputIDE
	addr := "-"
	if mode != "plain" {
		var err error
		px, err = StartProxy(ctx, ProxyConfig{Token: cfg.Token, Root: cfg.Testdata})
		if err != nil {
			return run, err
		}
		defer px.Close()
		if ide, err = dialOutputIDE(ctx, px.IDEAddr); err != nil {
			return run, err
		}
		defer ide.close()
		addr = px.ExecutorAddr
	}
	var procs []*printerProc
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for i := range n {
		p, err := startPrinter(cfg, mode, addr, i)
		if err != nil {
			return run, err
		}
		procs = append(procs, p)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, p := range procs {
		if err := p.waitFor(sctx, p.ready, "READY"); err != nil {
			return run, err
		}
	}
	if px != nil {
		if err := px.WaitExecutors(sctx, n); err != nil {
			return run, err
		}
	}
	var proxyCPU0, workerCPU0 time.Duration
	if px != nil {
		proxyCPU0 = procCPU(px.PID())
	}
	for _, p := range procs {
		workerCPU0 += procCPU(p.cmd.Process.Pid)
	}
	start := time.Now()
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return run, fmt.Errorf("printer: %w: %s", err, p.stderr)
		}
	}
	for _, p := range procs {
		select {
		case <-p.cpu:
		case <-sctx.Done():
			return run, fmt.Errorf("printer did not finish: %w: %s", sctx.Err(), p.stderr)
		}
	}
	if ide != nil {
		if err := ide.wait(sctx, n); err != nil {
			return run, err
		}
	}
	run.Elapsed = time.Since(start)
	if px != nil {
		run.ProxyCPU = procCPU(px.PID()) - proxyCPU0
	}
	for _, p := range procs {
		run.WorkerCPU += procCPU(p.cmd.Process.Pid)
		run.WorkerPeak = max(run.WorkerPeak, peakRSS(p.cmd.Process.Pid))
	}
	run.WorkerCPU -= workerCPU0
	if ide != nil {
		run.Events, run.OrderErrors = ide.check(cfg.Lines)
	}
	return run, nil
}

// Output runs the section: for each worker count, every mode once per
// round in rotating order.
func Output(ctx context.Context, cfg OutputConfig, logf func(string, ...any)) (*Table, error) {
	t := &Table{
		Title: "6. Output from real debugpy workers: print() → pydevd → proxy → IDE",
		Header: []string{"workers", "mode", "rounds", "MB per run", "MB/s (median)", "÷ as shipped", "÷ no debugger",
			"output events per run", "proxy CPU per MB", "worker CPU per MB", "worker peak RSS", "lines out of order or missing"},
	}
	for _, n := range cfg.Workers {
		runs := map[string][]OutputRun{}
		for round := range cfg.Rounds {
			for i := range OutputModes {
				mode := OutputModes[(i+round)%len(OutputModes)]
				r, err := RunOutput(ctx, cfg, mode, n)
				if err != nil {
					return nil, fmt.Errorf("%s, %d workers: %w", mode, n, err)
				}
				logf("output %s n=%d: %.2f MB/s, %d events, proxy %v, workers %v, %d order errors",
					mode, n, r.MBps(), r.Events, r.ProxyCPU, r.WorkerCPU, r.OrderErrors)
				runs[mode] = append(runs[mode], r)
			}
		}
		med := map[string]float64{}
		for _, mode := range OutputModes {
			var v []float64
			for _, r := range runs[mode] {
				v = append(v, r.MBps())
			}
			med[mode] = medianFloat(v)
		}
		for _, mode := range OutputModes {
			rs := runs[mode]
			var events, errs int64
			var proxy, worker time.Duration
			var peak int64
			for _, r := range rs {
				events += r.Events
				errs += int64(r.OrderErrors)
				proxy += r.ProxyCPU
				worker += r.WorkerCPU
				peak = max(peak, r.WorkerPeak)
			}
			mb := float64(rs[0].Bytes) / 1e6 * float64(len(rs))
			eventsCell, proxyCell, errsCell := "—", "—", "—"
			if mode != "plain" {
				eventsCell = strconv.FormatInt(events/int64(len(rs)), 10)
				proxyCell = ms(time.Duration(float64(proxy) / mb))
				errsCell = strconv.FormatInt(errs, 10)
			}
			t.Add(strconv.Itoa(n), outputModeNames[mode], strconv.Itoa(len(rs)), fmt.Sprintf("%.2f", mb/float64(len(rs))),
				fmt.Sprintf("%.2f", med[mode]), ratio(med[mode], med["unbatched"]), ratio(med[mode], med["plain"]),
				eventsCell, proxyCell, ms(time.Duration(float64(worker)/mb)), fmt.Sprintf("%.1f MiB", float64(peak)/(1<<20)), errsCell)
		}
		t.Note("%d worker(s): batched ÷ as shipped = %s (goal ≥ 40: %s)", n, ratio(med["batched"], med["unbatched"]),
			goal(med["unbatched"] > 0 && med["batched"]/med["unbatched"] >= 40))
	}
	t.Note("each worker print()s %d lines of 80 bytes (MB = 10⁶ bytes of printed text); time from \"go\" to all workers until the IDE (merged mode, one DAP client that parses every output event and checks each worker's line numbers) holds every worker's last line; no debugger: until every worker's loop is done. The workers' real stdout (the executor log) goes to a pipe the benchmark reads in every mode", cfg.Lines)
	t.Note("proxy CPU = the proxy child's user+system time (/proc, 10 ms ticks) over the run ÷ MB; worker CPU = the workers' process CPU (all threads, pydevd's included) from \"go\" until the IDE has everything ÷ MB; a fresh proxy per run; workers, proxy and IDE share the machine's CPUs")
	return t, nil
}
