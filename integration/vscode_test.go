//go:build linux

package integration

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/testkit/testfwd"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// vscodeIDE opens a VS Code window (testkit/vscodeclient: what the
// recorded VS Code sessions do) on the workspace; SPARKDAP_TRACE=1 logs
// every session's messages.
func vscodeIDE(t testing.TB, workspace string) *vscodeclient.IDE {
	t.Helper()
	o := vscodeclient.Options{Workspace: workspace}
	if os.Getenv("SPARKDAP_TRACE") == "1" {
		o.Trace = t.Logf
	}
	ide := vscodeclient.New(o)
	t.Cleanup(ide.Close)
	return ide
}

// TestSparkVSCodeDisconnectStopsTheJob: VS Code, attached through a
// forwarded port as from a laptop over ssh -L, debugs every task of a real
// local-mode Spark job. Its child sessions connect through the same
// forwarded port. The user presses Disconnect in a child stopped at a
// breakpoint that every element of every partition runs through: every
// session gets terminated and ends, no new session is opened and nothing
// stops again, and the job finishes with the plain run's result.
func TestSparkVSCodeDisconnectStopsTheJob(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 6*time.Minute)
	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "job", "four_partitions.py")
	ship := filepath.Join(root, "deploy", "job", "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), src)
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), ship)
	line := testenv.MarkedLine(t, src, "square")
	p := startProxy(t, ctx, "--root", filepath.Dir(src))
	fwd := testfwd.Start(t, p.IDE)

	ide := vscodeIDE(t, filepath.Dir(src))
	ide.SetBreakpoints(src, line)
	host, port, _ := net.SplitHostPort(fwd)
	rootSession, err := ide.Attach(ctx, map[string]any{"name": "sparkdap: attach to Spark workers", "type": "debugpy",
		"request": "attach", "connect": map[string]any{"host": host, "port": port}, "justMyCode": false})
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "out.json")
	job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--", "--master", "local[2]", "--conf", "spark.ui.enabled=false", ship, out)

	var st *vscodeclient.Stop
	select {
	case st = <-ide.Stops():
	case <-job.done:
		t.Fatalf("the job ended (%v) without stopping at the breakpoint", job.err)
	case <-ctx.Done():
		t.Fatal("VS Code showed no stop")
	}
	if st.Err != nil {
		t.Fatalf("VS Code could not show the stop: %v", st.Err)
	}
	if top := st.Top(); top.Source == nil || top.Source.Path != src || top.Line != line {
		t.Fatalf("stopped at %+v, want the developer's %s:%d", top, src, line)
	}
	if st.Session.Parent != rootSession {
		t.Fatalf("the stop was shown in %q, not in a child session of the root", st.Session.Name)
	}
	// The stop names the breakpoint by the id this child session's own
	// setBreakpoints answer gave it, which is how VS Code finds it.
	own := st.Session.BreakpointIDs(src)
	if len(st.Event.HitBreakpointIds) == 0 {
		t.Errorf("the stop names no breakpoint (hitBreakpointIds empty); the child's own ids are %v", own)
	}
	for _, id := range st.Event.HitBreakpointIds {
		if !slices.Contains(own, id) {
			t.Errorf("the stop names breakpoint id %d; the child session's own setBreakpoints answered %v", id, own)
		}
	}
	if _, ok := st.Locals["x"]; !ok {
		t.Errorf("the stop's locals %v lack x", st.Locals)
	}
	checkPlumbingFramesSubtle(t, st)
	for _, s := range ide.Sessions()[1:] {
		if s.Addr != fwd {
			t.Errorf("child session %q connected to %s, not to %s where VS Code attached", s.Name, s.Addr, fwd)
		}
	}

	// local[2] runs two tasks at once, and every element goes through the
	// breakpoint: the other worker stops too. The user presses Disconnect
	// once VS Code shows both. Pressed sooner, the other worker can reach
	// the breakpoint in the instant the Disconnect is handled, before its
	// breakpoints are cleared: the proxy resumes such a stop itself (the
	// safety net, dap's TestStopWithNoSessionIsResumed), but the check
	// below could not tell it from a breakpoint left in place.
	select {
	case other := <-ide.Stops():
		if other.Err != nil {
			t.Fatalf("VS Code could not show the other worker's stop: %v", other.Err)
		}
		if other.Session == st.Session {
			t.Fatalf("a second stop in %q before anything was continued", st.Session.Name)
		}
	case <-job.done:
		t.Fatalf("the job ended (%v) with one worker stopped", job.err)
	case <-ctx.Done():
		t.Fatal("VS Code showed no stop of the other worker")
	}
	sent := st.Session.Disconnect()
	stoppedAt := time.Now()
	if _, ok := sent["terminateDebuggee"]; ok {
		t.Errorf("VS Code's Disconnect sent %v: the proxy advertised supportTerminateDebuggee", sent)
	}
	sessions := ide.Sessions()
	for _, s := range sessions {
		select {
		case <-s.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("session %q still open 30 s after the user pressed Disconnect", s.Name)
		}
		if s != st.Session && !s.Terminated() {
			t.Errorf("session %q ended without a terminated event", s.Name)
		}
	}

	waitCtx := testContext(t, 120*time.Second)
	job.wait(t, waitCtx)
	t.Logf("the job finished %v after the user pressed Disconnect", time.Since(stoppedAt).Round(100*time.Millisecond))
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want the plain run's 20540", got)
	}
	if n := len(ide.Sessions()); n != len(sessions) {
		for _, s := range ide.Sessions()[len(sessions):] {
			t.Errorf("VS Code opened session %q after the user pressed Disconnect", s.Name)
		}
	}
	if strings.Contains(strings.ToLower(job.out.String()), "breakpoint to file that does not exist") {
		t.Errorf("pydevd complained into the job's output about breakpoints sent to paths the executor does not have:\n%s",
			grepLines(job.out.String(), "does not exist"))
	}
	if n := strings.Count(p.Log(), "executor stopped with no IDE session"); n != 0 {
		t.Errorf("a worker stopped %d time(s) after the user pressed Disconnect (the safety net resumed it)", n)
	}
}

// checkPlumbingFramesSubtle: the wrapper's frames (remote_debug.py) and
// PySpark's daemon.py, at the bottom of every executor stack, are shown
// as library frames, not as the user's code.
func checkPlumbingFramesSubtle(t testing.TB, st *vscodeclient.Stop) {
	t.Helper()
	wrapper := 0
	for _, f := range st.Frames {
		if f.Source == nil {
			continue
		}
		file := f.Source.Path
		if file == "" {
			file = f.Source.Origin
		}
		if file == "" {
			file = f.Source.Name
		}
		isWrapper := filepath.Base(file) == "remote_debug.py"
		if isWrapper {
			wrapper++
		}
		if (isWrapper || strings.HasSuffix(file, "pyspark/daemon.py")) && f.PresentationHint != "subtle" {
			t.Errorf("frame %s in %s is shown as the user's code (presentationHint %q)", f.Name, file, f.PresentationHint)
		}
	}
	if wrapper == 0 {
		var names []string
		for _, f := range st.Frames {
			if f.Source != nil {
				names = append(names, f.Name+"@"+f.Source.Path+f.Source.Origin+"("+f.Source.Name+")")
			}
		}
		t.Errorf("no remote_debug.py frame among the %d frames VS Code read: %v", len(st.Frames), names)
	}
}

// grepLines is the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
