//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// captureJob stands in for a driver script whose function runs in an
// executor: it connects to the proxy as a worker does and calls parse on
// each row (the second row breaks it), then a lambda with a closure, as an
// RDD lambda of a driver script.
const captureJob = `import os, sys

def parse(row, scale=10):
    value = int(row["n"])  # BREAKPOINT
    return value * scale


def make(scale):
    return lambda row: (
        int(row["n"]) * scale  # BREAKPOINT: lambda
    )


def main():
    host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import debugpy
    debugpy.connect((host, port), access_token=token)
    for row in ({"n": "1"}, {"n": "x"}):
        try:
            print("RESULT", parse(row), flush=True)
        except ValueError as exc:
            print("FAILED", exc, flush=True)
    print("LAMBDA", make(3)({"n": "7"}), flush=True)


if __name__ == "__main__":
    main()
`

// TestCaptureAndReplay: a real debugpy worker stops in a function; the IDE
// captures the call through the proxy (sparkdapCapture); `sparkdap replay`
// gives what the worker got (the value, then the exception); after the
// local source is fixed, replay returns the fixed value; with --debug a
// DAP client stops in the function with the captured argument. A lambda
// with a closure replays from the local file with the captured closure
// value, and a local fix to it takes effect. Without local source replay
// refuses unless --trust-captured-code. A capture over the size cap is
// refused and says so.
func TestCaptureAndReplay(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	py := python(t)
	ctx := testContext(t, 120*time.Second)
	dir := t.TempDir()
	capDir := filepath.Join(t.TempDir(), "captures")
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte(captureJob), 0o600); err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "")
	lambdaLine := testenv.MarkedLine(t, script, "lambda")
	p := startProxy(t, ctx, "--root", dir, "--capture-dir", capDir)
	c := dialIDE(t, ctx, p.IDE)
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		bps, err := c.SetBreakpoints(ctx, script, line, lambdaLine)
		if err == nil && len(bps) != 2 {
			err = fmt.Errorf("setBreakpoints answered %+v", bps)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, exited := startCaptureWorker(t, py, script, p)

	type captured struct {
		Path     string `json:"path"`
		Bytes    int    `json:"bytes"`
		Function string `json:"function"`
	}
	captureStop := func(extra map[string]any) (captured, int, error) {
		st, err := c.StoppedEvent(ctx)
		if err != nil {
			t.Fatalf("no stop: %v", err)
		}
		frames, err := c.StackTrace(ctx, st.ThreadId)
		if err != nil || len(frames) == 0 {
			t.Fatalf("stackTrace: %v %v", frames, err)
		}
		args := map[string]any{"frameId": frames[0].Id}
		for k, v := range extra {
			args[k] = v
		}
		var got captured
		err = c.Call(ctx, "sparkdapCapture", args, &got)
		return got, st.ThreadId, err
	}

	// First stop: parse({"n": "1"}). A cap too small first, then a capture.
	_, _, err := captureStop(map[string]any{"maxBytes": 50})
	if err == nil || !strings.Contains(err.Error(), "over the cap of 50 bytes") {
		t.Fatalf("capture over the cap: %v, want a refusal naming the cap", err)
	}
	// The refused capture left the thread stopped: capture it again.
	frames := stackOf(t, ctx, c)
	var ok captured
	if err := c.Call(ctx, "sparkdapCapture", map[string]any{"frameId": frames[0].Id}, &ok); err != nil {
		t.Fatalf("capture: %v", err)
	}
	if ok.Function != "parse" || filepath.Dir(ok.Path) != capDir {
		t.Fatalf("capture answered %+v, want parse in %s", ok, capDir)
	}
	checkCaptureFile(t, ok.Path, script)
	if err := c.Continue(ctx, threadOf(t, ctx, c)); err != nil {
		t.Fatal(err)
	}

	// Second stop: parse({"n": "x"}), which raises. Captured the way a
	// user without an extension does: "!capture" in the Debug Console.
	st, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatalf("no stop: %v", err)
	}
	tid := st.ThreadId
	badFrames, err := c.StackTrace(ctx, tid)
	if err != nil || len(badFrames) == 0 {
		t.Fatalf("stackTrace: %v %v", badFrames, err)
	}
	ev, err := c.Evaluate(ctx, badFrames[0].Id, "!capture")
	if err != nil {
		t.Fatalf("!capture in the Debug Console: %v", err)
	}
	bad := captured{Path: consoleCapturePath(t, ev.Result)}
	if !strings.HasPrefix(ev.Result, "captured parse (") || filepath.Dir(bad.Path) != capDir {
		t.Fatalf("!capture answered %q, want parse captured into %s", ev.Result, capDir)
	}
	if err := c.Continue(ctx, tid); err != nil {
		t.Fatal(err)
	}

	// Third stop: the lambda make(3) returned, called with {"n": "7"}.
	lam, tid, err := captureStop(nil)
	if err != nil {
		t.Fatalf("capture of the lambda: %v", err)
	}
	if err := c.Continue(ctx, tid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the worker did not finish")
	}
	if o := out.String(); !strings.Contains(o, "RESULT 10") || !strings.Contains(o, "FAILED invalid literal for int() with base 10: 'x'") ||
		!strings.Contains(o, "LAMBDA 21") {
		t.Fatalf("worker output %q", o)
	}

	if rc, o := replay(t, ctx, ok.Path); rc != 0 || !strings.Contains(o, "returned 10") || !strings.Contains(o, "your local source") {
		t.Errorf("replay of parse({'n': '1'}): status %d, output:\n%s", rc, o)
	}
	if rc, o := replay(t, ctx, bad.Path); rc != 1 || !strings.Contains(o, "raised ValueError: invalid literal for int() with base 10: 'x'") {
		t.Errorf("replay of parse({'n': 'x'}): status %d, output:\n%s", rc, o)
	}
	lambdaFrom := fmt.Sprintf("make.<locals>.<lambda> (a lambda) from %s:%d (your local source)", script, lambdaLine-1)
	if rc, o := replay(t, ctx, lam.Path); rc != 0 || !strings.Contains(o, "returned 21") || !strings.Contains(o, lambdaFrom) {
		t.Errorf("replay of the lambda: status %d, output:\n%s", rc, o)
	}

	// The developer fixes parse locally: replay runs the fix.
	fixed := strings.Replace(captureJob, `value = int(row["n"])  # BREAKPOINT`, `value = int(row["n"]) if row["n"].isdigit() else -1  # BREAKPOINT`, 1)
	fixed = strings.Replace(fixed, `int(row["n"]) * scale  # BREAKPOINT: lambda`, `int(row["n"]) * scale + 1  # BREAKPOINT: lambda`, 1)
	if err := os.WriteFile(script, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, o := replay(t, ctx, bad.Path); rc != 0 || !strings.Contains(o, "returned -10") {
		t.Errorf("replay after the fix: status %d, output:\n%s", rc, o)
	}
	// The lambda's fix takes effect, with the captured closure value 3.
	if rc, o := replay(t, ctx, lam.Path); rc != 0 || !strings.Contains(o, "returned 22") {
		t.Errorf("replay of the lambda after the fix: status %d, output:\n%s", rc, o)
	}

	// Without local source replay refuses to run the function the cluster
	// pickled, unless trusted.
	unmapped := withoutLocalFile(t, bad.Path)
	if rc, o := replay(t, ctx, unmapped); rc != 2 || !strings.Contains(o, "no local source for parse") || !strings.Contains(o, "--trust-captured-code") {
		t.Errorf("replay without local source: status %d, output:\n%s", rc, o)
	}
	if rc, o := replay(t, ctx, unmapped, "--trust-captured-code"); rc != 1 || !strings.Contains(o, "using the captured parse") ||
		!strings.Contains(o, "raised ValueError: invalid literal for int() with base 10: 'x'") {
		t.Errorf("replay --trust-captured-code: status %d, output:\n%s", rc, o)
	}

	// --debug: an IDE attaches and stops in parse with the captured row.
	debugReplay(t, ctx, bad.Path, script, line)
}

