//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/nvimdapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
	"github.com/sparkdap/sparkdap/testkit/vscodeclient"
)

// taskLabelsJob lays out testdata/task_labels_job.py as the developer's
// copy (src, where the IDE's breakpoints are) and the copy Spark runs.
func taskLabelsJob(t testing.TB) (src, ship string) {
	t.Helper()
	root := t.TempDir()
	src = filepath.Join(root, "home", "dev", "job", "task_labels_job.py")
	ship = filepath.Join(root, "deploy", "job", "task_labels_job.py")
	copyFile(t, filepath.Join("testdata", "task_labels_job.py"), src)
	copyFile(t, filepath.Join("testdata", "task_labels_job.py"), ship)
	return src, ship
}

// runningTask is the stage and partition a stopped frame's worker runs,
// read from PySpark's TaskContext in that frame: the truth a label must
// tell.
func runningTask(t testing.TB, ctx context.Context, c *dapclient.Client, frameID int) (stage, partition string) {
	t.Helper()
	ev, err := c.Evaluate(ctx, frameID, "'%d %d' % (__import__('pyspark').TaskContext.get().stageId(), __import__('pyspark').TaskContext.get().partitionId())")
	if err != nil {
		t.Fatalf("evaluate the running task: %v", err)
	}
	f := strings.Fields(strings.Trim(ev.Result, "'\""))
	if len(f) != 2 {
		t.Fatalf("evaluate the running task: %q", ev.Result)
	}
	return f[0], f[1]
}

// namesTask reports whether a label names stage and partition.
func namesTask(label, stage, partition string) bool {
	return regexp.MustCompile(`\bstage `+regexp.QuoteMeta(stage)+`\b`).MatchString(label) &&
		regexp.MustCompile(`\bpartition `+regexp.QuoteMeta(partition)+`\b`).MatchString(label)
}

var pidRE = regexp.MustCompile(`pid (\d+)`)

