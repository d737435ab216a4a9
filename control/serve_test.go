package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/selection"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// fakeBackend answers with what the test sets.
type fakeBackend struct {
	workers []StoppedWorker
	capture func(executor uint64, frame *int, maxBytes int64) (CaptureResult, error)
	board   *selection.Board
	once    sync.Once
}

func (f *fakeBackend) Board() *selection.Board {
	f.once.Do(func() {
		if f.board == nil {
			f.board = selection.NewBoard(0)
		}
	})
	return f.board
}

func (f *fakeBackend) StoppedWorkers(context.Context) []StoppedWorker { return f.workers }

func (f *fakeBackend) CaptureStopped(_ context.Context, executor uint64, frame *int, maxBytes int64) (CaptureResult, error) {
	return f.capture(executor, frame, maxBytes)
}

// serve serves b on a socket for the test and returns its path.
func serve(t *testing.T, b Backend) string {
	t.Helper()
	path := filepath.Join(testenv.SocketDir(t), "c.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, zerolog.Nop(), b) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return path
}

// raw sends b as is and returns the answer as it came on the wire.
func raw(t *testing.T, path string, b []byte) Answer {
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
	_ = c.(*net.UnixConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	var ans Answer
	if err := json.Unmarshal(got, &ans); err != nil {
		t.Fatalf("answer %q: %v", got, err)
	}
	return ans
}

// TestRejectsBadRequests: what is not exactly one well-formed request is
// answered with a bad-request error and reaches no Backend method.
func TestRejectsBadRequests(t *testing.T) {
	path := serve(t, &fakeBackend{capture: func(uint64, *int, int64) (CaptureResult, error) {
		t.Error("a bad request reached the backend")
		return CaptureResult{}, nil
	}})
	for _, tc := range []struct {
		name string
		req  string
		want string
	}{
		{"not JSON", "capture please\n", "not a control request"},
		{"empty", "", "reading the request"},
		{"unknown field", `{"op":"capture","executor":1,"thread":3}` + "\n", `unknown field "thread"`},
		{"wrong type", `{"op":"capture","executor":"1"}` + "\n", "not a control request"},
		{"two values", `{"op":"workers"} {"op":"workers"}` + "\n", "more than one JSON value"},
		{"oversize", `{"op":"workers","pad":"` + strings.Repeat("x", MaxRequestBytes) + "\"}\n", "request over 4096 bytes"},
		{"unknown op", `{"op":"delete"}` + "\n", `unknown op "delete"`},
		{"capture without executor", `{"op":"capture"}` + "\n", "capture needs an executor"},
		{"workers with arguments", `{"op":"workers","executor":2}` + "\n", "workers takes no executor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans := raw(t, path, []byte(tc.req))
			if ans.Code != CodeBadRequest || !strings.Contains(ans.Error, tc.want) {
				t.Fatalf("answer %+v, want a bad-request error containing %q", ans, tc.want)
			}
		})
	}
}

// TestAnswerCodes: a Backend's errors reach the client with the code of
// their class, also when the front end says them in its own words
// (WithClass); the capture's arguments reach the Backend as sent.
func TestAnswerCodes(t *testing.T) {
	ownWords := errors.New("worker pid 9: the worker is not connected")
	var gotFrame *int
	var gotMax int64
	b := &fakeBackend{capture: func(executor uint64, frame *int, maxBytes int64) (CaptureResult, error) {
		gotFrame, gotMax = frame, maxBytes
		switch executor {
		case 1:
			return CaptureResult{}, ErrCaptureDisabled
		case 2:
			return CaptureResult{}, fmt.Errorf("executor 2: %w", ErrUnknownExecutor)
		case 3:
			return CaptureResult{}, fmt.Errorf("executor 3: %w: stop it first", ErrNotStopped)
		case 4:
			return CaptureResult{}, fmt.Errorf("executor 4: %w: frame 3 of 1", ErrNoFrame)
		case 5:
			return CaptureResult{}, errors.New("capture failed: boom")
		case 6:
			return CaptureResult{}, WithClass(ownWords, ErrUnknownExecutor)
		}
		return CaptureResult{Path: "/c/x.pkl", Bytes: 6, Executor: executor, Frame: 1, Summary: "captured"}, nil
	}}
	path := serve(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		executor uint64
		code     string
		text     string
	}{
		{1, CodeCaptureDisabled, "--capture-dir"},
		{2, CodeUnknownExecutor, "executor 2: no executor session with that id"},
		{3, CodeNotStopped, "executor 3: the executor is not stopped"},
		{4, CodeNoFrame, "frame 3 of 1"},
		{5, CodeFailed, "capture failed: boom"},
		{6, CodeUnknownExecutor, ownWords.Error()},
	} {
		_, err := Call(ctx, path, Request{Op: OpCapture, Executor: tc.executor})
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrAnswer) || ce.Code != tc.code || ce.Message != tc.text && !strings.Contains(ce.Message, tc.text) {
			t.Errorf("executor %d: %v, want a %s error with %q", tc.executor, err, tc.code, tc.text)
		}
	}
	one := 1
	ans, err := Call(ctx, path, Request{Op: OpCapture, Executor: 7, Frame: &one, MaxBytes: 100})
	if err != nil || ans.Capture == nil || ans.Capture.Path != "/c/x.pkl" || ans.Capture.Executor != 7 {
		t.Fatalf("capture: %+v %v", ans, err)
	}
	if gotFrame == nil || *gotFrame != 1 || gotMax != 100 {
		t.Errorf("the backend got frame %v, maxBytes %d; want 1, 100", gotFrame, gotMax)
	}
	if ans, err := Call(ctx, path, Request{Op: OpWorkers}); err != nil || len(ans.Workers) != 0 {
		t.Errorf("workers: %+v %v", ans, err)
	}
}

