package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// The stop storm: N executors stop at once, and the IDE reacts to every
// stopped event the way real clients do, in one of two ways:
//
//   - refreshEveryStop: fetch the thread list, then the stopped thread's
//     stack. VS Code does this (debugSession.ts: fetchThreads on every
//     stop, one stop at a time), and nvim-dap did before 0.1.
//   - refreshWhenStale: fetch the thread list only when a thread event
//     named a thread the client does not know, or the stopped thread is
//     unknown; else only the stack. nvim-dap does this since 0.1 (2022,
//     session.lua: self.dirty.threads).
//
// In merged mode every refresh lists every executor's threads; in
// child-session mode each executor's session lists its own. A round is
// timed from the first stop to the last stack answer.

// StormConfig sizes the stop-storm benchmark.
type StormConfig struct {
	// Ns are the fake executor counts; each gets a fresh proxy per mode.
	Ns []int
	// Rounds per N (more for small N, see rounds).
	Rounds int
	Token  string
	// Python and Testdata, with RealNs, run the storm with real debugpy
	// workers (testdata/stormer.py) as well.
	Python   string
	Testdata string
	RealNs   []int
}

// Client refresh policies: what the IDE does on a stopped event.
const (
	refreshEveryStop = "every stop"
	refreshWhenStale = "when stale"
)

// StormRun is one mode at one N.
type StormRun struct {
	Mode    string // "merged" or "child"
	Refresh string // refreshEveryStop or refreshWhenStale
	N       int
	Rounds  Samples // time per round: N stops → N stack traces in the IDE
	// ProxyCPU is the proxy's CPU over the timed rounds and the resumes
	// after each.
	ProxyCPU time.Duration
	// BenchCPU is this process's CPU over the same span: the IDE client
	// (and the fakes, when they are fakes).
	BenchCPU time.Duration
	// ThreadsBytes is the size of one threads answer at the end (merged:
	// every executor's threads).
	ThreadsBytes int
	// Requests counts threads requests the executors got during the
	// timed rounds (fakes only).
	Requests int64
	// IDEThreads counts threads requests the IDE sent during the timed
	// rounds.
	IDEThreads int64
}

// PerStop is the median round time per stopped executor.
func (r StormRun) PerStop() time.Duration { return r.Rounds.Median() / time.Duration(r.N) }

// CPUPerStop is the proxy's CPU per stop.
func (r StormRun) CPUPerStop() time.Duration {
	return r.ProxyCPU / time.Duration(r.N*len(r.Rounds))
}

// stormConn is a minimal DAP client connection for the storm: it keeps no
// event log (a 1,000-executor storm is thousands of events per round) and
// hands each stopped event to onStopped on its reader goroutine.
type stormConn struct {
	conn net.Conn
	wmu  sync.Mutex
	seq  int

	mu      sync.Mutex
	pending map[int]func(dapclient.Envelope)

	onStopped func(tid int)
	onThread  func(tid int, reason string)        // thread events, on the reader goroutine
	onStart   func(seq int, args json.RawMessage) // startDebugging reverse request
	initDone  chan struct{}                       // "initialized" event seen
	done      chan struct{}
	err       error
}