// TestSparkVSCodeShowsEachStoppedTask: a real local-mode Spark stage of
// twenty tasks, all debugged, runs at once; three stop at a breakpoint,
// the rest finish. In VS Code (testkit/vscodeclient: the requests and
// the rendering of the recorded sessions):
//   - each stop's CALL STACK row (the session name, cut at its end, and
//     the stop's text or description beside it) and its thread name name
//     the stage and partition the worker runs, and the three differ;
//   - only the root and the three stopped workers are listed;
//   - removing one of two breakpoints of the file, with the children
//     bound, leaves the root's remaining breakpoint (on a blank line)
//     verified where the workers then stop.
func TestSparkVSCodeShowsEachStoppedTask(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 6*time.Minute)
	src, ship := taskLabelsJob(t)
	first := testenv.MarkedLine(t, src, "first")
	beforeBlank := testenv.MarkedLine(t, src, "before-blank")
	blank := beforeBlank + 1
	p := startProxy(t, ctx, "--root", filepath.Dir(src))

	ide := vscodeIDE(t, filepath.Dir(src))
	ide.SetBreakpoints(src, first, blank)
	host, port, _ := net.SplitHostPort(p.IDE)
	root, err := ide.Attach(ctx, map[string]any{"name": "sparkdap", "type": "debugpy", "request": "attach",
		"connect": map[string]any{"host": host, "port": port}, "justMyCode": false})
	if err != nil {
		t.Fatal(err)
	}
	const workers, stopping = 20, 3
	out := filepath.Join(t.TempDir(), "out.json")
	// The tasks gather before they go on, so that twenty workers run them.
	gather := t.TempDir()
	job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--", "--master", fmt.Sprintf("local[%d]", workers),
		"--conf", "spark.ui.enabled=false", ship, out, fmt.Sprint(workers), fmt.Sprint(stopping), gather)

	nextShown := func(what string) *vscodeclient.Stop {
		t.Helper()
		select {
		case st := <-ide.Stops():
			if st.Err != nil {
				t.Fatalf("%s: VS Code could not show the stop: %v", what, st.Err)
			}
			return st
		case <-job.done:
			t.Fatalf("%s: the job ended (%v) without the stop", what, job.err)
		case <-ctx.Done():
			t.Fatalf("%s: VS Code showed no stop", what)
		}
		return nil
	}
	stops := map[string]*vscodeclient.Stop{} // by partition
	rows := map[string]bool{}
	for range stopping {
		st := nextShown("the three stops at once")
		if st.Top().Line != first {
			t.Fatalf("stopped at line %d, want %d", st.Top().Line, first)
		}
		stage, partition := runningTask(t, ctx, st.Session.Client, st.Top().Id)
		stops[partition] = st
		// VS Code's CALL STACK: the session's name, then the stop's text
		// (or, without one, its description) in the row's label.
		beside := st.Event.Text
		if beside == "" {
			beside = st.Event.Description
		}
		row := st.Session.Name + " " + beside
		if !namesTask(beside, stage, partition) {
			t.Errorf("VS Code shows the stop of the task in stage %s, partition %s as %q beside the session", stage, partition, beside)
		}
		// At VS Code's default side bar width (300 px) the row shows
		// some 34 characters of the text beside the name and none of the
		// name: the partition must come first there.
		if want := "partition " + partition + " · stage " + stage; !strings.HasPrefix(beside, want) {
			t.Errorf("VS Code shows %q beside the session of the task in stage %s, partition %s: cut at 300 px, it does not start with %q", beside, stage, partition, want)
		}
		if !strings.HasPrefix(st.Session.Name, "partition "+partition+" · stage "+stage) {
			t.Errorf("the session of the task in stage %s, partition %s is named %q: cut at its end, it does not show the task", stage, partition, st.Session.Name)
		}
		if !namesTask(st.Thread, stage, partition) {
			t.Errorf("the thread of the task in stage %s, partition %s is named %q", stage, partition, st.Thread)
		}
		rows[row] = true
	}
	if len(stops) != stopping || len(rows) != stopping {
		t.Errorf("three stops in three tasks: partitions %v, rows %v", keys(stops), rows)
	}

	// Every task has a debugged worker; once all twenty attached, VS Code
	// lists the root and the three stopped ones only.
	waitUntil(t, ctx, "twenty workers attached", func() (bool, string) {
		n := strings.Count(p.Log(), "executor attached")
		return n >= workers, fmt.Sprintf("%d attached", n)
	})
	var listed []string
	for _, s := range ide.Sessions() {
		if !s.Ended() {
			listed = append(listed, s.Name)
		}
	}
	if len(listed) != 1+stopping {
		t.Errorf("VS Code lists %d sessions, want the root and the %d stopped workers: %q", len(listed), stopping, listed)
	}

	// The user removes the breakpoint at the first line. VS Code sends the
	// file's remaining breakpoint, on a blank line, to every session; the
	// children's workers have the file loaded and bind it to the code line
	// before it, as pydevd does with a line that has no code.
	bps, err := ide.EditBreakpoints(ctx, src, blank)
	if err != nil || len(bps) != 1 {
		t.Fatalf("the root's setBreakpoints [%d]: %v %+v", blank, err, bps)
	}
	rootBP := bps[0]
	if !rootBP.Verified {
		ev, err := root.Client.WaitEvent(ctx, "breakpoint", func(body json.RawMessage) bool {
			var b godap.BreakpointEventBody
			return json.Unmarshal(body, &b) == nil && b.Breakpoint.Id == rootBP.Id && b.Breakpoint.Verified
		})
		if err != nil {
			t.Fatalf("the root's breakpoint at line %d stayed %q although the stopped workers have the file loaded: %v", blank, rootBP.Message, err)
		}
		var b godap.BreakpointEventBody
		_ = ev.Decode(&b)
		rootBP = b.Breakpoint
	}
	if rootBP.Line != beforeBlank {
		t.Errorf("the root shows the breakpoint of blank line %d at line %d; the workers bind it at line %d", blank, rootBP.Line, beforeBlank)
	}
	for partition, st := range stops {
		if err := st.Session.Continue(ctx, st.Event.ThreadId); err != nil {
			t.Fatalf("continue partition %s: %v", partition, err)
		}
	}
	for range stopping {
		st := nextShown("the stops before the blank line")
		if st.Top().Line != rootBP.Line {
			t.Errorf("a worker stopped at line %d; the root shows the breakpoint verified at line %d", st.Top().Line, rootBP.Line)
		}
		_, partition := runningTask(t, ctx, st.Session.Client, st.Top().Id)
		if before := stops[partition]; before == nil || before.Session != st.Session {
			t.Errorf("partition %s stopped again in session %q, not in the session of its first stop", partition, st.Session.Name)
		}
		if err := st.Session.Continue(ctx, st.Event.ThreadId); err != nil {
			t.Fatal(err)
		}
	}
	job.wait(t, ctx)
	want := map[string]any{"0": float64(90), "1": float64(100)}
	if got := readJSON(t, out)["sums"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sums = %v, want the plain run's %v", got, want)
	}
}

