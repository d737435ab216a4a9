//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestSparkIDELeavesWhileWorkerStopped: the IDE goes away while a real
// local-mode Spark worker is stopped at a breakpoint, the job's files
// living at another path than the developer's (--root), so the proxy maps
// between them. However it leaves (root or child session, disconnect or a
// dropped connection), the worker runs on without stopping again and the
// job finishes with the plain run's result.
func TestSparkIDELeavesWhileWorkerStopped(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	for _, tt := range []struct {
		name  string
		child bool // the leaving session is the executor's child session
		leave func(ctx context.Context, c *dapclient.Client) error
	}{
		{"root disconnects", false, func(ctx context.Context, c *dapclient.Client) error { return c.Disconnect(ctx, false) }},
		{"root connection drops", false, func(ctx context.Context, c *dapclient.Client) error { return c.Close() }},
		{"child session disconnects", true, func(ctx context.Context, c *dapclient.Client) error { return c.Disconnect(ctx, false) }},
		{"child connection drops", true, func(ctx context.Context, c *dapclient.Client) error { return c.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Each way of leaving has its own serve, IDE, job and files,
			// and the checks read only those: they run side by side,
			// most of each being a JVM and Python workers starting.
			t.Parallel()
			ctx := testContext(t, 4*time.Minute)
			root := t.TempDir()
			src := filepath.Join(root, "home", "dev", "job", "four_partitions.py")
			ship := filepath.Join(root, "deploy", "job", "four_partitions.py")
			copyFile(t, filepath.Join("testdata", "four_partitions.py"), src)
			copyFile(t, filepath.Join("testdata", "four_partitions.py"), ship)
			line := testenv.MarkedLine(t, src, "square")
			p := startProxy(t, ctx, "--root", filepath.Dir(src))

			ide := dialIDE(t, ctx, p.IDE)
			var children <-chan dapclient.Child
			if tt.child {
				children = ide.FollowChildren(ctx, func(ctx context.Context, child *dapclient.Client) error {
					_, err := child.SetBreakpoints(ctx, src, line)
					return err
				})
			}
			if _, err := ide.Initialize(ctx, tt.child); err != nil {
				t.Fatal(err)
			}
			if err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
				func(ctx context.Context) error {
					_, err := ide.SetBreakpoints(ctx, src, line)
					return err
				}); err != nil {
				t.Fatal(err)
			}

			out := filepath.Join(t.TempDir(), "out.json")
			job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
				"submit", "--proxy", p.Executors, "--partitions", "1", "--",
				"--master", "local[2]", "--conf", "spark.ui.enabled=false", ship, out)

			leaving := ide
			if tt.child {
				leaving = stoppedChild(t, ctx, children, job)
			}
			s := nextStop(t, ctx, leaving, job)
			if s.path != src || s.line != line {
				t.Fatalf("stopped at %s:%d, want the developer's %s:%d", s.path, s.line, src, line)
			}
			if err := tt.leave(ctx, leaving); err != nil {
				t.Fatalf("leaving: %v", err)
			}
			left := time.Now()
			// The square breakpoint is on a line every element of the
			// partition runs: a worker still armed stops at the next one
			// and the stage never ends.
			waitCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
			defer cancel()
			job.wait(t, waitCtx)
			t.Logf("the job finished %v after the IDE left", time.Since(left).Round(100*time.Millisecond))
			if got := readJSON(t, out)["total"]; got != float64(20540) {
				t.Errorf("total = %v, want the plain run's 20540", got)
			}
			if n := strings.Count(p.Log(), "executor stopped with no IDE session"); n != 0 {
				t.Errorf("the worker stopped %d time(s) after the IDE left (the safety net resumed it)", n)
			}
			if tt.child {
				// The root session stayed; it never heard of the stop.
				if n := countEvents(ide, "stopped"); n != 0 {
					t.Errorf("the root session got %d stopped events", n)
				}
			}
		})
	}
}

