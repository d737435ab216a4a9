//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestCaptureReplayLoansExample: the loans example as a developer debugs
// it: stopped in each kind of function it gives Spark (the UDF, the
// mapValues lambda, the helper in loanlib.py shipped with --py-files, the
// mapInPandas function), "!capture" in the Debug Console, then the replay
// command it prints, run as printed from the example's directory with no
// PYTHONPATH: each returns the captured call's value (computed here from
// the stopped frame's arguments). Then `replay --debug` under a client
// that steps in, over and out: no stop and no frame it shows is replay's
// own code.
func TestCaptureReplayLoansExample(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	py := python(t)
	ctx := testContext(t, 8*time.Minute)
	l := newLoansLayout(t)
	capDir := filepath.Join(t.TempDir(), "captures")
	p := startProxy(t, ctx, "--root", l.src, "--capture-dir", capDir)
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := loansPlaces(t, l.srcMain, l.srcLib, "udf-body", "mapvalues-lambda", "loanlib-payment", "mapinpandas-body")
	armed := armedLines(want)
	err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": true},
		func(ctx context.Context) error {
			for path, lines := range armed {
				if _, err := ide.SetBreakpoints(ctx, path, lines...); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	job := startSpark(t, ctx, l.ship, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "0", "--",
		"--master", "local[2]", "--py-files", l.shipLib, l.shipMain)

	type captured struct {
		command string            // the replay command !capture printed
		locals  map[string]string // the stopped frame's locals
	}
	caps := map[string]captured{}
	for len(caps) < len(want) {
		s := nextStop(t, ctx, ide, job)
		name := placeName(want, s)
		if name == "" {
			t.Fatalf("stopped at %s:%d (%s), none of the breakpoints", s.path, s.line, s.function)
		}
		ev, err := ide.Evaluate(ctx, s.frameID, "!capture")
		if err != nil {
			t.Fatalf("%s: !capture: %v", name, err)
		}
		_, cmd, ok := strings.Cut(ev.Result, "replay: ")
		cmd, _, _ = strings.Cut(cmd, "\n")
		if !ok || !strings.HasPrefix(cmd, "sparkdap replay ") {
			t.Fatalf("%s: !capture answered %q, without the replay command", name, ev.Result)
		}
		caps[name] = captured{cmd, s.locals}
		disarmAndContinue(t, ctx, ide, armed, s)
	}
	job.wait(t, ctx)

	// The printed command, from the example's directory, with sparkdap and
	// the Python on PATH and nothing on PYTHONPATH.
	env := append(os.Environ(), "PATH="+filepath.Dir(sparkdapBinary(t))+string(os.PathListSeparator)+
		filepath.Dir(py)+string(os.PathListSeparator)+os.Getenv("PATH"))
	env = append(env, "PYTHONPATH=")
	printed := func(ctx context.Context, command string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Dir, cmd.Env = l.src, env
		return cmd
	}
	// value computes a call of the example's own code here: what the
	// captured call returned on the executor.
	value := func(expr string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, py, "-c", "import loanlib; print(repr("+expr+"))")
		cmd.Dir = l.src
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", expr, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	args := func(name string) string {
		loc := caps[name].locals
		return fmt.Sprintf("%s, %s, %s", loc["principal"], loc["annual_rate"], loc["years"])
	}
	cases := []struct{ name, returned string }{
		{"udf-body", value("round(loanlib.total_interest(" + args("udf-body") + "), 2)")},
		{"loanlib-payment", value("loanlib.monthly_payment(" + args("loanlib-payment") + ")")},
		{"mapvalues-lambda", value(fmt.Sprintf(`(lambda loan: round(loanlib.monthly_payment(loan["principal"], loan["annual_rate"], loan["years"]), 2))(%s)`,
			caps["mapvalues-lambda"].locals["loan"]))},
		{"mapinpandas-body", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := printed(ctx, caps[tc.name].command).CombinedOutput()
			if err != nil {
				t.Fatalf("%s from %s: %v\n%s", caps[tc.name].command, l.src, err, out)
			}
			if tc.returned != "" && !strings.Contains(string(out), "sparkdap replay: returned "+tc.returned+"\n") {
				t.Errorf("%s: want it to return %s as on the executor; output:\n%s", caps[tc.name].command, tc.returned, out)
			}
			if tc.returned == "" && !strings.Contains(string(out), "first_year_interest") {
				t.Errorf("%s: want the batch's first-year interest; output:\n%s", caps[tc.name].command, out)
			}
			if strings.Contains(string(out), "note:") {
				t.Errorf("%s: replay noted something missing:\n%s", caps[tc.name].command, out)
			}
		})
	}

	t.Run("debug steps", func(t *testing.T) {
		line := want["udf-body"].line
		steppedReplay(t, ctx, printed, caps["udf-body"].command, l.srcMain, line, "returned "+cases[0].returned)
	})
}

