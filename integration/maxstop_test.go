//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestSparkMaxStopWithStderrStalled: a real local-mode Spark worker stops
// at a breakpoint under `serve --max-stop 20s` whose stderr is a pipe
// nobody reads, full before serve starts (`serve 2>&1 | less` left
// unscrolled). serve still comes up and serves the IDE: DAP round trips to
// the stopped worker complete. Then the IDE sits idle: 20 s on, the proxy
// resumes the worker and tells the IDE (a console line, the thread's
// continued), and the job finishes with the plain run's result within the
// limit, the job's own time and some slack. Once stderr is read again, it
// says how many lines it dropped.
func TestSparkMaxStopWithStderrStalled(t *testing.T) {
	requireSpark(t)
	const maxStop = 20 * time.Second
	ctx := testContext(t, 5*time.Minute)
	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "job", "per_partition.py")
	ship := filepath.Join(root, "deploy", "job", "per_partition.py")
	copyFile(t, filepath.Join("testdata", "per_partition.py"), src)
	copyFile(t, filepath.Join("testdata", "per_partition.py"), ship)
	line := testenv.MarkedLine(t, src, "partition")

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	fillPipe(t, pw)
	p := startProxyTo(t, ctx, pw, "--root", filepath.Dir(src), "--max-stop", maxStop.String())
	pw.Close() // serve holds its copy

	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
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

	// Round trips to the stopped worker while stderr is full: threads,
	// stackTrace, scopes, variables, then an evaluate.
	s := nextStop(t, ctx, ide, job)
	stopped := time.Now()
	if s.path != src || s.line != line {
		t.Fatalf("stopped at %s:%d, want %s:%d", s.path, s.line, src, line)
	}
	if ev, err := ide.Evaluate(ctx, s.frameID, "len(items)"); err != nil || ev.Result != "10" {
		t.Fatalf("evaluate len(items) = %+v, %v; want 10", ev, err)
	}

	// Idle from here: the proxy resumes the worker once maxStop passed.
	outEv, err := ide.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		return strings.Contains(string(b), "resumed: stopped") && strings.Contains(string(b), "--max-stop")
	})
	if err != nil {
		t.Fatalf("no max-stop line in the IDE: %v", err)
	}
	t.Logf("the IDE was told %v after the stop: %s", time.Since(stopped).Round(100*time.Millisecond), outEv.Body)
	if _, err := ide.WaitEvent(ctx, "continued", func(b json.RawMessage) bool {
		var cb struct{ ThreadID int }
		return json.Unmarshal(b, &cb) == nil && cb.ThreadID == s.threadID
	}); err != nil {
		t.Fatalf("no continued for the stopped thread: %v", err)
	}
	// The job's own time here is seconds; the slack is for a busy machine.
	waitCtx, cancel := context.WithDeadline(ctx, stopped.Add(maxStop+120*time.Second))
	defer cancel()
	job.wait(t, waitCtx)
	t.Logf("the job finished %v after the stop", time.Since(stopped).Round(100*time.Millisecond))
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want the plain run's 20540", got)
	}
	if n := countEvents(ide, "stopped"); n != 1 {
		t.Errorf("%d stopped events, want the one", n)
	}

	// stderr read again, serve stopped: what was kept arrives, with a
	// count of what was not if anything was dropped.
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- b
	}()
	p.Stop()
	var log string
	select {
	case b := <-got:
		log = string(b)
	case <-ctx.Done():
		t.Fatal("reading serve's stderr: ", ctx.Err())
	}
	dropped := strings.Contains(log, "log line(s) dropped: stderr was not being read]")
	t.Logf("serve's stderr: %d bytes, filler included; dropped lines: %v", len(log), dropped)
	if !strings.Contains(log, "sparkdap: IDE port") || (!dropped && !strings.Contains(log, "resumed: stopped")) {
		t.Errorf("serve's stderr lost lines without saying so; it ends:\n%s", tail(log, 4<<10))
	}
}

// fillPipe writes filler lines to w until the pipe's buffer is full.
func fillPipe(t testing.TB, w *os.File) {
	t.Helper()
	line := []byte(strings.Repeat("filler ", 15) + "\n")
	for range 1 << 16 { // a pipe's buffer is at most 1 MiB by default
		if err := w.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(line); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				_ = w.SetWriteDeadline(time.Time{})
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the pipe never filled")
}

// TestPyCharmSparkMaxStop: in PyCharm mode, a real worker stopped under
// `serve --max-stop 15s` with PyCharm attached and idle is resumed: the
// console says which worker and why, PyCharm hears its thread run, and the
// job finishes with the plain run's result.
func TestPyCharmSparkMaxStop(t *testing.T) {
	const maxStop = 15 * time.Second
	ctx := testContext(t, 5*time.Minute)
	j := startPyCharmScriptServe(t, ctx, "local[2]", "1", "pcjob.py", "--max-stop", maxStop.String())
	// Partition 1 holds 20..39: one stop, at 20.
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale",
		Condition: "x == 20"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	th := j.nextSuspend(t, ctx)
	stopped := time.Now()
	if _, err := j.ide.Request(ctx, pycharm.CmdGetFrame, th.ID, th.Frames[0].ID, "FRAME", "0"); err != nil {
		t.Fatalf("get frame: %v", err)
	}
	waitCtx, cancel := context.WithDeadline(ctx, stopped.Add(maxStop+2*time.Minute))
	defer cancel()
	out, err := j.ide.WaitFor(waitCtx, func(m pycharm.Message) bool {
		return m.ID == pycharm.CmdWriteToConsole && strings.Contains(pycharm.PyUnquote(pycharm.PyUnquote(m.Payload)), "--max-stop")
	})
	if err != nil {
		t.Fatalf("no max-stop line in PyCharm's console: %v", err)
	}
	t.Logf("PyCharm was told %v after the stop: %s", time.Since(stopped).Round(100*time.Millisecond),
		pycharm.PyUnquote(pycharm.PyUnquote(out.Payload)))
	if _, err := j.ide.WaitFor(waitCtx, func(m pycharm.Message) bool {
		id, _, _ := strings.Cut(pycharm.PyUnquote(m.Payload), "\t")
		return m.ID == pycharm.CmdThreadRun && id == th.ID
	}); err != nil {
		t.Fatalf("PyCharm never heard %s run: %v", th.ID, err)
	}
	j.finish(t, waitCtx)
	t.Logf("the job finished %v after the stop", time.Since(stopped).Round(100*time.Millisecond))
	if !strings.Contains(j.serveErr.String(), "resumed: stopped") {
		t.Errorf("serve's terminal never said it resumed the worker")
	}
}