// TestCleansAnswers: whatever of an executor's words a Backend puts in an
// answer, uncleaned (a label, a frame, why a stack is unknown, why a
// capture failed), reaches the client cleaned, on the wire as well as
// through Call.
func TestCleansAnswers(t *testing.T) {
	b := &fakeBackend{
		workers: []StoppedWorker{{Executor: 3, Label: testenv.HostileTerminalText, Thread: 1, ThreadName: testenv.HostileTerminalText, StackError: testenv.HostileTerminalText,
			Frames: []WorkerFrame{{Name: testenv.HostileTerminalText, File: testenv.HostileTerminalText, Line: 5}}, Top: 0}},
		capture: func(executor uint64, _ *int, _ int64) (CaptureResult, error) {
			if executor == 1 {
				return CaptureResult{}, errors.New("capture failed: " + testenv.HostileTerminalText)
			}
			return CaptureResult{Path: testenv.HostileTerminalText, Function: testenv.HostileTerminalText, Task: testenv.HostileTerminalText, Summary: testenv.HostileTerminalText}, nil
		},
	}
	path := serve(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	strs := func(a Answer) []string {
		out := []string{a.Error}
		for _, w := range a.Workers {
			out = append(out, w.Label, w.ThreadName, w.StackError)
			for _, f := range w.Frames {
				out = append(out, f.Name, f.File)
			}
		}
		if c := a.Capture; c != nil {
			out = append(out, c.Path, c.Function, c.Task, c.Summary)
		}
		return out
	}
	for _, req := range []string{`{"op":"workers"}`, `{"op":"capture","executor":1}`, `{"op":"capture","executor":2}`} {
		onWire := raw(t, path, []byte(req+"\n"))
		var r Request
		_ = json.Unmarshal([]byte(req), &r)
		viaCall, err := Call(ctx, path, r)
		var ce *Error
		if errors.As(err, &ce) {
			testenv.NoTerminalControls(t, req+" error through Call", ce.Message)
		}
		for _, a := range []Answer{onWire, viaCall} {
			all := strs(a)
			if !strings.Contains(strings.Join(all, ""), "boom") {
				t.Fatalf("%s: the answer lost the words: %+v", req, a)
			}
			for _, s := range all {
				testenv.NoTerminalControls(t, req, s)
			}
		}
	}
}

// TestServeEndsWithContext: Serve returns once its context ends, with a
// connection still open, and the socket no longer answers.
func TestServeEndsWithContext(t *testing.T) {
	path := filepath.Join(testenv.SocketDir(t), "c.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, zerolog.Nop(), &fakeBackend{}) }()
	idle, err := net.Dial("unix", path) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Error("the socket still answers after Serve returned")
	}
}

// FuzzReadRequest: no line makes ReadRequest panic, and what it accepts
// is a request that encodes back to what it decodes from.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{`{"op":"workers"}` + "\n", `{"op":"capture","executor":3,"frame":0,"maxBytes":9}`, "", "{}\n{}", `{"op":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(strings.NewReader(string(b)))
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadRequest(strings.NewReader(string(again)))
		if err != nil || back.Op != req.Op || back.Executor != req.Executor || back.MaxBytes != req.MaxBytes || (back.Frame == nil) != (req.Frame == nil) {
			t.Fatalf("%q → %+v → %s → %+v %v", b, req, again, back, err)
		}
	})
}
