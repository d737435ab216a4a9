//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestMergedModePauseAllAndContinueAll: with real debugpy workers in merged
// mode, a pause naming no thread stops every worker; a continue naming no
// thread is refused in words and resumes none; continue with singleThread
// false resumes every stopped worker and says allThreadsContinued.
func TestMergedModePauseAllAndContinueAll(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 120*time.Second)
	p := startProxy(t, ctx)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, false)

	gate := filepath.Join(t.TempDir(), "go")
	var ws []*worker
	for id := 1; id <= 3; id++ {
		ws = append(ws, startWorker(t, ctx, p, id, workerOpts{gate: gate}))
	}
	for _, w := range ws {
		w.waitLine(t, ctx, "CONNECTED")
	}

	// Pause all: each worker stops where it is (its gate loop).
	r, err := c.Request(ctx, "pause", map[string]any{"threadId": 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("pause of every executor: %v", err)
	}
	paused := map[int]bool{}
	for range ws {
		s, err := c.StoppedEvent(ctx)
		if err != nil {
			t.Fatalf("after %d pause stops: %v", len(paused), err)
		}
		if s.Reason != "pause" {
			t.Fatalf("stopped reason %q, want pause", s.Reason)
		}
		paused[s.ThreadId] = true
	}
	if len(paused) != len(ws) {
		t.Fatalf("pause stopped threads %v, want one per worker (%d)", paused, len(ws))
	}

	// A continue that names no thread is refused and resumes nobody.
	for _, args := range []map[string]any{{"threadId": 0}, {}} {
		r, err := c.Request(ctx, "continue", args)
		if err != nil {
			t.Fatal(err)
		}
		if r.Success || !strings.Contains(r.Message, "singleThread") || strings.Contains(r.Message, "Traceback") {
			t.Fatalf("continue %v: success=%v %q; want a refusal that says how to resume all", args, r.Success, r.Message)
		}
	}
	for tid := range paused {
		// pydevd gives a stack only for a suspended thread.
		if frames, err := c.StackTrace(ctx, tid); err != nil || len(frames) == 0 {
			t.Fatalf("thread %d no longer stopped after refused continues: %v, %v", tid, frames, err)
		}
	}
	if n := countEvents(c, "continued"); n != 0 {
		t.Fatalf("%d continued events after refused continues", n)
	}

	// Continue all, then let the workers reach the breakpoint.
	script := workerScript(t)
	if err := setWorkerBreakpoint(ctx, c, script, testenv.MarkedLine(t, script, "")); err != nil {
		t.Fatal(err)
	}
	continueAll := func(args map[string]any) {
		t.Helper()
		r, err := c.Request(ctx, "continue", args)
		if err == nil {
			err = r.Err()
		}
		var body dap.ContinueResponseBody
		if err == nil {
			err = r.Decode(&body)
		}
		if err != nil || !body.AllThreadsContinued {
			t.Fatalf("continue %v: %+v, %v; want allThreadsContinued", args, body, err)
		}
	}
	continueAll(map[string]any{"singleThread": false})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stops := collectStops(t, ctx, c, ws, len(ws), true)

	// Clear the breakpoint and resume them all with one request.
	if _, err := c.SetBreakpoints(ctx, script); err != nil {
		t.Fatalf("clearing breakpoints: %v", err)
	}
	continueAll(map[string]any{"threadId": stops[0].threadID, "singleThread": false})
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
}
