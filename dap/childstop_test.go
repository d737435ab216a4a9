package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// awaitExecutorStopped waits until the Hub has recorded a stop of the
// executor with pid, for goroutines other than the test's.
func awaitExecutorStopped(h *Hub, pid int64) error {
	for range 500 {
		for _, st := range h.Executors() {
			if st.Process.PID == pid && st.Stopped {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("executor pid %d never stopped", pid)
}

// oncePerStop plays a client that answers each stopped event exactly once
// (stack trace of the stopped thread, then continue), in the order the
// events came, as nvim-dap's and VS Code's handlers do. It starts once
// the session is configured, so whatever the proxy sent before is handled
// as well.
type oncePerStop struct {
	mu   sync.Mutex
	hits [][]int // each stopped event's hitBreakpointIds
	errs []error // stackTrace or continue failures
	done chan struct{}
}

func runOncePerStop(ctx context.Context, c *dapclient.Client) *oncePerStop {
	o := &oncePerStop{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for range 20 {
			st, err := c.StoppedEvent(ctx)
			if err != nil {
				return // the test is over
			}
			o.mu.Lock()
			o.hits = append(o.hits, st.HitBreakpointIds)
			o.mu.Unlock()
			var fail error
			if _, err := c.StackTrace(ctx, st.ThreadId); err != nil {
				fail = fmt.Errorf("stackTrace of thread %d: %w", st.ThreadId, err)
			} else if err := c.Continue(ctx, st.ThreadId); err != nil {
				fail = fmt.Errorf("continue thread %d: %w", st.ThreadId, err)
			}
			if fail != nil && ctx.Err() == nil {
				o.mu.Lock()
				o.errs = append(o.errs, fail)
				o.mu.Unlock()
			}
		}
	}()
	return o
}

func (o *oncePerStop) result() (hits [][]int, errs []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.hits), slices.Clone(o.errs)
}

// TestChildSessionGetsEachStopOnce: a stop that happens while an
// executor's child session is being set up reaches that session once,
// after its configurationDone, naming the breakpoint by the id the
// child's own setBreakpoints answered. A client that continues once per
// stopped event then resumes each stop once: a duplicate would make it
// resume the worker's next stop before anyone saw it.
func TestChildSessionGetsEachStopOnce(t *testing.T) {
	tests := []struct {
		name string
		// stopBeforeAttach: the worker's stop is what lists it (the
		// root is asked to open its child session then), so it comes
		// before the child attached.
		stopBeforeAttach bool
	}{
		{"stop before the child attaches", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := 700 + i
			p := startProxy(t, nil)
			ctx := p.ctx
			root, err := dapclient.Dial(ctx, p.srv.IDEAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { root.Close() })
			fakes := make(chan *fakePydevd, 1)
			type opened struct {
				c   *dapclient.Client
				bps []godap.Breakpoint
				err error
			}
			children := make(chan opened, 4)
			root.OnReverseRequest(func(command string, args json.RawMessage) (bool, any) {
				if command != "startDebugging" {
					return false, nil
				}
				var f *fakePydevd
				select {
				case f = <-fakes:
				case <-ctx.Done():
					return false, nil
				}
				var req dapclient.StartDebugging
				if err := json.Unmarshal(args, &req); err != nil {
					children <- opened{err: err}
					return false, nil
				}
				var bps []godap.Breakpoint
				child, err := dapclient.StartChild(ctx, &req, func(ctx context.Context, child *dapclient.Client) error {
					var err error
					if bps, err = child.SetBreakpoints(ctx, "/job/udf.py", 5); err != nil {
						return err
					}
					if !tt.stopBeforeAttach {
						f.stop()
						return awaitExecutorStopped(p.hub, int64(pid))
					}
					return nil
				})
				children <- opened{child, bps, err}
				return err == nil, nil
			})
			if _, err := root.Initialize(ctx, true); err != nil {
				t.Fatal(err)
			}
			// The root's own breakpoint at the same line reaches the worker
			// first: the stop names pydevd's id for it (the fake's 0).
			var rootBps []godap.Breakpoint
			if err := root.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, func(ctx context.Context) error {
				var err error
				rootBps, err = root.SetBreakpoints(ctx, "/job/udf.py", 5)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			f := p.executor(pid, nil)
			fakes <- f
			f.stop()
			if err := awaitExecutorStopped(p.hub, int64(pid)); err != nil {
				t.Fatal(err)
			}
			var ch opened
			select {
			case ch = <-children:
			case <-ctx.Done():
				t.Fatal("no child session was opened")
			}
			if ch.err != nil {
				t.Fatal(ch.err)
			}
			child := ch.c
			t.Cleanup(func() { child.Close() })
			if len(ch.bps) != 1 || len(rootBps) != 1 || ch.bps[0].Id == rootBps[0].Id {
				t.Fatalf("child breakpoints %+v, root's %+v: want one each, with distinct ids", ch.bps, rootBps)
			}
			loopCtx, stopLoop := context.WithCancel(ctx)
			client := runOncePerStop(loopCtx, child)
			t.Cleanup(func() { stopLoop(); <-client.done })

			// The first stop is resumed once; then the worker stops again.
			f.waitRequest("continue", nil)
			f.stop()
			for n := 0; f.Count("continue") < 2; n++ {
				if n == 500 {
					t.Fatalf("the client did not resume the second stop; worker saw %s", f.commands())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Everything the worker sent before this line reached the child
			// before it.
			f.event("output", map[string]any{"category": "stdout", "output": "marker\n"})
			if _, err := child.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
				return strings.Contains(string(b), "marker")
			}); err != nil {
				t.Fatal(err)
			}
			stops := 0
			for _, ev := range child.Events() {
				if ev.Event == "stopped" {
					stops++
				}
			}
			if stops != 2 {
				t.Errorf("the child session got %d stopped events for the worker's 2 stops", stops)
			}
			// Let the client finish what it was given before judging it.
			for n := 0; ; n++ {
				if hits, _ := client.result(); len(hits) >= stops {
					break
				}
				if n == 500 {
					t.Fatal("the client did not handle every stopped event")
				}
				time.Sleep(10 * time.Millisecond)
			}
			stopLoop()
			<-client.done
			hits, errs := client.result()
			for _, err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("client: %v", err)
				}
			}
			if n := f.Count("continue"); n != 2 {
				t.Errorf("the worker was resumed %d times for its 2 stops", n)
			}
			for i, h := range hits {
				if len(h) != 1 || h[0] != ch.bps[0].Id {
					t.Errorf("stop %d: hitBreakpointIds %v; want [%d], the id the child's setBreakpoints answered "+
						"(the root's is %d)", i+1, h, ch.bps[0].Id, rootBps[0].Id)
				}
			}
		})
	}
}

