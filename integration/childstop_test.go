//go:build linux

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestChildSessionStopDuringSetupShownOnce: a real debugpy worker hits the
// root's breakpoint; that stop lists it, so its child session is set up
// after the stop. The child gets that stop once (not live and again as
// a replay), under the id of its own breakpoint, and a client that
// continues once per stopped event (after a stack trace, as nvim-dap and
// VS Code do) sees each of the worker's iterations stop exactly once and
// the worker finish with its full result.
func TestChildSessionStopDuringSetupShownOnce(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 120*time.Second)
	p := startProxy(t, ctx)
	script := workerScript(t)
	line := testenv.MarkedLine(t, script, "")
	gate := filepath.Join(t.TempDir(), "gate")

	root := dialIDE(t, ctx, p.IDE)
	childBP := make(chan int, 1)
	children := root.FollowChildren(ctx, func(ctx context.Context, child *dapclient.Client) error {
		traceClient(t, child, "child")
		bps, err := child.SetBreakpoints(ctx, script, line)
		if err != nil {
			return err
		}
		childBP <- bps[0].Id
		return nil
	})
	if _, err := root.Initialize(ctx, true); err != nil {
		t.Fatalf("initialize root: %v", err)
	}
	if err := root.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		return setWorkerBreakpoint(ctx, root, script, line)
	}); err != nil {
		t.Fatalf("attach root: %v", err)
	}
	const iterations = 3
	w := startWorker(t, ctx, p, 1, workerOpts{gate: gate, iterations: iterations})
	// The worker runs into the root's breakpoint: that stop lists it, so
	// it happens before its child session is set up.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var ch dapclient.Child
	select {
	case ch = <-children:
	case <-ctx.Done():
		t.Fatalf("no child session: %v", ctx.Err())
	}
	if ch.Err != nil {
		t.Fatalf("child session: %v", ch.Err)
	}
	child := ch.Client
	t.Cleanup(func() { child.Close() })
	want := <-childBP

	// The client: one stack trace and one continue per stopped event, until
	// the worker is done.
	type seen struct {
		hits []int
		i    string
	}
	var stops []seen
	done := make(chan struct{})
	go func() {
		<-w.exited
		close(done)
	}()
	for n := 0; ; n++ {
		if n == 2*iterations+2 {
			t.Fatalf("more stopped events than the worker's %d stops: %+v", iterations, stops)
		}
		waitCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-done:
				cancel()
			case <-waitCtx.Done():
			}
		}()
		st, err := child.StoppedEvent(waitCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("waiting for stops: %v (seen %+v)", err, stops)
			}
			break // the worker finished
		}
		frames, err := child.StackTrace(ctx, st.ThreadId)
		if err != nil || len(frames) == 0 {
			t.Fatalf("stop %d: stackTrace: %v, %v", n+1, frames, err)
		}
		ev, err := child.Evaluate(ctx, frames[0].Id, "i")
		if err != nil {
			t.Fatalf("stop %d: evaluate i: %v", n+1, err)
		}
		stops = append(stops, seen{st.HitBreakpointIds, ev.Result})
		if err := child.Continue(ctx, st.ThreadId); err != nil {
			t.Fatalf("stop %d: continue: %v", n+1, err)
		}
	}
	w.waitSuccess(t, ctx)
	if len(stops) != iterations {
		t.Fatalf("the child session showed %d stops for the worker's %d: %+v", len(stops), iterations, stops)
	}
	for i, s := range stops {
		if s.i != strconv.Itoa(i) {
			t.Errorf("stop %d was in iteration %s, want %d: each stop shown once, in order", i+1, s.i, i)
		}
		if len(s.hits) != 1 || s.hits[0] != want {
			t.Errorf("stop %d: hitBreakpointIds %v, want [%d] (the child's own breakpoint)", i+1, s.hits, want)
		}
	}
}
