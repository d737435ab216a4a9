package dap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// fakeCaptures makes the fake pydevd answer the capture code's evaluates
// (capture.go) as the real capture code does for a function named
// compute whose data is payload; it counts the starts.
func fakeCaptures(f *fakePydevd, payload string) *int {
	starts := new(int)
	f.SetTamper(func(req fakepydevd.Message, resp map[string]any) {
		if req.Command != "evaluate" {
			return
		}
		expr, _ := req.Arguments["expression"].(string)
		var ans any
		switch {
		case strings.Contains(expr, ".start("):
			*starts++
			ans = map[string]any{"id": 1, "chunks": 1, "header": map[string]any{
				"function":     map[string]any{"name": "compute", "file": "/job/udf.py"},
				"payloadBytes": len(payload), "dataBytes": len(payload), "codeBytes": 0, "pickler": "cloudpickle"}}
		case strings.Contains(expr, ".chunk("):
			resp["success"], resp["body"] = true, map[string]any{"result": "'" + base64.StdEncoding.EncodeToString([]byte(payload)) + "'"}
			return
		case strings.Contains(expr, ".drop("):
			ans = nil
		default:
			return
		}
		b, _ := json.Marshal(ans)
		resp["success"], resp["body"] = true, map[string]any{"result": "'" + base64.StdEncoding.EncodeToString(b) + "'"}
	})
	return starts
}

// TestConsoleCommands: Debug Console lines starting with "!" are the
// proxy's: !help lists the commands, !capture captures the selected frame
// and says where the file is and how to replay it, and none of them
// reaches pydevd as Python; a plain expression still does.
func TestConsoleCommands(t *testing.T) {
	capDir := filepath.Join(t.TempDir(), "captures")
	p := startProxy(t, func(c *Config) { c.CaptureDir = capDir })
	c := p.ide(false, nil)
	ctx := p.ctx
	f := p.executor(101, nil)
	starts := fakeCaptures(f, `[1,22]`)
	f.stop()
	tid := stoppedOn(ctx, t, c)
	frames, err := c.StackTrace(ctx, tid)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	fid := frames[0].Id

	ev, err := c.Evaluate(ctx, fid, "!help")
	if err != nil || !strings.Contains(ev.Result, "!capture maxBytes=N") {
		t.Fatalf("!help: %v %v", ev, err)
	}
	ev, err = c.Evaluate(ctx, fid, "  !capture ")
	if err != nil {
		t.Fatalf("!capture: %v", err)
	}
	j := strings.Index(ev.Result, " bytes) — replay: ")
	i := strings.LastIndex(ev.Result[:max(j, 0)], " to ")
	if i < 0 || j < 0 {
		t.Fatalf("!capture answered %q, want the path and size", ev.Result)
	}
	path, size, _ := strings.Cut(ev.Result[i+len(" to "):j], " (")
	if !strings.HasPrefix(ev.Result, "captured compute (") || !strings.Contains(ev.Result, " bytes) — replay: sparkdap replay "+path) {
		t.Fatalf("!capture answered %q", ev.Result)
	}
	// The size given is the file's, as ls shows it beside the name.
	if fi, err := os.Stat(path); err != nil || size != fmt.Sprint(fi.Size()) {
		t.Fatalf("!capture says %s bytes; the file: %v %v", size, fi, err)
	}
	if filepath.Dir(path) != capDir {
		t.Fatalf("capture written to %s, want it in %s", path, capDir)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte(`[1,22]`))) {
		t.Fatalf("capture file: %v %s", err, b)
	}
	if *starts != 1 {
		t.Fatalf("%d captures started, want 1", *starts)
	}
	// Python still gets everything else.
	if ev, err := c.Evaluate(ctx, fid, "pid"); err != nil || ev.Result != "101" {
		t.Fatalf("evaluate pid: %v %v", ev, err)
	}
	for _, r := range f.Recorded() {
		if e, _ := r.Arguments["expression"].(string); r.Command == "evaluate" && strings.HasPrefix(strings.TrimSpace(e), "!") {
			t.Errorf("pydevd was sent the console command %q", e)
		}
	}
}

