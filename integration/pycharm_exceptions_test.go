//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestPyCharmExceptionsGrouped: real pydevd-pycharm in every task of a
// real local Spark job, PyCharm's "Any exception" breakpoint on raise
// (BaseException, as PyCharm sends it, ignoring library files). Forty tasks raise and catch the
// same KeyError: PyCharm is shown one suspend, the group counts forty by
// the raised type (not the breakpoint's BaseException), the others run on
// after the hold, and the job's result is a plain run's.
func TestPyCharmExceptionsGrouped(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 6*time.Minute)
	j := startPyCharmScriptServe(t, ctx, "local[2]", "", "pcraise.py", "--exception-hold", "300ms")
	line := testenv.MarkedLine(t, j.localMath, "pcmath-lookup")
	if _, err := j.ide.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	// PyCharm's ExceptionBreakpointCommand: name, condition, log
	// expression, notify on raise (2: once per exception), on terminate,
	// ignore library files (PySpark's own code raises and catches too).
	if _, err := j.ide.Send(pycharm.CmdAddExceptionBreak, "python-BaseException", "None", "None", "2", "0", "1"); err != nil {
		t.Fatal(err)
	}
	if err := j.ide.ShowReturnValues(false); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ide.Send(pycharm.CmdRun); err != nil {
		t.Fatal(err)
	}
	th := j.nextSuspend(t, ctx)
	if top := th.Frames[0]; top.File != j.localMath || top.Line != line {
		t.Fatalf("suspended at %s:%d, want the KeyError at %s:%d", top.File, top.Line, j.localMath, line)
	}
	want := selection.ExceptionGroup{Type: "KeyError", Place: fmt.Sprintf("pcmath.py:%d", line), Tasks: 40}
	var groups []selection.ExceptionGroup
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		groups = exceptionGroupsAt(t, ctx, j.control)
		if len(groups) == 1 && groups[0] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exception groups %+v, want %+v", groups, want)
		}
	}
	if _, err := j.ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if m, err := j.ide.WaitFor(short, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend }); err == nil {
		t.Errorf("PyCharm was shown a second suspend: %v", m)
	}
	if listed := sparkdapCLI(t, ctx, "workers", "--control", j.control); !strings.Contains(listed, "40 tasks raised KeyError at pcmath.py:") {
		t.Errorf("workers printed:\n%s", listed)
	}
}

// exceptionGroupsAt is `sparkdap workers --control path --json`'s groups.
func exceptionGroupsAt(t *testing.T, ctx context.Context, control string) []selection.ExceptionGroup {
	t.Helper()
	return exceptionGroupsArgs(t, ctx, "--control", control)
}
