//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// exceptionGroups is `sparkdap workers --json`'s groups.
func exceptionGroups(t *testing.T, ctx context.Context, ide string) []selection.ExceptionGroup {
	t.Helper()
	return exceptionGroupsArgs(t, ctx, "--ide", ide)
}

// exceptionGroupsArgs is `sparkdap workers --json`'s groups, serve found
// with args.
func exceptionGroupsArgs(t *testing.T, ctx context.Context, args ...string) []selection.ExceptionGroup {
	t.Helper()
	var ans struct{ Exceptions []selection.ExceptionGroup }
	out := sparkdapCLI(t, ctx, append(append([]string{"workers"}, args...), "--json")...)
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatalf("workers --json: %v: %q", err, out)
	}
	return ans.Exceptions
}

// TestSparkExceptionsGrouped: every task of a real local Spark job debugged,
// exception breakpoints on raised exceptions. Twenty tasks raise the same
// KeyError at the same line: the IDE gets one stop, `sparkdap workers`
// one line for the twenty, and the others run on after the hold, so the
// job's result is a plain run's. Then a KeyError that escapes: its first
// stop shows, and after continue the job fails as a plain run fails.
func TestSparkExceptionsGrouped(t *testing.T) {
	sparkSubmit := requireSpark(t)
	ctx := testContext(t, 8*time.Minute)
	dir := t.TempDir()
	job := filepath.Join(dir, "many_raise_job.py")
	copyFile(t, filepath.Join("testdata", "many_raise_job.py"), job)
	lookup, strict := testenv.MarkedLine(t, job, "lookup"), testenv.MarkedLine(t, job, "strict")

	plain := startSpark(t, ctx, dir, nil, sparkSubmit, "--master", "local[2]", job, "fail", filepath.Join(dir, "plain.json"))
	select {
	case <-plain.done:
	case <-ctx.Done():
		t.Fatal("the plain run did not end")
	}
	plainFailure := strings.Contains(plain.out.String(), "JOB FAILED: True")
	if !plainFailure {
		t.Fatalf("the plain run did not fail with the KeyError:\n%s", tail(plain.out.String(), 4<<10))
	}

	p := startProxy(t, ctx, "--root", dir, "--exception-hold", "300ms")
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": true}, func(ctx context.Context) error {
		return ide.Call(ctx, "setExceptionBreakpoints", map[string]any{"filters": []string{"raised"}}, nil)
	}); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "caught.json")
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--", "--master", "local[2]", job, "caught", out)
	s := nextStop(t, ctx, ide, r)
	if s.path != job || s.line != lookup {
		t.Fatalf("stopped at %s:%d, want the KeyError at %s:%d", s.path, s.line, job, lookup)
	}
	want := fmt.Sprintf("20 tasks raised KeyError at many_raise_job.py:%d", lookup)
	var groups []selection.ExceptionGroup
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		groups = exceptionGroups(t, ctx, p.IDE)
		if len(groups) == 1 && groups[0].Tasks == 20 && groups[0].Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exception groups %+v: want the 20 tasks' KeyError, none held", groups)
		}
	}
	if listed := sparkdapCLI(t, ctx, "workers", "--ide", p.IDE); !strings.Contains(listed, want) {
		t.Errorf("workers printed:\n%s\nwant a line %q", listed, want)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(-20) {
		t.Errorf("total %v, want -20 (each task caught its KeyError)", got)
	}
	if n := countStops(ide); n != 1 {
		t.Errorf("%d stops for one group, want 1: %s", n, stoppedEvents(ide))
	}

	// Escaping: a group of its own (another place) stops once; the job
	// then fails as the plain run did.
	r = startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--", "--master", "local[2]", job, "fail", filepath.Join(dir, "fail.json"))
	s = nextStop(t, ctx, ide, r)
	if s.line != strict {
		t.Fatalf("stopped at %s:%d, want the escaping KeyError at line %d", s.path, s.line, strict)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatal("the failing job did not end")
	}
	if r.err == nil || !strings.Contains(r.out.String(), "JOB FAILED: True") {
		t.Errorf("the job should fail with the KeyError as the plain run did: err %v\n%s", r.err, tail(r.out.String(), 4<<10))
	}
}

// stoppedEvents describes every stopped event the IDE got, for a failure
// that counts more than it should.
func stoppedEvents(ide *dapclient.Client) string {
	var b strings.Builder
	for _, ev := range ide.Events() {
		if ev.Event == "stopped" {
			fmt.Fprintf(&b, "\n\t%s", ev.Body)
		}
	}
	return b.String()
}
