package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/pathmap"
)

// The IDE leaving must never leave a worker waiting for it. These tests
// run executors whose files live at other paths than the IDE's (a path
// mapper between them), as on a real cluster.

const (
	leaveLocal  = "/home/me/proj/jobs/udf.py"
	leaveCwd    = "/spark/work/app-1"
	leaveRemote = leaveCwd + "/jobs/udf.py"
	leaveLine   = 5
)

func leaveProxy(t *testing.T) *testProxy {
	pm := pathmap.NewForFiles("/home/me/proj", false, []string{leaveLocal}, nil)
	return startProxy(t, func(c *Config) { c.Paths = pm })
}

// mappedExecutor connects a fake pydevd whose worker said hello with its
// roots, so the proxy maps leaveLocal to leaveRemote for it; only that path
// exists there.
func (p *testProxy) mappedExecutor(pid int) *fakePydevd {
	p.t.Helper()
	if got := sayHello(p.t, p.srv.ExecutorAddr().String(), map[string]any{"token": testToken, "pid": pid,
		"label": fmt.Sprintf("pid %d", pid), "roots": map[string]any{"cwd": leaveCwd}}); got != "OK" {
		p.t.Fatalf("hello: %q", got)
	}
	return p.executor(pid, func(path string, _ int) (bool, string) {
		if path == leaveRemote {
			return true, ""
		}
		return false, "Breakpoint in file that does not exist."
	})
}

// setLeaveBreakpoints is what an IDE session configures: a line breakpoint
// in the developer's file and raised exceptions.
func setLeaveBreakpoints(ctx context.Context, c *dapclient.Client) error {
	if _, err := c.SetBreakpoints(ctx, leaveLocal, leaveLine); err != nil {
		return err
	}
	_, err := c.Request(ctx, "setExceptionBreakpoints", map[string]any{"filters": []any{"raised"}})
	return err
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var why string
	for range 1000 {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, why)
}

// leaveWalk models the sessions the proxy should have, to tell which
// executors some IDE session still shows.
type leaveWalk struct {
	t         *testing.T
	p         *testProxy
	rng       *rand.Rand
	log       []string
	root      *dapclient.Client
	childMode bool
	follow    <-chan dapclient.Child
	children  map[int]*dapclient.Client // pid → its child session
	detached  map[int]bool              // pid → its child session left, no root since
	execs     map[int]*fakePydevd       // pid → live executor
	nextPID   int
	// stoppedAtLeave counts departures that happened while a worker the
	// departing session showed was stopped: the case that hung jobs.
	stoppedAtLeave int
}

func (w *leaveWalk) step(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

func (w *leaveWalk) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\nsteps:\n  %s", fmt.Sprintf(format, args...), strings.Join(w.log, "\n  "))
}

func (w *leaveWalk) watched(pid int) bool {
	return w.children[pid] != nil || (w.root != nil && !w.detached[pid])
}

// executorID is the proxy's id for the executor with pid.
func (w *leaveWalk) executorID(pid int) uint64 {
	for _, st := range w.p.hub.Executors() {
		if st.Process.PID == int64(pid) {
			return st.ID
		}
	}
	return 0
}

func (w *leaveWalk) connect() {
	pid := w.nextPID
	w.nextPID++
	w.step("executor %d connects", pid)
	w.execs[pid] = w.p.mappedExecutor(pid)
	if w.root != nil && w.childMode {
		w.awaitChildren()
	}
}

// awaitChildren takes the child sessions the proxy starts for every
// stopped executor a child-mode root shows without one: a worker is
// listed at its stop.
func (w *leaveWalk) awaitChildren() {
	w.t.Helper()
	for {
		want := 0
		for pid, f := range w.execs {
			if susp, _ := f.state(); susp && w.children[pid] == nil && !w.detached[pid] {
				want++
			}
		}
		if want == 0 {
			return
		}
		var ch dapclient.Child
		select {
		case ch = <-w.follow:
		case <-time.After(10 * time.Second):
			w.fatalf("no child session started for %d executor(s)", want)
		}
		if ch.Err != nil {
			w.fatalf("child session: %v", ch.Err)
		}
		var cfg struct {
			Executor uint64 `json:"sparkdapExecutor"`
		}
		_ = json.Unmarshal(ch.Config.Configuration, &cfg)
		pid := 0
		for p := range w.execs {
			if w.executorID(p) == cfg.Executor {
				pid = p
			}
		}
		if pid == 0 || w.children[pid] != nil {
			w.fatalf("child session for executor %d, which is not one expecting one", cfg.Executor)
		}
		w.t.Cleanup(func() { ch.Client.Close() })
		w.children[pid] = ch.Client
	}
}

