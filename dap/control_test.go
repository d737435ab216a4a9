package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// serveControl serves the control protocol for p's Hub on a Unix socket
// for the test.
func serveControl(t *testing.T, p *testProxy) string {
	t.Helper()
	path := filepath.Join(testenv.SocketDir(t), "c.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	done := make(chan error, 1)
	go func() { done <- control.Serve(ctx, l, zerolog.Nop(), p.hub) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control.Serve: %v", err)
		}
	})
	return path
}

// rawControl sends b as is and returns the answer.
func rawControl(t *testing.T, path string, b []byte) control.Answer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	var ans control.Answer
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	return ans
}

// TestControlCapture: the control protocol lists the stopped worker with
// its stack, captures it (the proxy asks pydevd for the stack itself),
// and names what is wrong: an unknown executor, one not stopped, a frame
// out of range, a proxy without a capture directory.
func TestControlCapture(t *testing.T) {
	capDir := filepath.Join(t.TempDir(), "captures")
	p := startProxy(t, func(c *Config) { c.CaptureDir = capDir })
	path := serveControl(t, p)
	c := p.ide(false, nil)
	ctx := p.ctx
	f := p.executor(101, nil)
	p.waitExecutors(1)
	id := p.hub.Executors()[0].ID
	fakeCaptures(f, `[1,22]`)

	call := func(req control.Request) (control.Answer, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return control.Call(cctx, path, req)
	}
	wantCode := func(req control.Request, code, text string) {
		t.Helper()
		_, err := call(req)
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, text) {
			t.Fatalf("%+v: %v, want a %s error containing %q", req, err, code, text)
		}
	}
	ans, err := call(control.Request{Op: control.OpWorkers})
	if err != nil || len(ans.Workers) != 0 {
		t.Fatalf("workers before any stop: %+v %v", ans, err)
	}
	wantCode(control.Request{Op: control.OpCapture, Executor: id}, control.CodeNotStopped, "is not stopped")
	wantCode(control.Request{Op: control.OpCapture, Executor: id + 7}, control.CodeUnknownExecutor, "no executor session with that id")

	f.stop()
	tid := stoppedOn(ctx, t, c)
	ans, err = call(control.Request{Op: control.OpWorkers})
	if err != nil || len(ans.Workers) != 1 {
		t.Fatalf("workers: %+v %v", ans, err)
	}
	w := ans.Workers[0]
	if w.Executor != id || w.Thread != 1 || w.Top != 0 || len(w.Frames) != 1 ||
		w.Frames[0].Name != "compute" || w.Frames[0].File != "/job/udf.py" || w.Frames[0].Line != 5 || !strings.Contains(w.Label, "pid 101") {
		t.Fatalf("stopped worker %+v", w)
	}
	three := 3
	wantCode(control.Request{Op: control.OpCapture, Executor: id, Frame: &three}, control.CodeNoFrame, "frame 3 of a stack of 1")

	ans, err = call(control.Request{Op: control.OpCapture, Executor: id})
	if err != nil || ans.Capture == nil {
		t.Fatalf("capture: %+v %v", ans, err)
	}
	got := ans.Capture
	if got.Function != "compute" || filepath.Dir(got.Path) != capDir ||
		!strings.Contains(got.Summary, "replay: sparkdap replay "+got.Path) {
		t.Fatalf("capture %+v", got)
	}
	// The size the answer gives is the file's, which the message names.
	if fi, err := os.Stat(got.Path); err != nil || got.Bytes != fi.Size() {
		t.Fatalf("capture says %d bytes; the file: %v %v", got.Bytes, fi, err)
	}
	// The IDE never saw the proxy's own stackTrace: its thread is still
	// stopped and answers as before.
	if frames, err := c.StackTrace(ctx, tid); err != nil || len(frames) != 1 {
		t.Fatalf("IDE stackTrace after the capture: %v %v", frames, err)
	}
}

// TestControlCaptureDisabled: a proxy without a capture directory says so.
func TestControlCaptureDisabled(t *testing.T) {
	p := startProxy(t, nil)
	path := serveControl(t, p)
	_, err := control.Call(p.ctx, path, control.Request{Op: control.OpCapture, Executor: 1})
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeCaptureDisabled || !strings.Contains(ce.Message, "--capture-dir") {
		t.Fatalf("capture on a proxy without a capture directory: %v", err)
	}
}