// consoleCapturePath is the capture file a Debug Console !capture answer

// startCaptureWorker runs script, a real debugpy worker that connects to
// proxy p's executor port with its token, until the test ends (its output
// is logged if the test fails). It returns the worker's output so far and
// a channel closed when it exits.
func startCaptureWorker(t testing.TB, py, script string, p *proxy) (*syncbuf.Buffer, <-chan struct{}) {
	t.Helper()
	host, port, err := splitHostPort(p.Executors)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-X", "frozen_modules=off", script, host, port, p.Token)
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("worker output:\n%s", out.String())
		}
	})
	return out, exited
}

// names in its replay command.
func consoleCapturePath(t testing.TB, result string) string {
	t.Helper()
	_, path, ok := strings.Cut(result, "replay: sparkdap replay ")
	path, _, _ = strings.Cut(path, "\n") // notes follow
	if !ok || path == "" {
		t.Fatalf("!capture answered %q, without the replay command", result)
	}
	return path
}

func stackOf(t testing.TB, ctx context.Context, c *dapclient.Client) []dapFrame {
	t.Helper()
	frames, err := c.StackTrace(ctx, threadOf(t, ctx, c))
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	out := make([]dapFrame, len(frames))
	for i, f := range frames {
		out[i] = dapFrame{Id: f.Id}
	}
	return out
}

