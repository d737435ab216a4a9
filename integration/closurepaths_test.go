//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// wrapConfArgs runs `sparkdap wrap` and `sparkdap conf` as the README tells
// notebook and scheduler users to, and returns the spark-submit options conf
// prints, with the token variable expanded as the user's shell would.
func wrapConfArgs(t testing.TB, ctx context.Context, p *proxy, confFlags ...string) []string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.CommandContext(ctx, sparkdapBinary(t), "wrap", "-o", dir).CombinedOutput(); err != nil {
		t.Fatalf("sparkdap wrap: %v\n%s", err, out)
	}
	args := append([]string{"conf", "-wrapper", filepath.Join(dir, "remote_debug.py"), "--proxy", p.Executors}, confFlags...)
	out, err := exec.CommandContext(ctx, sparkdapBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sparkdap conf: %v\n%s", err, out)
	}
	var opts []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			break // the SparkSession.builder snippet follows
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "--") {
			continue
		}
		if strings.ContainsAny(value, `'\`) {
			t.Fatalf("conf quoted %q for the shell; the test's temp paths should need no quoting", value)
		}
		opts = append(opts, name, strings.ReplaceAll(value, `"$SPARKDAP_TOKEN"`, p.Token))
	}
	if len(opts) == 0 {
		t.Fatalf("sparkdap conf printed no spark-submit options:\n%s", out)
	}
	return opts
}

// TestSparkDriverClosuresBindWithoutDriverDir: a lambda and a UDF defined in
// the driver's script stop at the developer's lines when the job runs
// through `sparkdap wrap` + `conf` (no `sparkdap submit`, so no
// SPARKDAP_DRIVER_DIR), with the script deleted before any task runs and the
// workers started from another directory: nothing on the executor side
// names the driver's directory except the functions the worker unpickles.
func TestSparkDriverClosuresBindWithoutDriverDir(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	sparkSubmit := requireSpark(t)
	ctx := testContext(t, 6*time.Minute)

	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "job.py")   // the developer's copy
	ship := filepath.Join(root, "deploy", "job.py")       // what the driver runs, then deletes
	runDir := filepath.Join(root, "scheduler", "workdir") // where Spark (and so the workers) run
	copyFile(t, filepath.Join("testdata", "driver_closures_job.py"), src)
	copyFile(t, filepath.Join("testdata", "driver_closures_job.py"), ship)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"driver-lambda": testenv.MarkedLine(t, src, "driver-lambda"),
		"driver-udf":    testenv.MarkedLine(t, src, "driver-udf"),
	}

	// A file of the developer's that no executor loads: it exists at its
	// own path on this shared machine, so pydevd verifies it there.
	unused := filepath.Join(filepath.Dir(src), "unused.py")
	if err := os.WriteFile(unused, []byte("x = 1\ny = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p := startProxy(t, ctx, "--root", filepath.Dir(src))
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	armed := []int{want["driver-lambda"], want["driver-udf"]}
	var srcIDs []int
	unusedID := 0
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, func(ctx context.Context) error {
		bps, err := ide.SetBreakpoints(ctx, src, armed...)
		if err != nil {
			return err
		}
		ubps, err := ide.SetBreakpoints(ctx, unused, 2)
		if err != nil {
			return err
		}
		for _, bp := range append(bps, ubps...) {
			if bp.Verified || !strings.Contains(bp.Message, "pending") {
				return fmt.Errorf("breakpoint %+v before any executor ran: want unverified and pending", bp)
			}
			srcIDs = append(srcIDs, bp.Id)
		}
		unusedID, srcIDs = ubps[0].Id, srcIDs[:len(bps)]
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	args := wrapConfArgs(t, ctx, p, "--partitions", "1", "--driver-dir", "")
	out := filepath.Join(t.TempDir(), "out.json")
	args = append(append([]string{"--master", "local[2]"}, args...), ship, out)
	// An empty SPARKDAP_DRIVER_DIR counts as unset: make sure none leaks in
	// from the environment running the tests.
	job := startSpark(t, ctx, runDir, []string{"SPARKDAP_DRIVER_DIR="}, sparkSubmit, args...)

	seen := map[string]bool{}
	for len(seen) < len(want) {
		s := nextStop(t, ctx, ide, job)
		name := ""
		for n, line := range want {
			if s.path == src && s.line == line {
				name = n
			}
		}
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), want one of the developer's %s:%v", s.path, s.line, s.function, src, want)
		}
		if seen[name] {
			t.Fatalf("stopped at %s twice: its breakpoint was removed after the first hit", name)
		}
		seen[name] = true
		// Partition 1 of 4 over 0..99 holds 25..49, in both stages.
		v := s.locals["x"]
		if name == "driver-udf" {
			v = s.locals["n"]
		}
		if n, err := strconv.Atoi(v); err != nil || n < 25 || n >= 50 {
			t.Errorf("%s: locals %v: want a value of partition 1 (25..49)", name, s.locals)
		}
		var keep []int
		for _, line := range armed {
			if line != s.line {
				keep = append(keep, line)
			}
		}
		armed = keep
		if _, err := ide.SetBreakpoints(ctx, src, armed...); err != nil {
			t.Fatal(err)
		}
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
	}
	job.wait(t, ctx)
	got := readJSON(t, out)
	if got["total"] != float64(3*4950+100) || got["udf_total"] != float64(4950+700) {
		t.Errorf("result %v, want total %d and udf_total %d", got, 3*4950+100, 4950+700)
	}
	if _, err := os.Stat(ship); !os.IsNotExist(err) {
		t.Errorf("the driver script %s still exists (stat: %v): the test did not hide it from the executors", ship, err)
	}

	// What the IDE was told: the driver script's breakpoints turned
	// verified once a task unpickled its functions; the file no executor
	// loads never did, and says why and what to do.
	events := breakpointEvents(t, ctx, ide)
	for _, id := range srcIDs {
		if !slices.ContainsFunc(events[id], func(b shownBreakpoint) bool { return b.Verified }) {
			t.Errorf("driver script breakpoint %d never shown verified: %+v", id, events[id])
		}
	}
	told := events[unusedID]
	if slices.ContainsFunc(told, func(b shownBreakpoint) bool { return b.Verified }) || len(told) == 0 ||
		!strings.Contains(told[len(told)-1].Message, "loads no code from: "+unused) ||
		!strings.Contains(told[len(told)-1].Message, "sparkdap submit") {
		t.Errorf("breakpoint in a file no executor loads: events %+v, want it unverified, saying where it is set and what to do", told)
	}
}

// shownBreakpoint is a breakpoint as a breakpoint event shows it.
type shownBreakpoint struct {
	ID       int    `json:"id"`
	Verified bool   `json:"verified"`
	Message  string `json:"message"`
}

// breakpointEvents returns, by breakpoint id, every breakpoint event the
// IDE has received so far, in order.
func breakpointEvents(t testing.TB, ctx context.Context, ide *dapclient.Client) map[int][]shownBreakpoint {
	t.Helper()
	out := map[int][]shownBreakpoint{}
	for range 1000 {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ev, err := ide.WaitEvent(wctx, "breakpoint", nil)
		cancel()
		if err != nil {
			return out // none left
		}
		var body struct{ Breakpoint shownBreakpoint }
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			t.Fatal(err)
		}
		out[body.Breakpoint.ID] = append(out[body.Breakpoint.ID], body.Breakpoint)
	}
	return out
}

// TestSparkClosuresFromANewDirectoryInAReusedWorker: a worker that attached
// for code from one directory binds breakpoints in code from another when
// it runs its next task, as a Spark Connect server's workers do for clients
// in different folders. The proxy only learns the new directory from the
// task event; the worker must not run the task's code before the proxy's
// breakpoints for it arrived.
func TestSparkClosuresFromANewDirectoryInAReusedWorker(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	sparkSubmit := requireSpark(t)
	ctx := testContext(t, 6*time.Minute)

	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "other_client.py") // the developer's copy
	driver := filepath.Join(root, "deploy", "job.py")
	other := filepath.Join(root, "client2", "other_client.py")
	runDir := filepath.Join(root, "server")
	copyFile(t, filepath.Join("testdata", "other_client.py"), src)
	copyFile(t, filepath.Join("testdata", "other_client.py"), other)
	copyFile(t, filepath.Join("testdata", "two_dirs_job.py"), driver)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, src, "other-client")

	p := startProxy(t, ctx, "--root", filepath.Dir(src))
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, func(ctx context.Context) error {
		_, err := ide.SetBreakpoints(ctx, src, line)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	args := wrapConfArgs(t, ctx, p, "--partitions", "1", "--driver-dir", "")
	out := filepath.Join(t.TempDir(), "out.json")
	args = append(append([]string{"--master", "local[1]"}, args...), driver, out, other)
	job := startSpark(t, ctx, runDir, []string{"SPARKDAP_DRIVER_DIR="}, sparkSubmit, args...)

	s := nextStop(t, ctx, ide, job)
	if s.path != src || s.line != line {
		t.Fatalf("stopped at %s:%d (%s), want the developer's %s:%d", s.path, s.line, s.function, src, line)
	}
	if x, err := strconv.Atoi(s.locals["x"]); err != nil || x != 25 {
		t.Errorf("locals %v: want x = 25, the first element of partition 1: the breakpoint was late", s.locals)
	}
	if _, err := ide.SetBreakpoints(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	got := readJSON(t, out)
	if got["first"] != float64(2*4950) || got["second"] != float64(5*4950) {
		t.Errorf("result %v, want first %d and second %d", got, 2*4950, 5*4950)
	}
	// One worker ran both jobs' debugged tasks: the stop above was in a
	// reused worker, which attached for the first directory.
	if n := strings.Count(p.Log(), "executor attached"); n != 1 {
		t.Errorf("%d executor sessions, want 1 (the worker was not reused, so this test did not test a reused worker)", n)
	}
}