func dialStorm(ctx context.Context, addr string, onStopped func(int)) (*stormConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &stormConn{conn: c, pending: map[int]func(dapclient.Envelope){}, onStopped: onStopped,
		initDone: make(chan struct{}), done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *stormConn) read() {
	defer close(s.done)
	fr := dapwire.NewFrameReader(bufio.NewReaderSize(s.conn, 64<<10), 0)
	initOnce := sync.Once{}
	for {
		body, err := fr.ReadFrame()
		if err != nil {
			s.fail(err)
			return
		}
		var m dapclient.Envelope
		if err := json.Unmarshal(body, &m); err != nil {
			s.fail(err)
			return
		}
		switch m.Type {
		case "response":
			s.mu.Lock()
			cb := s.pending[m.RequestSeq]
			delete(s.pending, m.RequestSeq)
			s.mu.Unlock()
			if cb != nil {
				cb(m)
			}
		case "event":
			switch m.Event {
			case "initialized":
				initOnce.Do(func() { close(s.initDone) })
			case "stopped":
				var b struct {
					ThreadID int `json:"threadId"`
				}
				_ = json.Unmarshal(m.Body, &b)
				if s.onStopped != nil {
					s.onStopped(b.ThreadID)
				}
			case "thread":
				var b struct {
					ThreadID int    `json:"threadId"`
					Reason   string `json:"reason"`
				}
				_ = json.Unmarshal(m.Body, &b)
				if s.onThread != nil {
					s.onThread(b.ThreadID, b.Reason)
				}
			}
		case "request":
			if m.Command == "startDebugging" && s.onStart != nil {
				s.onStart(m.Seq, m.Arguments)
			} else {
				s.respond(m.Seq, m.Command, false)
			}
		}
	}
}

func (s *stormConn) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	cbs := s.pending
	s.pending = map[int]func(dapclient.Envelope){}
	s.mu.Unlock()
	for _, cb := range cbs {
		cb(dapclient.Envelope{Message: "connection closed: " + err.Error()})
	}
}

func (s *stormConn) write(m map[string]any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.seq++
	m["seq"] = s.seq
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.conn.Write(dapwire.AppendFrame(nil, b))
	return err
}

// send sends a request; cb gets its response on the reader goroutine.
func (s *stormConn) send(command string, args any, cb func(dapclient.Envelope)) error {
	s.wmu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Lock()
	s.pending[seq] = cb
	s.mu.Unlock()
	m := map[string]any{"seq": seq, "type": "request", "command": command}
	if args != nil {
		m["arguments"] = args
	}
	b, err := json.Marshal(m)
	if err == nil {
		_, err = s.conn.Write(dapwire.AppendFrame(nil, b))
	}
	s.wmu.Unlock()
	return err
}

// call is send made synchronous.
func (s *stormConn) call(ctx context.Context, command string, args any) (dapclient.Envelope, error) {
	ch := make(chan dapclient.Envelope, 1)
	if err := s.send(command, args, func(m dapclient.Envelope) { ch <- m }); err != nil {
		return dapclient.Envelope{}, err
	}
	select {
	case m := <-ch:
		if !m.Success {
			return m, fmt.Errorf("%s: %s", command, m.Message)
		}
		return m, nil
	case <-ctx.Done():
		return dapclient.Envelope{}, fmt.Errorf("%s: %w", command, ctx.Err())
	}
}

func (s *stormConn) respond(seq int, command string, ok bool) {
	_ = s.write(map[string]any{"type": "response", "request_seq": seq, "command": command, "success": ok})
}