func (w *leaveWalk) attachRoot(childMode bool) {
	w.step("root attaches (child sessions: %v)", childMode)
	ctx := w.p.ctx
	c, err := dapclient.Dial(ctx, w.p.srv.IDEAddr().String())
	if err != nil {
		w.fatalf("dial: %v", err)
	}
	w.t.Cleanup(func() { c.Close() })
	if childMode {
		w.follow = c.FollowChildren(ctx, func(ctx context.Context, child *dapclient.Client) error {
			return setLeaveBreakpoints(ctx, child)
		})
	}
	if _, err := c.Initialize(ctx, childMode); err != nil {
		w.fatalf("initialize: %v", err)
	}
	err = c.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, func(ctx context.Context) error {
		return setLeaveBreakpoints(ctx, c)
	})
	if err != nil {
		w.fatalf("attach: %v", err)
	}
	w.root, w.childMode = c, childMode
	clear(w.detached)
	if childMode {
		w.awaitChildren()
	}
}

// hit runs every live executor through the breakpoint's line; a watched
// one that stops stays stopped until an IDE session leaves.
func (w *leaveWalk) hit() {
	for _, pid := range w.pids() {
		f := w.execs[pid]
		if !w.watched(pid) {
			continue
		}
		// Its session set the breakpoint; wait until it is armed at the
		// executor's path.
		waitFor(w.t, fmt.Sprintf("executor %d armed at %s", pid, leaveRemote), func() (bool, string) {
			susp, armed := f.state()
			return susp || strings.Contains(armed, leaveRemote), armed
		})
		if f.hit(leaveRemote, leaveLine) {
			w.step("executor %d stops", pid)
			waitFor(w.t, "proxy sees the stop", func() (bool, string) {
				for _, st := range w.p.hub.Executors() {
					if st.Process.PID == int64(pid) && st.Stopped {
						return true, ""
					}
				}
				return false, "not stopped"
			})
			if w.root != nil && w.childMode {
				w.awaitChildren()
			}
		}
	}
}

// leave ends c: disconnect, disconnect with terminateDebuggee, a dropped
// connection, or disconnect with an explicit terminateDebuggee: false.
func (w *leaveWalk) leave(c *dapclient.Client, how int) {
	ctx := w.p.ctx
	switch how {
	case 0:
		if err := c.Disconnect(ctx, false); err != nil {
			w.fatalf("disconnect: %v", err)
		}
	case 1:
		if err := c.Disconnect(ctx, true); err != nil {
			w.fatalf("disconnect (terminateDebuggee): %v", err)
		}
	case 3:
		if _, err := c.Request(ctx, "disconnect", map[string]any{"terminateDebuggee": false}); err != nil && !errors.Is(err, dapclient.ErrClosed) {
			w.fatalf("disconnect (terminateDebuggee false): %v", err)
		}
	default:
		c.Close()
	}
}

var leaveHow = []string{"disconnects", "disconnects with terminateDebuggee", "drops its connection",
	"disconnects with terminateDebuggee false"}

// shownPIDs are the executors some IDE session shows.
func (w *leaveWalk) shownPIDs() []int {
	var shown []int
	for pid := range w.execs {
		if w.watched(pid) {
			shown = append(shown, pid)
		}
	}
	return shown
}

// countStoppedShownBy counts the executors of pids stopped now: called
// just before a session leaves (after, the proxy may have resumed them
// already: it does so before it answers the disconnect).
func (w *leaveWalk) countStoppedShownBy(pids []int) {
	for _, pid := range pids {
		if f := w.execs[pid]; f != nil {
			if susp, _ := f.state(); susp {
				w.stoppedAtLeave++
			}
		}
	}
}