// TestConsoleCommandErrors: each wrong use is a failed evaluate that says
// what to do, and sends pydevd nothing.
func TestConsoleCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		noFrame    bool
		noDir      bool
		want       string
	}{
		{name: "no frame", expr: "!capture", noFrame: true, want: "select a stopped frame first"},
		{name: "unknown command", expr: "!captur", want: "!captur is not a sparkdap command; !help lists them"},
		{name: "unknown argument", expr: "!capture max=3", want: `unknown argument "max=3": the only one is maxBytes=N`},
		{name: "bad size", expr: "!capture maxBytes=-1", want: "maxBytes=-1: want a positive number of bytes"},
		{name: "capture disabled", expr: "!capture", noDir: true, want: "this proxy has no capture directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, func(c *Config) {
				if !tc.noDir {
					c.CaptureDir = t.TempDir()
				}
			})
			c := p.ide(false, nil)
			ctx := p.ctx
			f := p.executor(101, nil)
			f.stop()
			tid := stoppedOn(ctx, t, c)
			frames, err := c.StackTrace(ctx, tid)
			if err != nil || len(frames) == 0 {
				t.Fatalf("stackTrace: %v %v", frames, err)
			}
			fid := frames[0].Id
			if tc.noFrame {
				fid = 0
			}
			ev, err := c.Evaluate(ctx, fid, tc.expr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: answered %v, error %v; want an error containing %q", tc.expr, ev, err, tc.want)
			}
			if n := f.Count("evaluate"); n != 0 {
				t.Errorf("pydevd was sent %d evaluates", n)
			}
		})
	}
}

// TestCaptureSummary: the console's line shows what the executor named
// without its control characters, and a replay command that pastes into
// a shell as is.
func TestCaptureSummary(t *testing.T) {
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"path": "/c/parse-e1.json", "function": "parse", "task": "exec 1 · pid 7", "bytes": 12},
			"captured parse (exec 1 · pid 7) to /c/parse-e1.json (12 bytes) — replay: sparkdap replay /c/parse-e1.json"},
		{map[string]any{"path": "/my caps/it's.json", "function": "f\x1b]0;pwned\x07", "bytes": 1},
			`captured f�]0;pwned� to /my caps/it's.json (1 bytes) — replay: sparkdap replay '/my caps/it'\''s.json'`},
		// The executor's notes, one line each, cleaned like the name.
		{map[string]any{"path": "/c/f.json", "function": "f", "bytes": 3, "notes": []any{
			"argument 'cfg' is a job.Config: the capture carries it only pickled, and replay unpickles nothing from the cluster unless you pass --trust-captured-code",
			"global 'x\x1b[2J' left out\nnote: forged"}},
			"captured f to /c/f.json (3 bytes) — replay: sparkdap replay /c/f.json\n" +
				"note: argument 'cfg' is a job.Config: the capture carries it only pickled, and replay unpickles nothing from the cluster unless you pass --trust-captured-code\n" +
				"note: global 'x�[2J' left out note: forged"},
	} {
		if got := captureSummary(tc.body); got != tc.want {
			t.Errorf("captureSummary(%v)\n got %q\nwant %q", tc.body, got, tc.want)
		}
	}
}

// TestConsoleCaptureInChildSession: with child sessions (VS Code), the
// Debug Console of an executor's child session captures that executor's
// frame; the root session, which shows no frames, cannot capture one.
func TestConsoleCaptureInChildSession(t *testing.T) {
	capDir := t.TempDir()
	p := startProxy(t, func(c *Config) { c.CaptureDir = capDir })
	root, err := dapclient.Dial(p.ctx, p.srv.IDEAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	children := root.FollowChildren(p.ctx, nil)
	if _, err := root.Initialize(p.ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := root.Attach(p.ctx, map[string]any{"type": "debugpy", "request": "attach"}, nil); err != nil {
		t.Fatal(err)
	}
	f := p.executor(42, nil)
	fakeCaptures(f, `{"a":1}`)
	f.stop() // listed once it stops
	var child dapclient.Child
	select {
	case child = <-children:
	case <-p.ctx.Done():
		t.Fatal("no child session was started")
	}
	if child.Err != nil {
		t.Fatal(child.Err)
	}
	t.Cleanup(func() { child.Client.Close() })
	f.stop()
	tid := stoppedOn(p.ctx, t, child.Client)
	frames, err := child.Client.StackTrace(p.ctx, tid)
	if err != nil || len(frames) == 0 {
		t.Fatalf("stackTrace: %v %v", frames, err)
	}
	ev, err := child.Client.Evaluate(p.ctx, frames[0].Id, "!capture")
	if err != nil || !strings.HasPrefix(ev.Result, "captured compute (") || !strings.Contains(ev.Result, " bytes) — replay: sparkdap replay "+capDir+"/") {
		t.Fatalf("!capture in the child session: %v %v", ev, err)
	}
	// The size given is the file's, as ls shows it beside the name.
	path := ev.Result[strings.LastIndex(ev.Result, " ")+1:]
	if fi, err := os.Stat(path); err != nil || !strings.Contains(ev.Result, fmt.Sprintf("(%d bytes)", fi.Size())) {
		t.Fatalf("!capture says %q; the file: %v %v", ev.Result, fi, err)
	}
	if _, err := root.Evaluate(p.ctx, 0, "!capture"); err == nil || !strings.Contains(err.Error(), "select a stopped frame first") {
		t.Fatalf("!capture in the root session without a frame: %v", err)
	}
}