// attach runs initialize, attach with args, configure (if set),
// configurationDone.
func (s *stormConn) attach(ctx context.Context, childSessions bool, args any, configure func(context.Context) error) error {
	if _, err := s.call(ctx, "initialize", map[string]any{"clientID": "bench-storm", "adapterID": "debugpy",
		"linesStartAt1": true, "columnsStartAt1": true, "pathFormat": "path",
		"supportsStartDebuggingRequest": childSessions}); err != nil {
		return err
	}
	if _, err := s.call(ctx, "attach", args); err != nil {
		return err
	}
	select {
	case <-s.initDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	if configure != nil {
		if err := configure(ctx); err != nil {
			return err
		}
	}
	_, err := s.call(ctx, "configurationDone", nil)
	return err
}

func (s *stormConn) close() { s.conn.Close(); <-s.done }

// stormIDE is the IDE side of a storm: the root session and, in child
// mode, one child session per executor, each reacting to its stops as
// refresh says (threads when due, then stackTrace of the stopped thread).
type stormIDE struct {
	root    *stormConn
	ctx     context.Context
	refresh string // refreshEveryStop or refreshWhenStale

	mu       sync.Mutex
	children []*stormConn
	stops    map[*stormConn][]int // the latest stopped thread of each session, for resuming
	// known and stale are each session's client-side thread list, as
	// nvim-dap keeps it: the ids of its last threads answer, and whether a
	// thread event named an id not in it since.
	known map[*stormConn]map[int]bool
	stale map[*stormConn]bool

	settled  atomic.Int64
	target   atomic.Int64
	roundEnd chan struct{}
	errs     atomic.Int64
	firstErr atomic.Value
	lastSize atomic.Int64
	// threadsSent counts the threads requests the client sent.
	threadsSent atomic.Int64
}

func (ide *stormIDE) note(err error) {
	ide.errs.Add(1)
	ide.firstErr.CompareAndSwap(nil, err.Error())
}

// onThread notes a thread event on session s: a thread the client does
// not know makes its list stale; an exited one leaves it.
func (ide *stormIDE) onThread(s *stormConn, tid int, reason string) {
	ide.mu.Lock()
	defer ide.mu.Unlock()
	if reason == "exited" {
		delete(ide.known[s], tid)
	} else if !ide.known[s][tid] {
		ide.stale[s] = true
	}
}

// onStop reacts to one stopped event on session s.
func (ide *stormIDE) onStop(s *stormConn, tid int) {
	ide.mu.Lock()
	ide.stops[s] = append(ide.stops[s], tid)
	fetch := ide.refresh == refreshEveryStop || ide.stale[s] || !ide.known[s][tid]
	ide.mu.Unlock()
	if !fetch {
		ide.stack(s, tid)
		return
	}
	ide.threadsSent.Add(1)
	err := s.send("threads", nil, func(m dapclient.Envelope) {
		if !m.Success {
			ide.note(fmt.Errorf("threads: %s", m.Message))
		}
		ide.lastSize.Store(int64(len(m.Body)))
		var b struct {
			Threads []struct {
				ID int `json:"id"`
			} `json:"threads"`
		}
		_ = json.Unmarshal(m.Body, &b)
		known := make(map[int]bool, len(b.Threads))
		for _, t := range b.Threads {
			known[t.ID] = true
		}
		if !known[tid] {
			ide.note(fmt.Errorf("stopped thread %d not in the threads answer (%d threads)", tid, len(b.Threads)))
		}
		ide.mu.Lock()
		ide.known[s] = known
		ide.stale[s] = false
		ide.mu.Unlock()
		ide.stack(s, tid)
	})
	if err != nil {
		ide.note(err)
	}
}

// stack fetches the stopped thread's stack; its answer settles the stop.
func (ide *stormIDE) stack(s *stormConn, tid int) {
	err := s.send("stackTrace", map[string]any{"threadId": tid, "startFrame": 0, "levels": 20}, func(m dapclient.Envelope) {
		if !m.Success {
			ide.note(fmt.Errorf("stackTrace: %s", m.Message))
		}
		if ide.settled.Add(1) == ide.target.Load() {
			close(ide.roundEnd)
		}
	})
	if err != nil {
		ide.note(err)
	}
}

func newStormIDE(ctx context.Context, addr string, child bool, refresh string, configure func(context.Context, *stormConn) error) (*stormIDE, error) {
	ide := &stormIDE{ctx: ctx, refresh: refresh, stops: map[*stormConn][]int{},
		known: map[*stormConn]map[int]bool{}, stale: map[*stormConn]bool{}}
	root, err := dialStorm(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	root.onStopped = func(tid int) { ide.onStop(root, tid) }
	root.onThread = func(tid int, reason string) { ide.onThread(root, tid, reason) }
	ide.root = root
	if child {
		root.onStart = func(seq int, args json.RawMessage) {
			// Opened off the reader: the proxy waits for the answer, the
			// child's attach waits for the proxy.
			go func() {
				ok := ide.openChild(addr, args) == nil
				root.respond(seq, "startDebugging", ok)
			}()
		}
	}
	var conf func(context.Context) error
	if configure != nil {
		conf = func(ctx context.Context) error { return configure(ctx, root) }
	}
	if err := root.attach(ctx, child, map[string]any{"justMyCode": true}, conf); err != nil {
		root.close()
		return nil, err
	}
	return ide, nil
}

func (ide *stormIDE) openChild(addr string, args json.RawMessage) error {
	var req struct {
		Configuration json.RawMessage `json:"configuration"`
	}
	if err := json.Unmarshal(args, &req); err != nil {
		ide.note(err)
		return err
	}
	var c *stormConn
	c, err := dialStorm(ide.ctx, addr, func(tid int) { ide.onStop(c, tid) })
	if err != nil {
		ide.note(err)
		return err
	}
	c.onThread = func(tid int, reason string) { ide.onThread(c, tid, reason) }
	if err := c.attach(ide.ctx, true, req.Configuration, nil); err != nil {
		ide.note(err)
		c.close()
		return err
	}
	ide.mu.Lock()
	ide.children = append(ide.children, c)
	ide.mu.Unlock()
	return nil
}

func (ide *stormIDE) childCount() int {
	ide.mu.Lock()
	defer ide.mu.Unlock()
	return len(ide.children)
}

func (ide *stormIDE) close() {
	ide.mu.Lock()
	children := ide.children
	ide.mu.Unlock()
	for _, c := range children {
		c.close()
	}
	ide.root.close()
}

// arm prepares a round of n stops.
func (ide *stormIDE) arm(n int) {
	ide.settled.Store(0)
	ide.target.Store(int64(n))
	ide.roundEnd = make(chan struct{})
}

// resumeAll continues every thread that stopped, one continue per stop
// (what works on every proxy version), and waits for the answers.
func (ide *stormIDE) resumeAll(ctx context.Context) error {
	ide.mu.Lock()
	stops := ide.stops
	ide.stops = map[*stormConn][]int{}
	ide.mu.Unlock()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for s, tids := range stops {
		for _, tid := range tids {
			wg.Add(1)
			err := s.send("continue", map[string]any{"threadId": tid}, func(m dapclient.Envelope) {
				if !m.Success {
					firstErr.CompareAndSwap(nil, "continue: "+m.Message)
				}
				wg.Done()
			})
			if err != nil {
				return err
			}
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("resume: %w", ctx.Err())
	}
	if v := firstErr.Load(); v != nil {
		return errors.New(v.(string))
	}
	return nil
}

// stormRounds is how many rounds a storm of n gets: small storms are short
// and noisy, so they get more.
func stormRounds(n, rounds int) int {
	switch {
	case n <= 1:
		return rounds * 20
	case n <= 10:
		return rounds * 3
	}
	return rounds
}

// stormExecutors are the N executors of a storm: fakes or real workers.
type stormExecutors interface {
	// start connects n executors to the proxy and waits until they are
	// ready.
	start(ctx context.Context, px *Proxy, n int) error
	// stop makes every executor stop at once.
	stop() error
	// ready waits until every executor resumed and can stop again.
	ready(ctx context.Context, round int) error
	// threadsRequests counts the threads requests executors got, or -1.
	threadsRequests() int64
	close()
}

type fakeStorm struct {
	cfg   StormConfig
	swarm fakeSwarm
}

func (f *fakeStorm) start(ctx context.Context, px *Proxy, n int) error {
	if err := f.swarm.grow(ctx, px.ExecutorAddr, f.cfg.Token, "", n, 64); err != nil {
		return err
	}
	return px.WaitExecutors(ctx, n)
}

func (f *fakeStorm) stop() error                                { return stopSwarm(&f.swarm) }
func (f *fakeStorm) ready(ctx context.Context, round int) error { return nil }
func (f *fakeStorm) close()                                     { f.swarm.close() }

func (f *fakeStorm) threadsRequests() int64 {
	var t int64
	f.swarm.mu.Lock()
	for _, p := range f.swarm.peers {
		t += p.Count("threads")
	}
	f.swarm.mu.Unlock()
	return t
}

// realStorm is N testdata/stormer.py workers with real debugpy.
type realStorm struct {
	cfg   StormConfig
	procs []*stormerProc
}

type stormerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	waited chan error
	stderr *lockedBuffer
}

func (r *realStorm) start(ctx context.Context, px *Proxy, n int) error {
	script := filepath.Join(r.cfg.Testdata, "stormer.py")
	for range n {
		cmd := exec.Command(r.cfg.Python, script, px.ExecutorAddr)
		cmd.Env = append(os.Environ(), "SPARKDAP_TOKEN="+r.cfg.Token, "PYDEVD_DISABLE_FILE_VALIDATION=1")
		p := &stormerProc{cmd: cmd, lines: make(chan string, 64), waited: make(chan error, 1), stderr: &lockedBuffer{}}
		cmd.Stderr = p.stderr
		var err error
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
		}()
		go func() { p.waited <- cmd.Wait() }()
		r.procs = append(r.procs, p)
	}
	for _, p := range r.procs {
		if err := p.waitLine(ctx, "READY"); err != nil {
			return err
		}
	}
	return px.WaitExecutors(ctx, n)
}

func (p *stormerProc) waitLine(ctx context.Context, want string) error {
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return nil
			}
		case err := <-p.waited:
			return fmt.Errorf("stormer exited (%v) before %q: %s", err, want, p.stderr)
		case <-ctx.Done():
			return fmt.Errorf("stormer: no %q line: %w: %s", want, ctx.Err(), p.stderr)
		}
	}
}

