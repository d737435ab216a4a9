//go:build linux

package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestSparkPostMortem: with --post-mortem, a task whose UDF raises stops
// where the exception leaves the user's code, with the exception on
// show, before Spark reports the failure; continuing lets the job fail as
// it would without sparkdap.
func TestSparkPostMortem(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir := t.TempDir()
	job := filepath.Join(dir, "failing_job.py")
	copyFile(t, filepath.Join("testdata", "failing_job.py"), job)
	line := testenv.MarkedLine(t, job, "raise")

	p := startProxy(t, ctx, "--root", dir)
	ide := dialIDE(t, ctx, p.IDE)
	// No exception breakpoints from the IDE: --post-mortem alone must do it.
	attachMerged(t, ctx, ide, false)
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--post-mortem", "--partitions", "1", "--",
		"--master", "local[2]", job)

	s := nextStop(t, ctx, ide, r)
	// pydevd names the frame of an exception stop "checked_ratio (Current frame)".
	if s.path != job || s.line != line || !strings.HasPrefix(s.function, "checked_ratio") {
		t.Fatalf("stopped in %s at %s:%d, want checked_ratio at %s:%d", s.function, s.path, s.line, job, line)
	}
	if s.locals["x"] != "13" {
		t.Errorf("x = %q at the failing row, want 13", s.locals["x"])
	}
	var info godap.ExceptionInfoResponseBody
	if err := ide.Call(ctx, "exceptionInfo", map[string]any{"threadId": s.threadID}, &info); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.ExceptionId, "ValueError") || !strings.Contains(info.Description, "bad row 13") {
		t.Errorf("exceptionInfo = %+v, want the ValueError", info)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(2 * time.Minute):
		// What stopped it, if something did (found this way: the wrapper's
		// SystemExit counted as one more user-unhandled exception).
		ev := ide.Events()
		t.Fatalf("the job did not end after continue; last event: %s %s", ev[len(ev)-1].Event, ev[len(ev)-1].Body)
	}
	if r.err == nil || !strings.Contains(r.out.String(), "JOB FAILED: True") {
		t.Errorf("the job should fail with the UDF's exception, as without sparkdap: err %v", r.err)
	}
}

// TestSparkWait: with --wait, the selected task stops at the first line of
// user code it runs, with no breakpoint set, and runs on after continue.
func TestSparkWait(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir := t.TempDir()
	job := filepath.Join(dir, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	out := filepath.Join(dir, "out.json")

	p := startProxy(t, ctx, "--root", dir)
	ide := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, ide, false)
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--wait", "--partitions", "1", "--",
		"--master", "local[2]", job, out)

	s := nextStop(t, ctx, ide, r)
	if s.path != job || s.line != testenv.MarkedLine(t, job, "square") || !strings.HasPrefix(s.function, "square") {
		t.Fatalf("stopped in %s at %s:%d, want the first line of square in %s", s.function, s.path, s.line, job)
	}
	if x := s.locals["x"]; x != "10" {
		t.Errorf("x = %q: want partition 1's first element, 10", x)
	}
	if !strings.Contains(s.thread, "partition 1 ·") {
		t.Errorf("thread %q is not partition 1's", s.thread)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540", got)
	}
}