// TestSparkNvimDapThreadNameFollowsTask: a real local-mode Spark job on
// one core, so that one reused Python worker runs every task. It stops in
// the first stage, is continued, and stops again in the second stage.
// nvim-dap (testkit/nvimdapclient: its thread table and refresh rules)
// reads thread names only for a thread it does not know or after a
// thread event; at each stop the name it holds, and the sessions widget's
// line of a child session, must name the stage and partition the worker
// runs then. nvim-dap 0.6 and later take child sessions; a client that
// does not gets every worker's threads in one session.
func TestSparkNvimDapThreadNameFollowsTask(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	for _, tc := range []struct {
		name  string
		child bool
	}{{"child sessions", true}, {"merged threads", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 4*time.Minute)
			src, ship := taskLabelsJob(t)
			lines := []int{testenv.MarkedLine(t, src, "first"), testenv.MarkedLine(t, src, "second")}
			p := startProxy(t, ctx, "--root", filepath.Dir(src))
			root := dialIDE(t, ctx, p.IDE)
			setBPs := func(ctx context.Context, c *dapclient.Client) error {
				_, err := c.SetBreakpoints(ctx, src, lines...)
				return err
			}
			var children <-chan dapclient.Child
			if tc.child {
				children = root.FollowChildren(ctx, setBPs)
			}
			if _, err := root.Initialize(ctx, tc.child); err != nil {
				t.Fatal(err)
			}
			if err := root.Attach(ctx, map[string]any{"name": "sparkdap"}, func(ctx context.Context) error {
				return setBPs(ctx, root)
			}); err != nil {
				t.Fatal(err)
			}
			rootSession := nvimdapclient.New(root, 1, "sparkdap")

			out := filepath.Join(t.TempDir(), "out.json")
			job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
				"submit", "--proxy", p.Executors, "--", "--master", "local[1]",
				"--conf", "spark.ui.enabled=false", "--conf", "spark.python.worker.reuse=true", ship, out, "2", "1")

			// stopIn waits for the next stop as nvim-dap shows it: in a new
			// child session, or in the root.
			sessions := 1
			stopIn := func(what string) (*nvimdapclient.Session, *dapclient.Client) {
				t.Helper()
				c, s := root, rootSession
				if tc.child {
					select {
					case ch := <-children:
						if ch.Err != nil {
							t.Fatalf("%s: child session: %v", what, ch.Err)
						}
						t.Cleanup(func() { ch.Client.Close() })
						var cfg struct {
							Name string `json:"name"`
						}
						_ = json.Unmarshal(ch.Config.Configuration, &cfg)
						sessions++
						c, s = ch.Client, nvimdapclient.New(ch.Client, sessions, cfg.Name)
					case <-job.done:
						t.Fatalf("%s: the job ended (%v) with no child session", what, job.err)
					case <-ctx.Done():
						t.Fatalf("%s: no child session", what)
					}
				}
				if _, err := c.WaitEvent(ctx, "stopped", nil); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				return s, c
			}

			type seen struct{ stage, pid string }
			var stops []seen
			for i, what := range []string{"the stop in the first stage", "the stop in the second stage"} {
				s, c := stopIn(what)
				th, ok := s.StoppedThread()
				if !ok {
					t.Fatalf("%s: nvim-dap holds no stopped thread", what)
				}
				frames, err := c.StackTrace(ctx, th.ID)
				if err != nil || len(frames) == 0 {
					t.Fatalf("%s: stackTrace: %v", what, err)
				}
				if frames[0].Line != lines[i] {
					t.Fatalf("%s: stopped at line %d, want %d", what, frames[0].Line, lines[i])
				}
				stage, partition := runningTask(t, ctx, c, frames[0].Id)
				if !namesTask(th.Name, stage, partition) {
					t.Errorf("%s: the worker runs stage %s, partition %s; nvim-dap holds its thread as %q", what, stage, partition, th.Name)
				}
				if tc.child && !strings.Contains(s.SessionsLine(), "partition "+partition+" · stage "+stage) {
					t.Errorf("%s: the sessions widget shows %q, not the task (stage %s, partition %s)", what, s.SessionsLine(), stage, partition)
				}
				// The worker's pid is in its thread's name, or with child
				// sessions in the session's name.
				pid := pidRE.FindString(th.Name + " " + s.Name)
				stops = append(stops, seen{stage, pid})
				if err := c.Continue(ctx, th.ID); err != nil {
					t.Fatal(err)
				}
			}
			if stops[0].pid == "" || stops[0].pid != stops[1].pid {
				t.Fatalf("the two stops were in workers %q and %q: the job did not reuse its worker, and the test shows nothing", stops[0].pid, stops[1].pid)
			}
			if stops[0].stage == stops[1].stage {
				t.Fatalf("both stops ran in stage %s", stops[0].stage)
			}
			job.wait(t, ctx)
			want := map[string]any{"0": float64(0), "1": float64(1)}
			if got := readJSON(t, out)["sums"]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("sums = %v, want the plain run's %v", got, want)
			}
		})
	}
}

// waitUntil polls cond every 100 ms until it holds or ctx ends.
func waitUntil(t testing.TB, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%s)", what, ctx.Err(), state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