func (r *realStorm) stop() error {
	for _, p := range r.procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return err
		}
	}
	return nil
}

func (r *realStorm) ready(ctx context.Context, round int) error {
	for _, p := range r.procs {
		if err := p.waitLine(ctx, "DONE "+strconv.Itoa(round)); err != nil {
			return err
		}
	}
	return nil
}

func (r *realStorm) threadsRequests() int64 { return -1 }

func (r *realStorm) close() {
	for _, p := range r.procs {
		p.stdin.Close()
	}
	for _, p := range r.procs {
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
	}
}

// RunStorm runs rounds of n executors (real debugpy workers if real, else
// fakes) stopping at once in one mode, with a client that refreshes its
// thread list as refresh says, against a fresh proxy child.
func RunStorm(ctx context.Context, cfg StormConfig, mode, refresh string, n int, real bool) (StormRun, error) {
	run := StormRun{Mode: mode, Refresh: refresh, N: n}
	pcfg := ProxyConfig{Token: cfg.Token}
	var ex stormExecutors = &fakeStorm{cfg: cfg}
	var configure func(context.Context, *stormConn) error
	if real {
		pcfg.Root = cfg.Testdata
		ex = &realStorm{cfg: cfg}
		script := filepath.Join(cfg.Testdata, "stormer.py")
		var lines []int
		b, err := readLines(script)
		if err != nil {
			return run, err
		}
		for i, l := range b {
			if containsMarker(l, "# STORM") {
				lines = append(lines, i+1)
			}
		}
		if len(lines) != 1 {
			return run, fmt.Errorf("want one # STORM line in %s", script)
		}
		configure = func(ctx context.Context, c *stormConn) error {
			_, err := c.call(ctx, "setBreakpoints", map[string]any{"source": map[string]any{"path": script},
				"breakpoints": []any{map[string]any{"line": lines[0]}}})
			return err
		}
	}
	px, err := StartProxy(ctx, pcfg)
	if err != nil {
		return run, err
	}
	defer px.Close()
	ide, err := newStormIDE(ctx, px.IDEAddr, mode == "child", refresh, configure)
	if err != nil {
		return run, err
	}
	defer ide.close()
	defer ex.close()
	gctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := ex.start(gctx, px, n); err != nil {
		return run, err
	}
	rounds := stormRounds(n, cfg.Rounds)
	// One untimed round first: the executors' first thread lists, the
	// proxy's and the client's warm-up, and in child mode the child
	// sessions, which the proxy opens for stopped workers only and keeps
	// while a worker runs the task it stopped in.
	var cpuStart, benchStart time.Duration
	for r := -1; r < rounds; r++ {
		if r == 0 {
			cpuStart, benchStart = procCPU(px.PID()), procCPU(os.Getpid())
		}
		ide.arm(n)
		threads0, ideThreads0 := ex.threadsRequests(), ide.threadsSent.Load()
		t0 := time.Now()
		if err := ex.stop(); err != nil {
			return run, err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		select {
		case <-ide.roundEnd:
		case <-rctx.Done():
			cancel()
			return run, fmt.Errorf("round %d: %d of %d stops settled: %w", r, ide.settled.Load(), n, rctx.Err())
		}
		d := time.Since(t0)
		if e := ide.errs.Load(); e > 0 {
			cancel()
			return run, fmt.Errorf("round %d: %d errors, first: %v", r, e, ide.firstErr.Load())
		}
		if r == 0 && mode == "child" && ide.childCount() != n {
			cancel()
			return run, fmt.Errorf("%d child sessions after the first round of %d stops", ide.childCount(), n)
		}
		if r >= 0 {
			run.Rounds = append(run.Rounds, d)
			run.IDEThreads += ide.threadsSent.Load() - ideThreads0
			if threads0 >= 0 {
				run.Requests += ex.threadsRequests() - threads0
			} else {
				run.Requests = -1
			}
		}
		err := ide.resumeAll(rctx)
		if err == nil {
			err = ex.ready(rctx, r+1)
		}
		cancel()
		if err != nil {
			return run, err
		}
	}
	// The whole cycle, resumes included: /proc counts in 10 ms ticks, too
	// coarse for one short round.
	run.ProxyCPU = procCPU(px.PID()) - cpuStart
	run.BenchCPU = procCPU(os.Getpid()) - benchStart
	run.ThreadsBytes = int(ide.lastSize.Load())
	return run, nil
}

// stopSwarm makes every fake stop at once (a few goroutines send the
// stopped events).
func stopSwarm(s *fakeSwarm) error {
	s.mu.Lock()
	peers := s.peers
	s.mu.Unlock()
	const senders = 8
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for k := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < len(peers); i += senders {
				if err := peers[i].Stop(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// Storm runs the stop storm for every N in both modes and with both client
// refresh policies, interleaved per N (the order rotates), and reports each
// against N times the single-executor merged round of the same kind and
// client: fakes, then real debugpy workers.
func Storm(ctx context.Context, cfg StormConfig, logf func(string, ...any)) (*Table, error) {
	t := &Table{Title: "7. Stop storm: N executors stop at once, the IDE refreshes its thread list (always, or when stale) and fetches the stack on every stop",
		Header: []string{"executors", "kind", "client refreshes threads", "mode", "rounds", "round (median)", "per stop", "÷ N × single", "merged ÷ child",
			"proxy CPU per stop", "IDE (+ fakes) CPU per stop", "threads requests from the IDE per round", "threads requests to executors per round", "threads answer"}}
	type combo struct{ mode, refresh string }
	combos := []combo{{"merged", refreshEveryStop}, {"child", refreshEveryStop}, {"merged", refreshWhenStale}, {"child", refreshWhenStale}}
	type result struct{ worst, mvc float64 }
	series := func(real bool, ns []int) error {
		kind := "fake"
		if real {
			kind = "real debugpy"
		}
		if len(ns) == 0 || ns[0] != 1 {
			ns = append([]int{1}, ns...)
		}
		single := map[string]time.Duration{}
		res := map[string]*result{refreshEveryStop: {}, refreshWhenStale: {}}
		for i, n := range ns {
			runs := map[combo]StormRun{}
			for k := range combos {
				c := combos[(i+k)%len(combos)]
				r, err := RunStorm(ctx, cfg, c.mode, c.refresh, n, real)
				if err != nil {
					return fmt.Errorf("storm of %d %s executors, %s mode, client refreshing %s: %w", n, kind, c.mode, c.refresh, err)
				}
				logf("storm: %d %s executors, %s, refresh %s: round %s, proxy CPU per stop %s", n, kind, c.mode, c.refresh, ms(r.Rounds.Median()), r.CPUPerStop())
				runs[c] = r
			}
			for _, c := range combos {
				if n == 1 && c.mode == "merged" {
					single[c.refresh] = runs[c].Rounds.Median()
				}
			}
			for _, c := range combos {
				r := runs[c]
				lin := float64(r.Rounds.Median()) / (float64(n) * float64(single[c.refresh]))
				cell := ""
				if c.mode == "merged" {
					mvc := float64(r.Rounds.Median()) / float64(runs[combo{"child", c.refresh}].Rounds.Median())
					cell = fmt.Sprintf("%.2f", mvc)
					res[c.refresh].worst = max(res[c.refresh].worst, lin)
					res[c.refresh].mvc = max(res[c.refresh].mvc, mvc)
				}
				reqs := "—"
				if r.Requests >= 0 {
					reqs = fmt.Sprintf("%.1f", float64(r.Requests)/float64(len(r.Rounds)))
				}
				t.Add(strconv.Itoa(n), kind, c.refresh, c.mode, strconv.Itoa(len(r.Rounds)), ms(r.Rounds.Median()), us(r.PerStop()),
					fmt.Sprintf("%.2f", lin), cell, us(r.CPUPerStop()), us(r.BenchCPU/time.Duration(r.N*len(r.Rounds))),
					fmt.Sprintf("%.1f", float64(r.IDEThreads)/float64(len(r.Rounds))), reqs, fmt.Sprintf("%.1f KiB", float64(r.ThreadsBytes)/1024))
			}
		}
		for _, refresh := range []string{refreshEveryStop, refreshWhenStale} {
			r := res[refresh]
			t.Note("%s, client refreshing threads %s: single = the merged-mode round with 1 executor (%s); goal ≤ 1.5 × linear in merged mode: worst %.2f — %s; merged no slower than child: worst merged ÷ child %.2f — %s",
				kind, refresh, ms(single[refresh]), r.worst, goal(r.worst <= 1.5), r.mvc, goal(math.Round(r.mvc*100) <= 100))
		}
		return nil
	}
	if err := series(false, cfg.Ns); err != nil {
		return nil, err
	}
	if len(cfg.RealNs) > 0 && cfg.Python != "" {
		if err := series(true, cfg.RealNs); err != nil {
			return nil, err
		}
	}
	t.Note("a round: every executor stops at once (fakes send a stopped event; real workers, testdata/stormer.py, each run a line with a breakpoint when the bench writes to their stdin); on each stopped event the IDE (one client in merged mode, one child session per executor in child mode) fetches the stack of the stopped thread (20 levels), after a threads request if its policy says so; the round ends with the last stack; then each stop is continued (untimed); one untimed round first")
	t.Note("client \"%s\" is VS Code's (debugSession.ts: fetchThreads on every stopped event) and nvim-dap's before 0.1; \"%s\" is nvim-dap's since 0.1 (2022): threads only when a thread event named a thread it does not know, or the stopped thread is unknown. With \"%s\" in merged mode every stop brings an answer listing all N executors' threads, so the IDE's own decoding grows as N² whatever the proxy does", refreshEveryStop, refreshWhenStale, refreshEveryStop)
	t.Note("fakes run in the bench process and share the 2 CPUs with the proxy and the client; proxy CPU per stop is the proxy child's user+system time over the timed rounds and the continues after each (10 ms ticks) ÷ stops: a whole stop → refresh → stack → continue cycle; IDE (+ fakes) CPU is the bench process's over the same span (the client, and the fakes when they are fakes; real workers' own CPU is not in it)")
	return t, nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