// stopAll is what a session stopping the job's debugging does to the
// model: the root and every child session are gone.
func (w *leaveWalk) stopAll() {
	w.root = nil
	clear(w.children)
	waitFor(w.t, "proxy lets every IDE session go", func() (bool, string) {
		tx := w.p.hub.lock()
		defer tx.unlock()
		return tx.root == nil && len(tx.children) == 0,
			fmt.Sprintf("root attached: %v, %d child session(s)", tx.root != nil, len(tx.children))
	})
}

// rootLeaves: however the root leaves, the job's debugging stops.
func (w *leaveWalk) rootLeaves(how int) {
	w.step("root %s", leaveHow[how])
	w.countStoppedShownBy(w.shownPIDs())
	w.leave(w.root, how)
	w.stopAll()
}

// childLeaves: a child that disconnects stops the job's debugging; one
// that drops its connection, or detaches on purpose (terminateDebuggee
// false), lets only its executor go.
func (w *leaveWalk) childLeaves(pid, how int) {
	w.step("child of executor %d %s", pid, leaveHow[how])
	id := w.executorID(pid)
	if how == 0 || how == 1 {
		w.countStoppedShownBy(w.shownPIDs())
	} else {
		w.countStoppedShownBy([]int{pid})
	}
	w.leave(w.children[pid], how)
	if how == 0 || how == 1 {
		w.stopAll()
	} else {
		delete(w.children, pid)
		w.detached[pid] = true
		waitFor(w.t, "proxy notices the child leaving", func() (bool, string) {
			tx := w.p.hub.lock()
			defer tx.unlock()
			return tx.children[id] == nil, "child still there"
		})
	}
	if how == 1 {
		// pydevd kills its worker.
		w.execs[pid].waitClosed()
		delete(w.execs, pid)
		delete(w.detached, pid)
		w.connect()
	}
}

func (w *leaveWalk) pids() []int {
	var out []int
	for pid := range w.execs {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// check asserts the invariant: an executor no session shows is not
// stopped, has nothing armed, and runs through the breakpoint's line.
func (w *leaveWalk) check() {
	w.t.Helper()
	for _, pid := range w.pids() {
		if w.watched(pid) {
			continue
		}
		f := w.execs[pid]
		var susp bool
		var armed string
		for range 500 {
			if susp, armed = f.state(); !susp && armed == "" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if susp || armed != "" {
			w.fatalf("executor %d, shown by no IDE session: stopped=%v, still armed: %q", pid, susp, armed)
		}
		if f.hit(leaveRemote, leaveLine) {
			w.fatalf("executor %d, shown by no IDE session, stopped at %s:%d", pid, leaveRemote, leaveLine)
		}
	}
}

// TestNoWorkerLeftStoppedWithNoOneAttached walks bounded random sequences
// (fixed seeds) of IDE arrivals and departures (root and child sessions,
// merged and child-session roots, disconnect, terminateDebuggee, dropped
// connections) with workers stopping at a breakpoint between them, and
// after every step checks that no executor is left stopped, or with a
// breakpoint armed, while no IDE session shows it.
func TestNoWorkerLeftStoppedWithNoOneAttached(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			p := leaveProxy(t)
			w := &leaveWalk{t: t, p: p, rng: rand.New(rand.NewPCG(seed, 18)), children: map[int]*dapclient.Client{},
				detached: map[int]bool{}, execs: map[int]*fakePydevd{}, nextPID: 100}
			w.connect()
			w.connect()
			deadline := time.Now().Add(60 * time.Second)
			for i := 0; i < 30 && time.Now().Before(deadline); i++ {
				switch r := w.rng.IntN(10); {
				case w.root == nil && r < 6:
					w.attachRoot(w.rng.IntN(3) > 0)
				case r < 4:
					w.hit()
				case r < 7 && w.root != nil:
					w.hit()
					w.rootLeaves(w.rng.IntN(len(leaveHow)))
				case len(w.children) > 0:
					w.hit()
					var pids []int
					for pid := range w.children {
						pids = append(pids, pid)
					}
					sort.Ints(pids)
					w.childLeaves(pids[w.rng.IntN(len(pids))], w.rng.IntN(len(leaveHow)))
				default:
					w.hit()
				}
				w.check()
			}
			t.Logf("%d steps, %d departures while a shown worker was stopped", len(w.log), w.stoppedAtLeave)
			if testing.Verbose() {
				t.Logf("steps:\n  %s", strings.Join(w.log, "\n  "))
			}
			if w.stoppedAtLeave == 0 {
				w.fatalf("the walk never had an IDE session leave while its worker was stopped")
			}
		})
	}
}