type dapFrame struct{ Id int }

// threadOf is the thread of the last stop.
func threadOf(t testing.TB, ctx context.Context, c *dapclient.Client) int {
	t.Helper()
	var tid int
	for _, ev := range c.Events() {
		if ev.Event != "stopped" {
			continue
		}
		var b struct {
			ThreadId int `json:"threadId"`
		}
		if err := json.Unmarshal(ev.Body, &b); err == nil {
			tid = b.ThreadId
		}
	}
	if tid == 0 {
		t.Fatal("no stopped event seen")
	}
	return tid
}

// checkCaptureFile: the file is the user's only (0600), says what it
// holds, and names the local source.
func checkCaptureFile(t testing.TB, path, local string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("capture file mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Format, Contains, LocalFile, Data, Code string
		Parameters                              []string
		Versions                                map[string]string
		References                              map[string]string
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Format != "sparkdap-capture/3" || !strings.Contains(doc.Contains, "the arguments of the function parse") ||
		!strings.Contains(doc.Contains, "only with --trust-captured-code") ||
		doc.LocalFile != local || doc.Data == "" || doc.Code == "" || strings.Join(doc.Parameters, ",") != "row,scale" || doc.Versions["python"] == "" {
		t.Errorf("capture file: %+v", doc)
	}
}

// withoutLocalFile copies a capture file with its localFile cleared, as
// one whose executor path is not mapped.
func withoutLocalFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["localFile"] = ""
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "unmapped.json")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// replay runs `sparkdap replay` and returns its exit status and output.
func replay(t testing.TB, ctx context.Context, capture string, extra ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, sparkdapBinary(t), append(append([]string{"replay", "--python", python(t)}, extra...), capture)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("sparkdap replay: %v", err)
	}
	return 0, out.String()
}

func debugReplay(t testing.TB, ctx context.Context, capture, script string, line int) {
	t.Helper()
	debugReplayCheck(t, ctx, capture, script, line, "parse", map[string]string{"row": "{'n': 'x'}"}, `returned -10`)
}