// stoppedChild takes the child sessions the proxy starts and returns the
// first to show a stop (without taking its stopped event). A worker's
// short-lived forks get child sessions of their own, so the first child
// is not necessarily the worker's.
func stoppedChild(t testing.TB, ctx context.Context, children <-chan dapclient.Child, job *sparkRun) *dapclient.Client {
	t.Helper()
	var kids []*dapclient.Client
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, k := range kids {
			if countEvents(k, "stopped") > 0 {
				return k
			}
		}
		select {
		case ch := <-children:
			if ch.Err != nil {
				t.Logf("a child session failed to start: %v", ch.Err)
				continue
			}
			t.Cleanup(func() { ch.Client.Close() })
			kids = append(kids, ch.Client)
		case <-tick.C:
		case <-job.done:
			t.Fatalf("the job ended (%v) without a stop in any of %d child sessions", job.err, len(kids))
		case <-ctx.Done():
			t.Fatalf("no stop in any of %d child sessions: %v", len(kids), ctx.Err())
		}
	}
}

// TestRefusedBreakpointIsReported: a breakpoint real pydevd will not set
// shows unverified in the IDE with pydevd's reason and what to do about
// it, and `sparkdap paths` lists it under its executor.
func TestRefusedBreakpointIsReported(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	py := python(t)
	out, err := exec.Command(py, "-c", "import json; print(json.__file__)").Output()
	if err != nil {
		t.Fatalf("locating the json module: %v", err)
	}
	stdlib := strings.TrimSpace(string(out))
	for _, tt := range []struct {
		name   string
		path   string
		line   int
		reason string // pydevd's words
		advice string // what sparkdap adds
	}{
		{"file the executor does not have", filepath.Join(t.TempDir(), "gone", "ghost.py"), 3,
			"Breakpoint in file that does not exist.", "sparkdap paths"},
		{"library file under justMyCode", stdlib, 1, "Breakpoint in file excluded by filters.", `"justMyCode": false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t, 90*time.Second)
			p := startProxy(t, ctx, "--root", t.TempDir())
			c := dialIDE(t, ctx, p.IDE)
			attachMerged(t, ctx, c, false)
			gate := filepath.Join(t.TempDir(), "go")
			w := startWorker(t, ctx, p, 1, workerOpts{gate: gate})
			w.waitLine(t, ctx, "CONNECTED")

			// Decoded by hand: go-dap's Breakpoint has no reason field.
			var body struct {
				Breakpoints []struct {
					Verified bool   `json:"verified"`
					Reason   string `json:"reason"`
					Message  string `json:"message"`
				} `json:"breakpoints"`
			}
			if err := c.Call(ctx, "setBreakpoints", map[string]any{"source": map[string]any{"path": tt.path},
				"breakpoints": []any{map[string]any{"line": tt.line}}}, &body); err != nil {
				t.Fatal(err)
			}
			bps := body.Breakpoints
			if len(bps) != 1 {
				t.Fatalf("setBreakpoints answered %+v, want one breakpoint", bps)
			}
			bp := bps[0]
			if bp.Verified || bp.Reason != "failed" || !strings.Contains(bp.Message, tt.reason) ||
				!strings.Contains(bp.Message, tt.advice) {
				t.Errorf("breakpoint %+v: want unverified, reason failed, a message with %q and %q", bp, tt.reason, tt.advice)
			}

			report, err := exec.CommandContext(ctx, sparkdapBinary(t), "paths", "--ide", p.IDE).CombinedOutput()
			if err != nil {
				t.Fatalf("sparkdap paths: %v\n%s", err, report)
			}
			t.Logf("sparkdap paths:\n%s", report)
			want := fmt.Sprintf("breakpoint refused: %s:%d: %s", tt.path, tt.line, tt.reason)
			if !strings.Contains(string(report), want) {
				t.Errorf("sparkdap paths does not list %q:\n%s", want, report)
			}

			// Nothing else is harmed: the worker runs to its result.
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			w.waitSuccess(t, ctx)
		})
	}
}
