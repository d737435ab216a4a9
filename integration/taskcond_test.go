//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// setConditionalBreakpoint sets one breakpoint at path:line with an
// IDE's breakpoint condition, as VS Code sends it.
func setConditionalBreakpoint(ctx context.Context, ide *dapclient.Client, path string, line int, condition string) error {
	args := dap.SetBreakpointsArguments{Source: dap.Source{Path: path},
		Breakpoints: []dap.SourceBreakpoint{{Line: line, Condition: condition}}}
	return ide.Call(ctx, "setBreakpoints", args, nil)
}

// TestSparkTaskConditions debugs every task of a real local Spark job
// with a breakpoint whose condition names the task: `sparkdap.partition
// == 2` together with the user's own `x == 25` stops once, in that task,
// and the debug console sees the same names. A condition naming what
// sparkdap lacks gets pydevd's condition error at the IDE, as any
// condition that raises does, and the job still ends with its result.
func TestSparkTaskConditions(t *testing.T) {
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	// The job runs from one directory, the developer's copy (serve's
	// --root) is in another: breakpoints are set on the developer's.
	src, dir := t.TempDir(), t.TempDir()
	job, srcJob := filepath.Join(dir, "four_partitions.py"), filepath.Join(src, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), srcJob)
	line := testenv.MarkedLine(t, job, "square")
	for _, tc := range []struct {
		name, condition string
		// check runs once the IDE has what the condition makes pydevd
		// send: a stop (stop), or only output.
		stop  bool
		check func(t *testing.T, ide *dapclient.Client, s sparkStop)
	}{
		{"partition", "sparkdap.partition == 2 and x == 25", true, func(t *testing.T, ide *dapclient.Client, s sparkStop) {
			if s.path != srcJob || s.line != line {
				t.Errorf("stopped at %s:%d, want %s:%d", s.path, s.line, srcJob, line)
			}
			if s.locals["x"] != "25" {
				t.Errorf("stopped with x = %q, want 25 (partition 2 holds 20..29)", s.locals["x"])
			}
			res, err := ide.Evaluate(ctx, s.frameID, "(sparkdap.stage, sparkdap.partition, sparkdap.attempt, sparkdap.executor)")
			if err != nil || !strings.HasSuffix(res.Result, ", 2, 0, 'driver')") {
				t.Errorf("evaluate sparkdap's names = %v (%v), want (stage, 2, 0, 'driver')", res, err)
			}
		}},
		{"unknown name", "sparkdap.partiton == 2", false, func(t *testing.T, ide *dapclient.Client, _ sparkStop) {
			wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err := ide.WaitEvent(wait, "output", func(body json.RawMessage) bool {
				_, text, err := dapclient.DecodeOutput(body)
				return err == nil && strings.Contains(text, "conditional breakpoint: sparkdap.partiton == 2") &&
					strings.Contains(text, "AttributeError")
			})
			if err != nil {
				t.Errorf("the IDE was not told the condition failed with an AttributeError: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, ctx, "--root", src)
			ide := dialIDE(t, ctx, p.IDE)
			if _, err := ide.Initialize(ctx, false); err != nil {
				t.Fatal(err)
			}
			if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, func(ctx context.Context) error {
				return setConditionalBreakpoint(ctx, ide, srcJob, line, tc.condition)
			}); err != nil {
				t.Fatal(err)
			}
			result := filepath.Join(dir, tc.name+".json")
			r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
				"submit", "--proxy", p.Executors, "--", "--master", "local[2]", job, result)
			var s sparkStop
			if tc.stop {
				s = nextStop(t, ctx, ide, r)
			}
			tc.check(t, ide, s)
			// Detaching resumes every worker, the other one stopped on the
			// failing condition too, and the job runs on undebugged.
			if err := ide.Disconnect(ctx, false); err != nil {
				t.Fatal(err)
			}
			r.wait(t, ctx)
			if got := readJSON(t, result)["total"]; got != float64(20540) {
				t.Errorf("total = %v, want 20540", got)
			}
		})
	}
}
