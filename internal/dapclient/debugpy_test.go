package dapclient

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// These tests check the client against debugpy's real adapter, so that a
// failure in the proxy's integration tests can be blamed on the proxy.

func requireDebugpy(t *testing.T) string {
	t.Helper()
	return testenv.Python(t, "debugpy")
}

type debuggee struct {
	cmd    *exec.Cmd
	port   int
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
	waited chan error
}

// startDebuggee runs testdata/debuggee.py and waits for its listening port.
func startDebuggee(t *testing.T, ctx context.Context, py, script string, args ...string) *debuggee {
	t.Helper()
	cmd := exec.Command(py, append([]string{script}, args...)...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &debuggee{cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, waited: make(chan error, 1)}
	cmd.Stdout = pw
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() { d.waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.waited
		pr.Close()
		if t.Failed() {
			t.Logf("debuggee stdout:\n%s\ndebuggee stderr:\n%s", d.stdout, d.stderr)
		}
	})

	portc := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(d.stdout, line)
			if p, ok := strings.CutPrefix(line, "LISTENING "); ok {
				if n, err := strconv.Atoi(p); err == nil {
					portc <- n
				}
			}
		}
	}()
	select {
	case d.port = <-portc:
	case err := <-d.waited:
		t.Fatalf("debuggee exited before listening: %v\nstderr: %s", err, d.stderr)
	case <-ctx.Done():
		t.Fatalf("debuggee did not print LISTENING: %v\nstderr: %s", ctx.Err(), d.stderr)
	}
	return d
}

func (d *debuggee) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case err := <-d.waited:
		d.waited <- err
		if err != nil {
			t.Fatalf("debuggee failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("debuggee did not exit: %v", ctx.Err())
	}
}

// inspectStop checks a stop at the breakpoint: the top frame, the local
// "value" as seen through scopes/variables and through evaluate.
func inspectStop(t *testing.T, ctx context.Context, c *Client, threadID int, script string, line int, wantValues ...string) string {
	t.Helper()
	frames, err := c.StackTrace(ctx, threadID)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) == 0 {
		t.Fatal("empty stack trace")
	}
	top := frames[0]
	if top.Source == nil || top.Source.Path != script || top.Line != line {
		t.Fatalf("top frame %+v (source %+v), want %s:%d", top, top.Source, script, line)
	}
	scopes, err := c.Scopes(ctx, top.Id)
	if err != nil {
		t.Fatal(err)
	}
	var locals *dap.Scope
	for i := range scopes {
		if scopes[i].Name == "Locals" {
			locals = &scopes[i]
		}
	}
	if locals == nil {
		t.Fatalf("no Locals scope in %+v", scopes)
	}
	vars, err := c.Variables(ctx, locals.VariablesReference)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, v := range vars {
		if v.Name == "value" {
			got = v.Value
		}
	}
	ev, err := c.Evaluate(ctx, top.Id, "value")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Result != got {
		t.Fatalf("evaluate value = %q, variables say %q", ev.Result, got)
	}
	for _, w := range wantValues {
		if got == w {
			return got
		}
	}
	t.Fatalf("value = %q, want one of %q", got, wantValues)
	return ""
}

func TestAgainstDebugpyAdapter(t *testing.T) {
	testenv.SkipIfShort(t, "starts a real debugpy adapter")
	py := requireDebugpy(t)
	ctx := testCtx(t, 60*time.Second)
	script, err := filepath.Abs("testdata/debuggee.py")
	if err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "")
	d := startDebuggee(t, ctx, py, script, "parent")

	c, err := Dial(ctx, fmt.Sprintf("127.0.0.1:%d", d.port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	attach := map[string]any{"connect": map[string]any{"host": "127.0.0.1", "port": d.port}, "justMyCode": true}
	err = c.Attach(ctx, attach, func(ctx context.Context) error {
		bps, err := c.SetBreakpoints(ctx, script, line)
		if err == nil && (len(bps) != 1 || !bps[0].Verified) {
			err = fmt.Errorf("breakpoint not verified: %+v", bps)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// compute(i) for i = 0, 1, 2 gives value 1000, 1007, 1014.
	for i := range 3 {
		stopped, err := c.StoppedEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stopped.Reason != "breakpoint" {
			t.Fatalf("stopped reason %q", stopped.Reason)
		}
		threads, err := c.Threads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(threads) == 0 {
			t.Fatal("no threads")
		}
		inspectStop(t, ctx, c, stopped.ThreadId, script, line, strconv.Itoa(1000+7*i))
		if err := c.Continue(ctx, stopped.ThreadId); err != nil {
			t.Fatal(err)
		}
	}
	// debugpy keeps the debuggee alive at exit until the client lets go.
	if _, err := c.WaitEvent(ctx, "terminated", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Disconnect(ctx, false); err != nil {
		t.Fatal(err)
	}
	d.wait(t, ctx)
	if !strings.Contains(d.stdout.String(), "RESULT parent") {
		t.Fatalf("no result line in %q", d.stdout)
	}
}

// TestFollowChildrenAgainstDebugpy checks the startDebugging path against
// debugpy: its adapter reports the debuggee's subprocess that way when the
// client's initialize says supportsStartDebuggingRequest.
func TestFollowChildrenAgainstDebugpy(t *testing.T) {
	testenv.SkipIfShort(t, "starts real debugpy processes")
	py := requireDebugpy(t)
	ctx := testCtx(t, 60*time.Second)
	script, err := filepath.Abs("testdata/debuggee.py")
	if err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "")
	d := startDebuggee(t, ctx, py, script, "parent", "spawn")

	root, err := Dial(ctx, fmt.Sprintf("127.0.0.1:%d", d.port))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	children := root.FollowChildren(ctx, func(ctx context.Context, child *Client) error {
		_, err := child.SetBreakpoints(ctx, script, line)
		return err
	})
	if _, err := root.Initialize(ctx, true); err != nil {
		t.Fatal(err)
	}
	// No breakpoint in the parent: it runs straight to the spawn.
	if err := root.Attach(ctx, map[string]any{"connect": map[string]any{"host": "127.0.0.1", "port": d.port}}, nil); err != nil {
		t.Fatal(err)
	}

	var ch Child
	select {
	case ch = <-children:
	case <-ctx.Done():
		t.Fatalf("no startDebugging for the subprocess: %v", ctx.Err())
	}
	if ch.Err != nil {
		t.Fatalf("following child: %v", ch.Err)
	}
	child := ch.Client
	defer child.Close()
	if !strings.Contains(string(ch.Config.Configuration), "subProcessId") {
		t.Fatalf("child configuration lacks subProcessId: %s", ch.Config.Configuration)
	}
	for i := range 3 {
		stopped, err := child.StoppedEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inspectStop(t, ctx, child, stopped.ThreadId, script, line, strconv.Itoa(1000+11*i))
		if err := child.Continue(ctx, stopped.ThreadId); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*Client{child, root} {
		if _, err := c.WaitEvent(ctx, "terminated", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Disconnect(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	d.wait(t, ctx)
	out := d.stdout.String()
	if !strings.Contains(out, "RESULT child") || !strings.Contains(out, "RESULT parent") {
		t.Fatalf("missing result lines in %q", out)
	}
}