// debugReplayCheck runs `sparkdap replay --debug` on capture and attaches
// a DAP client with a breakpoint at script:line: it must stop there in
// function fn, where want holds (a bare name: its value in the frame's
// variables; anything else: what it evaluates to), and after continue the
// replay's output must match returned (a regular expression).
func debugReplayCheck(t testing.TB, ctx context.Context, capture, script string, line int, fn string, want map[string]string, returned string) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
	cmd := exec.CommandContext(ctx, sparkdapBinary(t), "replay", "--python", python(t), "--debug", addr, capture)
	c, done, out, end := attachReplayDebug(t, ctx, cmd, addr, script, line)
	defer end()
	// The stop, unless the replay ends first (it ran code the breakpoint
	// is not in).
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan *godap.StoppedEventBody, 1)
	go func() {
		st, _ := c.StoppedEvent(stopCtx)
		stopped <- st
	}()
	var st *godap.StoppedEventBody
	select {
	case st = <-stopped:
		if st == nil {
			t.Fatalf("replay --debug never stopped at %s:%d", script, line)
		}
	case err := <-done:
		done <- err
		t.Fatalf("replay --debug ended (%v) without stopping at %s:%d", err, script, line)
	}
	frames, err := c.StackTrace(ctx, st.ThreadId)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	if frames[0].Name != fn || frames[0].Line != line || frames[0].Source == nil || frames[0].Source.Path != script {
		t.Errorf("stopped in %s at %+v line %d, want %s at %s:%d", frames[0].Name, frames[0].Source, frames[0].Line, fn, script, line)
	}
	scopes, err := c.Scopes(ctx, frames[0].Id)
	if err != nil || len(scopes) == 0 {
		t.Fatalf("scopes: %v %v", scopes, err)
	}
	vars, err := c.Variables(ctx, scopes[0].VariablesReference)
	if err != nil {
		t.Fatal(err)
	}
	for expr, w := range want {
		got, how := "", "variable"
		if identRE.MatchString(expr) {
			for _, v := range vars {
				if v.Name == expr {
					got = v.Value
				}
			}
		} else {
			how = "evaluated"
			ev, err := c.Evaluate(ctx, frames[0].Id, expr)
			if err != nil {
				t.Errorf("evaluate %s in the replayed frame: %v", expr, err)
				continue
			}
			got = ev.Result
		}
		if got != w {
			t.Errorf("%s %s in the replayed frame = %q, want %q (locals %+v)", how, expr, got, w, vars)
		}
	}
	if err := c.Continue(ctx, st.ThreadId); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil || !regexp.MustCompile(returned).MatchString(out.String()) {
			t.Errorf("replay --debug ended with %v, output:\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatal("replay --debug did not finish after continue")
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// attachReplayDebug starts cmd (a `sparkdap replay --debug addr …`)
// with its output in a file (not a pipe: debugpy's adapter process
// inherits the output and outlives the replay, and Wait would wait for it
// to close a pipe), then attaches a justMyCode DAP client to addr with a
// breakpoint at script:line. done gets cmd's end; end closes the client,
// kills the replay and, if the test failed, logs its output.
func attachReplayDebug(t testing.TB, ctx context.Context, cmd *exec.Cmd, addr, script string, line int) (c *dapclient.Client, done chan error, out fileText, end func()) {
	t.Helper()
	outPath := filepath.Join(t.TempDir(), "replay.out")
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	out = fileText(outPath)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
		f.Close()
		if t.Failed() {
			t.Logf("replay --debug output:\n%s", out.String())
		}
	}
	for i := 0; c == nil; i++ {
		select {
		case err := <-done:
			// Ended before it listened: what it printed says why.
			done <- err
			stop()
			t.Fatalf("replay --debug exited (%v) before it listened", err)
		default:
		}
		if strings.Contains(out.String(), "waiting for a debugger") {
			if c, err = dapclient.Dial(ctx, addr); err != nil && i > 100 {
				stop()
				t.Fatalf("dial replay's debugpy: %v", err)
			}
		}
		if i == 600 {
			stop()
			t.Fatal("replay --debug never listened")
		}
		if c == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	end = func() { c.Close(); stop() }
	if _, err := c.Initialize(ctx, false); err != nil {
		end()
		t.Fatal(err)
	}
	if err := c.Attach(ctx, map[string]any{"justMyCode": true}, func(ctx context.Context) error {
		_, err := c.SetBreakpoints(ctx, script, line)
		return err
	}); err != nil {
		end()
		t.Fatal(err)
	}
	return c, done, out, end
}

// fileText reads a file that is being written, as a syncbuf.Buffer would.
type fileText string

func (f fileText) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

// TestCaptureCLI: `sparkdap capture` against a running proxy lists the
// real debugpy worker stopped in parse (its frame of user code marked),
// captures it by executor id with no IDE request (the proxy asks pydevd
// for the stack itself), and `sparkdap replay` of the file it names gives
// the worker's result. Unknown executors and a proxy that is not running
// are clear errors.
func TestCaptureCLI(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	py := python(t)
	ctx := testContext(t, 120*time.Second)
	dir := t.TempDir()
	capDir := filepath.Join(t.TempDir(), "captures")
	sockDir := testenv.SocketDir(t)
	control := filepath.Join(sockDir, "run", "c.sock")
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte(captureJob), 0o600); err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "")
	sparkdap := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, sparkdapBinary(t), append([]string{"capture", "--control", control}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatalf("sparkdap capture: %v", err)
		}
		return 0, out.String()
	}
	if rc, o := sparkdap(); rc != 1 || !strings.Contains(o, "no sparkdap serve is running for --control "+control) {
		t.Fatalf("capture without a proxy: status %d, output %q", rc, o)
	}

	p := startProxy(t, ctx, "--root", dir, "--capture-dir", capDir, "--control", control)
	if fi, err := os.Lstat(control); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %s: %v %v, want a socket with mode 0600", control, fi, err)
	}
	if !strings.Contains(p.Log(), "control socket "+control) {
		t.Errorf("serve did not print its control socket:\n%s", p.Log())
	}
	c := dialIDE(t, ctx, p.IDE)
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		return setWorkerBreakpoint(ctx, c, script, line)
	}); err != nil {
		t.Fatal(err)
	}
	if rc, o := sparkdap(); rc != 1 || !strings.Contains(o, "no worker is stopped") {
		t.Fatalf("capture before any stop: status %d, output %q", rc, o)
	}
	_, exited := startCaptureWorker(t, py, script, p)
	st, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatalf("no stop: %v", err)
	}

	rc, list := sparkdap()
	want := fmt.Sprintf("=> #0 parse  %s:%d", script, line)
	if rc != 0 || !strings.Contains(list, want) || !strings.Contains(list, "capture one: sparkdap capture --executor ") {
		t.Fatalf("capture list: status %d, output:\n%s\nwant a line %q", rc, list, want)
	}
	var exe string
	if _, rest, ok := strings.Cut(list, "executor "); ok {
		exe, _, _ = strings.Cut(rest, " ")
	}
	if rc, o := sparkdap("--executor", "999"); rc != 1 || !strings.Contains(o, "--executor: executor 999: no executor session with that id") {
		t.Fatalf("capture of an unknown executor: status %d, output %q", rc, o)
	}
	rc, o := sparkdap("--executor", exe)
	_, path, _ := strings.Cut(o, "replay: sparkdap replay ")
	path = strings.TrimSpace(strings.SplitN(path, "\n", 2)[0])
	if rc != 0 || !strings.HasPrefix(o, "captured parse (") || filepath.Dir(path) != capDir {
		t.Fatalf("capture --executor %s: status %d, output:\n%s", exe, rc, o)
	}
	checkCaptureFile(t, path, script)

	// The IDE's session is untouched: the thread is still stopped there.
	if frames, err := c.StackTrace(ctx, st.ThreadId); err != nil || len(frames) == 0 || frames[0].Line != line {
		t.Fatalf("IDE stackTrace after the CLI capture: %v %v", frames, err)
	}
	for i := 0; i < 2; i++ {
		if i > 0 {
			if st, err = c.StoppedEvent(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Continue(ctx, st.ThreadId); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the worker did not finish")
	}
	if rc, o := replay(t, ctx, path); rc != 0 || !strings.Contains(o, "returned 10") {
		t.Errorf("replay of the CLI's capture: status %d, output:\n%s", rc, o)
	}
}

// unsupportedJob stops in a function whose argument is an instance of the
// driver script's own class: a value the capture's data cannot hold.
const unsupportedJob = `import sys


class Config:
    def __init__(self, rate):
        self.rate = rate


def apply(x, cfg):
    return x * cfg.rate  # BREAKPOINT


def main():
    host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import debugpy
    debugpy.connect((host, port), access_token=token)
    print("RESULT", apply(2, Config(5)), flush=True)


if __name__ == "__main__":
    main()
`

// TestCaptureNamesUnsupportedValue: "!capture" of a call whose argument
// is of a type the capture's data cannot hold (an instance of the
// script's own class) answers, in the Debug Console, which argument it is,
// its type, and that replaying it takes --trust-captured-code; replay
// without the flag refuses with exit 2 naming it, and with the flag runs
// the call.
func TestCaptureNamesUnsupportedValue(t *testing.T) {
	testenv.SkipIfShort(t, "runs a real debugpy worker")
	py := python(t)
	ctx := testContext(t, 120*time.Second)
	dir := t.TempDir()
	capDir := filepath.Join(t.TempDir(), "captures")
	script := filepath.Join(dir, "job.py")
	if err := os.WriteFile(script, []byte(unsupportedJob), 0o600); err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, script, "")
	p := startProxy(t, ctx, "--root", dir, "--capture-dir", capDir)
	c := dialIDE(t, ctx, p.IDE)
	if _, err := c.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(ctx, map[string]any{}, func(ctx context.Context) error {
		_, err := c.SetBreakpoints(ctx, script, line)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, exited := startCaptureWorker(t, py, script, p)
	st, err := c.StoppedEvent(ctx)
	if err != nil {
		t.Fatalf("no stop: %v", err)
	}
	frames, err := c.StackTrace(ctx, st.ThreadId)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	ev, err := c.Evaluate(ctx, frames[0].Id, "!capture")
	if err != nil {
		t.Fatalf("!capture in the Debug Console: %v", err)
	}
	note := "\nnote: argument 'cfg' is a __main__.Config: the capture carries it only pickled, and replay unpickles nothing from " +
		"the cluster unless you pass --trust-captured-code"
	if !strings.HasPrefix(ev.Result, "captured apply (") || !strings.Contains(ev.Result, note) {
		t.Fatalf("!capture answered %q, want the capture and a note naming the argument, its type and --trust-captured-code", ev.Result)
	}
	path := consoleCapturePath(t, ev.Result)
	if err := c.Continue(ctx, st.ThreadId); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the worker did not finish")
	}
	if !strings.Contains(out.String(), "RESULT 10") {
		t.Fatalf("worker output %q", out.String())
	}
	if rc, o := replay(t, ctx, path); rc != 2 || !strings.Contains(o, "argument 'cfg' is a __main__.Config, which the capture carries only pickled") {
		t.Errorf("replay without --trust-captured-code: status %d, want 2 naming the argument; output:\n%s", rc, o)
	}
	if rc, o := replay(t, ctx, path, "--trust-captured-code"); rc != 0 || !strings.Contains(o, "returned 10") || !strings.Contains(o, "your local source") {
		t.Errorf("replay --trust-captured-code: status %d, output:\n%s", rc, o)
	}
}
