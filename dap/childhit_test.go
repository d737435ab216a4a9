package dap

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// TestVSCodeChildStopNamesItsBreakpoint: the stop that lists a worker
// reaches its new child session naming, in hitBreakpointIds, the id that
// session's own setBreakpoints answer gave the line (what VS Code matches
// to show which breakpoint stopped it), whether the worker is fresh or
// reused: it ran a task, stopped there in an earlier child session, and
// runs another task, which ended that session. pydevd names a stop by the
// id of the breakpoint armed at the line when the thread got there, and a
// reused worker's new task may get there before the root's breakpoints,
// sent to replace the ended session's, reach pydevd.
func TestVSCodeChildStopNamesItsBreakpoint(t *testing.T) {
	for i, tc := range []struct {
		name   string
		reused bool
		// early: the new task reaches the line while pydevd still has
		// the ended session's breakpoints.
		early bool
	}{
		{"fresh worker", false, false},
		{"reused worker, stop after the root's breakpoints are back", true, false},
		{"reused worker, stop before the root's breakpoints are back", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := 1300 + i
			p := startProxy(t, nil)
			ide := vscodeclient.New(vscodeclient.Options{Workspace: "/w"})
			t.Cleanup(ide.Close)
			ide.SetBreakpoints(taskFile, 5)
			host, port, _ := net.SplitHostPort(p.srv.IDEAddr().String())
			if _, err := ide.Attach(p.ctx, map[string]any{"name": "sparkdap", "type": "debugpy", "request": "attach",
				"connect": map[string]any{"host": host, "port": port}}); err != nil {
				t.Fatal(err)
			}
			f := p.executor(pid, nil)
			taskEvent(f, pid, 2, 0)
			waitFor(t, "breakpoint armed", func() (bool, string) {
				_, armed := f.state()
				return strings.Contains(armed, taskFile), armed
			})
			if !f.hit(taskFile, 5) {
				t.Fatal("worker did not stop")
			}
			child := nextChild(t, ide)
			st := nextVSCodeStop(t, ide)
			if !tc.reused {
				checkHitIDs(t, st, child)
				return
			}
			if err := child.Continue(p.ctx, st.Event.ThreadId); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "worker resumed", func() (bool, string) {
				susp, _ := f.state()
				return !susp, "still stopped"
			})
			if tc.early {
				// The task event and the stop leave the worker back to
				// back: pydevd still has the ended session's breakpoint.
				id, ok := f.ArmedID(taskFile, 5)
				if !ok {
					t.Fatal("no breakpoint armed at the line")
				}
				taskEvent(f, pid, 5, 0)
				if err := f.StopAt(1, id); err != nil {
					t.Fatal(err)
				}
			} else {
				taskEvent(f, pid, 5, 0)
				select {
				case <-child.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the first child session did not end when the worker ran another task")
				}
				waitFor(t, "the root's breakpoint back on the worker", func() (bool, string) {
					return len(f.breakpointHistory(taskFile)) == 3, jsonText(f.breakpointHistory(taskFile))
				})
				if !f.hit(taskFile, 5) {
					t.Fatal("worker did not stop in its new task")
				}
			}
			child2 := nextChild(t, ide)
			if child2 == child {
				t.Fatal("no new child session")
			}
			checkHitIDs(t, nextVSCodeStop(t, ide), child2)
		})
	}
}

// checkHitIDs: st, a stop at the test's breakpoint, was shown in session
// s and names s's own breakpoint.
func checkHitIDs(t *testing.T, st *vscodeclient.Stop, s *vscodeclient.Session) {
	t.Helper()
	if st.Session != s {
		t.Fatalf("stop shown in %q, want %q", st.Session.Name, s.Name)
	}
	want := s.BreakpointIDs(taskFile)
	if len(want) != 1 {
		t.Fatalf("the session's setBreakpoints answer gave ids %v, want one", want)
	}
	if !slices.Equal(st.Event.HitBreakpointIds, want) {
		t.Errorf("stopped event's hitBreakpointIds %v, want %v (the id the session's setBreakpoints answered)",
			st.Event.HitBreakpointIds, want)
	}
}