// TestStopWithNoSessionIsResumed: whatever let it happen, a stop that no
// IDE session shows is resumed at once and the executor's breakpoints are
// cleared at the paths they were set on.
func TestStopWithNoSessionIsResumed(t *testing.T) {
	p := leaveProxy(t)
	f := p.mappedExecutor(300)
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error { return setLeaveBreakpoints(ctx, c) })
	waitFor(t, "breakpoint armed at the executor's path", func() (bool, string) {
		_, armed := f.state()
		return strings.Contains(armed, leaveRemote), armed
	})
	// Stand in for any hole that lets the IDE go while the executor keeps
	// its breakpoints: take the root away without the cleanup.
	tx := p.hub.lock()
	tx.root = nil
	tx.unlock()
	defer c.Close()
	if !f.hit(leaveRemote, leaveLine) {
		t.Fatal("the executor did not stop at its armed breakpoint")
	}
	waitFor(t, "unwatched stop resumed and cleared", func() (bool, string) {
		susp, armed := f.state()
		return !susp && armed == "", fmt.Sprintf("stopped=%v armed=%q", susp, armed)
	})
}

// TestChildSessionNeverOpenedLetsWorkerGo: in child-session mode an
// executor is watched only through the child session the proxy asks the
// root to open. If the root refuses the startDebugging request, or never
// opens the child, a worker stopped meanwhile is resumed and its
// breakpoints are cleared.
func TestChildSessionNeverOpenedLetsWorkerGo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool // answer startDebugging with an error; else never answer
	}{{"refused", true}, {"ignored", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, func(c *Config) {
				c.Paths = pathmap.NewForFiles("/home/me/proj", false, []string{leaveLocal}, nil)
				c.ChildAttachTimeout = 500 * time.Millisecond
				if tc.refuse {
					c.ChildAttachTimeout = time.Hour // only the refusal can let it go
				}
			})
			ctx := p.ctx
			asked := make(chan struct{}, 4)
			answer := make(chan struct{})
			c, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			defer close(answer)
			c.OnReverseRequest(func(command string, _ json.RawMessage) (bool, any) {
				if command == "startDebugging" {
					asked <- struct{}{}
				}
				// Refusing: answers when the test says so. Ignoring: never
				// opens the child and answers only at the end of the test.
				<-answer
				return false, nil
			})
			if _, err := c.Initialize(ctx, true); err != nil {
				t.Fatal(err)
			}
			if err := c.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, func(ctx context.Context) error {
				return setLeaveBreakpoints(ctx, c)
			}); err != nil {
				t.Fatal(err)
			}
			f := p.mappedExecutor(310)
			waitFor(t, "breakpoint armed at the executor's path", func() (bool, string) {
				_, armed := f.state()
				return strings.Contains(armed, leaveRemote), armed
			})
			// Listed (its child session asked for) once it stops.
			if !f.hit(leaveRemote, leaveLine) {
				t.Fatal("the executor did not stop at its armed breakpoint")
			}
			select {
			case <-asked:
			case <-time.After(10 * time.Second):
				t.Fatal("the proxy never asked the root to start a child session")
			}
			if tc.refuse {
				answer <- struct{}{}
			}
			waitFor(t, "worker resumed and its breakpoints cleared", func() (bool, string) {
				susp, armed := f.state()
				return !susp && armed == "", fmt.Sprintf("stopped=%v armed=%q", susp, armed)
			})
		})
	}
}