// TestChildSessionLabelsFollowTheTask: a reused worker runs one task after
// another. Its child session opens at its stop, named after the task it
// stopped in and then the worker, with its threads named after that task;
// once it runs another task its session ends, and its next stop opens a
// new one named after the new task.
func TestChildSessionLabelsFollowTheTask(t *testing.T) {
	p := startProxy(t, nil)
	_, children := p.childRoot(nil, nil)
	f := p.executor(42, nil)
	task := func(stage, partition, attempt int) {
		f.event("sparkdapTask", map[string]any{"executorId": "3", "host": "worker-1", "pid": 42,
			"stageId": stage, "partitionId": partition, "attemptNumber": 0, "taskAttemptId": attempt,
			"label": fmt.Sprintf("stage %d · partition %d · attempt 0", stage, partition)})
	}
	stopIn := func(label string) {
		t.Helper()
		waitFor(t, "task label", func() (bool, string) {
			ex := p.hub.Executors()
			return len(ex) == 1 && strings.Contains(ex[0].Label, label), jsonText(ex)
		})
		f.stop()
		child := p.nextChild(children)
		var cfg map[string]any
		if err := json.Unmarshal(child.Config.Configuration, &cfg); err != nil {
			t.Fatal(err)
		}
		name, _ := cfg["name"].(string)
		if want := label + " · exec 3 · worker-1 · pid 42"; name != want {
			t.Errorf("child session named %q, want %q", name, want)
		}
		tid := stoppedOn(p.ctx, t, child.Client)
		threads, err := child.Client.Threads(p.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, th := range threads {
			names = append(names, th.Name)
		}
		if want := []string{"[" + label + "] MainThread"}; !slices.Equal(names, want) {
			t.Errorf("threads: %q, want %q", names, want)
		}
		if err := child.Client.Continue(p.ctx, tid); err != nil {
			t.Fatal(err)
		}
	}
	task(3, 1, 11)
	stopIn("stage 3 · partition 1 · attempt 0")
	// The worker is reused for another task, and stops in it.
	task(6, 0, 12)
	stopIn("stage 6 · partition 0 · attempt 0")
}

// TestMergedSessionGetsEachStopOnce: the same for a merged root session: a
// worker that stops while the IDE is still configuring its session shows
// that stop once, after configurationDone.
func TestMergedSessionGetsEachStopOnce(t *testing.T) {
	p := startProxy(t, nil)
	f := p.executor(61, nil)
	c := p.ide(false, func(ctx context.Context, c *dapclient.Client) error {
		f.stop()
		return awaitExecutorStopped(p.hub, 61)
	})
	tid := stoppedOn(p.ctx, t, c)
	if err := c.Continue(p.ctx, tid); err != nil {
		t.Fatal(err)
	}
	f.event("output", map[string]any{"category": "stdout", "output": "marker\n"})
	if _, err := c.WaitEvent(p.ctx, "output", func(b json.RawMessage) bool {
		return strings.Contains(string(b), "marker")
	}); err != nil {
		t.Fatal(err)
	}
	stops := 0
	for _, ev := range c.Events() {
		if ev.Event == "stopped" {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("the root session got %d stopped events for the worker's one stop", stops)
	}
}