// steppedReplay runs command (a printed `sparkdap replay CAPTURE`) with
// --debug, stops a justMyCode client at script:line, then steps in, over
// and out until the replay ends: no stop and no frame of any stack it
// shows may be sparkdap_replay.py's.
func steppedReplay(t testing.TB, ctx context.Context, printed func(context.Context, string) *exec.Cmd, command, script string, line int, returned string) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
	cmd := printed(ctx, strings.Replace(command, "sparkdap replay ", "sparkdap replay --debug "+addr+" ", 1))
	c, done, out, end := attachReplayDebug(t, ctx, cmd, addr, script, line)
	defer end()
	// waitStop is the next stop, or nil when the replay ended first.
	waitStop := func() *godap.StoppedEventBody {
		stopCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := make(chan *godap.StoppedEventBody, 1)
		go func() {
			st, _ := c.StoppedEvent(stopCtx)
			stopped <- st
		}()
		select {
		case st := <-stopped:
			return st
		case err := <-done:
			done <- err
			return nil
		}
	}
	st := waitStop()
	if st == nil {
		t.Fatalf("replay --debug ended without stopping at %s:%d", script, line)
	}
	// Step in (into loanlib), over, and out, until the replay ends; a
	// stop in replay's own frames fails.
	steps := []string{"stepIn", "next", "stepOut", "stepOut", "stepOut", "next", "next", "stepOut"}
	var tops []string // where each stop was
	for i := 0; st != nil; i++ {
		frames, err := c.StackTrace(ctx, st.ThreadId)
		if err != nil || len(frames) == 0 {
			t.Fatalf("stackTrace: %v %v", frames, err)
		}
		if frames[0].Source != nil {
			tops = append(tops, fmt.Sprintf("%s %s:%d", frames[0].Name, filepath.Base(frames[0].Source.Path), frames[0].Line))
		}
		for _, fr := range frames {
			if fr.Source != nil && strings.HasSuffix(fr.Source.Path, "sparkdap_replay.py") {
				t.Fatalf("after %v the stack shows replay's own frame %s at %s:%d (top: %s at %+v:%d)",
					steps[:i], fr.Name, fr.Source.Path, fr.Line, frames[0].Name, frames[0].Source, frames[0].Line)
			}
		}
		if i == len(steps) {
			if err := c.Continue(ctx, st.ThreadId); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := c.Request(ctx, steps[i], map[string]any{"threadId": st.ThreadId}); err != nil {
			t.Fatalf("%s: %v", steps[i], err)
		}
		st = waitStop()
	}
	t.Logf("stops: %s", strings.Join(tops, ", "))
	if len(tops) < 2 || !strings.HasPrefix(tops[1], "total_interest loanlib.py:") {
		t.Errorf("stops %q: want stepIn to land in loanlib.total_interest", tops)
	}
	select {
	case err := <-done:
		done <- err
		var ee *exec.ExitError
		if (err != nil && !errors.As(err, &ee)) || !strings.Contains(out.String(), returned) {
			t.Errorf("replay --debug ended with %v, want %q; output:\n%s", err, returned, out.String())
		}
	case <-ctx.Done():
		t.Fatal("replay --debug did not finish")
	}
}