// TestControlCleansExecutorErrors: an executor's words in a control answer
// (why its stack is unknown, why a capture failed to start) reach the
// client cleaned, on the wire as well as through ControlCall.
func TestControlCleansExecutorErrors(t *testing.T) {
	p := startProxy(t, func(c *Config) { c.CaptureDir = t.TempDir() })
	path := serveControl(t, p)
	c := p.ide(false, nil)
	f := p.executor(101, nil)
	p.waitExecutors(1)
	id := p.hub.Executors()[0].ID
	f.stop()
	stoppedOn(p.ctx, t, c)
	f.SetTamper(func(req fakepydevd.Message, resp map[string]any) {
		switch {
		case req.Command == "stackTrace":
			resp["success"], resp["message"], resp["body"] = false, testenv.HostileTerminalText, map[string]any{"error": map[string]any{"format": testenv.HostileTerminalText}}
		case req.Command == "evaluate":
			resp["success"], resp["message"], resp["body"] = false, testenv.HostileTerminalText, map[string]any{}
		}
	})
	raw := rawControl(t, path, []byte(`{"op":"workers"}`+"\n"))
	if len(raw.Workers) != 1 || !strings.Contains(raw.Workers[0].StackError, "boom") {
		t.Fatalf("workers: %+v", raw)
	}
	testenv.NoTerminalControls(t, "the stack error on the wire", raw.Workers[0].StackError)
	ans, err := control.Call(p.ctx, path, control.Request{Op: control.OpWorkers})
	if err != nil || len(ans.Workers) != 1 {
		t.Fatalf("workers: %+v %v", ans, err)
	}
	testenv.NoTerminalControls(t, "the stack error", ans.Workers[0].StackError)

	// The capture asks for the stack first; let that pass and fail the
	// capture code's start instead.
	f.SetTamper(func(req fakepydevd.Message, resp map[string]any) {
		if req.Command == "evaluate" {
			resp["success"], resp["message"], resp["body"] = false, testenv.HostileTerminalText, map[string]any{}
		}
	})
	_, err = control.Call(p.ctx, path, control.Request{Op: control.OpCapture, Executor: id, Frame: new(int)})
	var ce *control.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "boom") {
		t.Fatalf("capture: %v, want the executor's failure", err)
	}
	testenv.NoTerminalControls(t, "the capture error", ce.Message)
	rawCap := rawControl(t, path, []byte(fmt.Sprintf(`{"op":"capture","executor":%d,"frame":0}`+"\n", id)))
	testenv.NoTerminalControls(t, "the capture error on the wire", rawCap.Error)
}

// TestControlAsksAStackOncePerStop: the view's feed lists the stopped
// workers several times a second; the proxy asks a stopped thread's
// pydevd for its stack once per stop, not once per listing, and asks
// again after the thread resumed and stopped anew.
func TestControlAsksAStackOncePerStop(t *testing.T) {
	p := startProxy(t, nil)
	path := serveControl(t, p)
	c := p.ide(false, nil)
	ctx := p.ctx
	f := p.executor(101, nil)
	p.waitExecutors(1)
	list := func() control.WorkerFrame {
		t.Helper()
		ans, err := control.Call(ctx, path, control.Request{Op: control.OpWorkers})
		if err != nil || len(ans.Workers) != 1 || len(ans.Workers[0].Frames) != 1 {
			t.Fatalf("workers: %+v %v", ans, err)
		}
		return ans.Workers[0].Frames[0]
	}
	// A full stack request, as the listing sends it (the proxy's own
	// one-frame request at each stop for the status line is apart).
	fullStacks := func() int {
		n := 0
		for _, m := range f.Recorded() {
			if m.Command == "stackTrace" {
				if _, one := m.Arguments["levels"]; !one {
					n++
				}
			}
		}
		return n
	}
	f.stop()
	tid := stoppedOn(ctx, t, c)
	first := list()
	for range 5 {
		if got := list(); got != first {
			t.Fatalf("listing again gave %+v, first %+v", got, first)
		}
	}
	if n := fullStacks(); n != 1 {
		t.Fatalf("six listings of one stop asked pydevd for the stack %d times, want once", n)
	}
	if err := c.Continue(ctx, tid); err != nil {
		t.Fatal(err)
	}
	f.stop()
	stoppedOn(ctx, t, c)
	list()
	list()
	if n := fullStacks(); n != 2 {
		t.Fatalf("after a second stop the stack was asked %d times in all, want 2", n)
	}
}
