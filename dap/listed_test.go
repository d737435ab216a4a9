package dap

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// TestVSCodeListsOnlyStoppedWorkers: twenty debugged workers, two of
// which stop. VS Code's CALL STACK lists the root and those two, named
// after the task they stopped in; once one of them, resumed, starts
// another task its session ends (the root and the other stay), and its
// next stop lists it again under the new task.
func TestVSCodeListsOnlyStoppedWorkers(t *testing.T) {
	p := startProxy(t, nil)
	ide := vscodeclient.New(vscodeclient.Options{Workspace: "/w"})
	t.Cleanup(ide.Close)
	ide.SetBreakpoints(taskFile, 5)
	host, port, _ := net.SplitHostPort(p.srv.IDEAddr().String())
	root, err := ide.Attach(p.ctx, map[string]any{"name": "sparkdap", "type": "debugpy", "request": "attach",
		"connect": map[string]any{"host": host, "port": port}})
	if err != nil {
		t.Fatal(err)
	}
	var fakes []*fakePydevd
	for i := range 20 {
		f := p.executor(1000+i, nil)
		taskEvent(f, 1000+i, 2, i)
		fakes = append(fakes, f)
	}
	for _, f := range fakes[:2] {
		waitFor(t, "breakpoint armed", func() (bool, string) {
			_, armed := f.state()
			return strings.Contains(armed, taskFile), armed
		})
		if !f.hit(taskFile, 5) {
			t.Fatal("worker did not stop")
		}
	}
	stops := map[*vscodeclient.Session]*vscodeclient.Stop{}
	for range 2 {
		st := nextVSCodeStop(t, ide)
		stops[st.Session] = st
	}
	live := func() []string {
		var out []string
		for _, s := range ide.Sessions() {
			if !s.Ended() {
				out = append(out, s.Name)
			}
		}
		return out
	}
	if got := live(); len(got) != 3 {
		t.Fatalf("VS Code lists %d sessions %q, want the root and the two stopped workers", len(got), got)
	}
	var first *vscodeclient.Session
	for s := range stops {
		if strings.Contains(s.Name, "pid 1000") {
			first = s
		}
		if !strings.HasPrefix(s.Name, "stage 2 · partition") {
			t.Errorf("session %q does not start with its task", s.Name)
		}
	}
	if first == nil {
		t.Fatalf("no session for worker 1000 among %v", live())
	}
	if err := first.Continue(p.ctx, stops[first].Event.ThreadId); err != nil {
		t.Fatal(err)
	}
	taskEvent(fakes[0], 1000, 5, 0)
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("worker 1000 moved to another task and its session %q is still listed", first.Name)
	}
	if root.Ended() || root.Terminated() {
		t.Fatal("ending an idle worker's session ended the root")
	}
	if got := live(); len(got) != 2 {
		t.Errorf("VS Code lists %q, want the root and the worker still stopped", got)
	}
	// The root's breakpoints replaced the child's: the worker, running
	// its new task, never had the file without its breakpoint.
	for _, lines := range fakes[0].breakpointHistory(taskFile) {
		if len(lines) == 0 {
			t.Errorf("worker 1000 was sent no breakpoints for %s when its session ended; the root's replace the child's in one request", taskFile)
		}
	}
	waitFor(t, "the root's breakpoint back on worker 1000", func() (bool, string) {
		lines, _ := fakes[0].lastBreakpointLines(taskFile)
		return len(lines) == 1 && lines[0] == 5, jsonText(lines)
	})
	if !fakes[0].hit(taskFile, 5) {
		t.Fatal("worker 1000's breakpoint is gone after its session ended")
	}
	st := nextVSCodeStop(t, ide)
	if want := "stage 5 · partition 0"; !strings.HasPrefix(st.Session.Name, want) || st.Session == first {
		t.Errorf("the next stop was shown in %q, want a new session named after %q", st.Session.Name, want)
	}
}
