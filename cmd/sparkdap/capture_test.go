package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestCaptureCommandErrors: what `sparkdap capture` says when there is no
// proxy, no stopped worker, an unknown executor, no capture directory, or
// a PyCharm-mode proxy.
func TestCaptureCommandErrors(t *testing.T) {
	dir := testenv.SocketDir(t)
	serveHub := func(t *testing.T, name, capDir string) string {
		hub := dap.NewHub(dap.Config{CaptureDir: capDir, Log: zerolog.Nop()})
		path := filepath.Join(dir, name+".sock")
		l, err := control.Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			if strings.HasPrefix(name, "pycharm") {
				px, err := pycharm.Listen(pycharm.Config{CaptureDir: capDir, Log: zerolog.Nop()}, "127.0.0.1:0")
				if err != nil {
					done <- err
					return
				}
				defer px.Close()
				done <- control.Serve(ctx, l, zerolog.Nop(), px)
				return
			}
			done <- control.Serve(ctx, l, zerolog.Nop(), hub)
		}()
		t.Cleanup(func() { cancel(); <-done })
		return path
	}
	for _, tc := range []struct {
		name   string
		capDir string
		noSrv  bool
		args   []string
		want   string
	}{
		{name: "noproxy", noSrv: true, want: "no sparkdap serve is running for --control"},
		{name: "nostop", capDir: "/x", want: "no worker is stopped: stop one at a breakpoint"},
		{name: "unknown", capDir: "/x", args: []string{"--executor", "9"}, want: "--executor: executor 9: no executor session with that id (run 'sparkdap capture' without --executor"},
		{name: "disabled", args: []string{"--executor", "9"}, want: "this proxy takes no captures: it was started with an empty --capture-dir"},
		{name: "pycharm", capDir: "/x", args: []string{"--executor", "1"}, want: "--executor: worker pid 1: the worker is not connected (run 'sparkdap capture' without --executor"},
		{name: "pycharm-nostop", capDir: "/x", want: "no worker is stopped: stop one at a breakpoint"},
		{name: "frameonly", capDir: "/x", args: []string{"--frame", "1"}, want: "--frame needs --executor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "none.sock")
			if !tc.noSrv {
				path = serveHub(t, tc.name, tc.capDir)
			}
			var out, errb bytes.Buffer
			rc := run(append([]string{"capture", "--control", path}, tc.args...), &out, &errb)
			if rc != 1 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("status %d, stderr %q; want 1 and %q", rc, errb.String(), tc.want)
			}
		})
	}
}

// TestCaptureCommandPrintsNoControls: whatever a proxy's answer holds of
// an executor's words (its label, frames, why its stack is unknown, why a
// capture failed) reaches the terminal without a byte the terminal acts
// on: no clipboard write (OSC 52), window title (OSC 0) or erased line.
// The answers are written raw, as a proxy that never cleaned them would.
func TestCaptureCommandPrintsNoControls(t *testing.T) {
	const bad = "boom\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\r\x1b[2Ksparkdap: all good\n\u009b2J"
	workers, _ := json.Marshal(control.Answer{Workers: []control.StoppedWorker{{Executor: 3, Label: bad, Thread: 1, ThreadName: bad,
		StackError: bad, Frames: []control.WorkerFrame{{Name: bad, File: bad, Line: 5}}, Top: 0}}})
	failed, _ := json.Marshal(control.Answer{Error: "capture failed: executor 3: evaluate: " + bad, Code: control.CodeFailed})
	captured, _ := json.Marshal(control.Answer{Capture: &control.CaptureResult{Path: "/c/" + bad, Function: bad, Summary: "captured " + bad}})
	dir := testenv.SocketDir(t)
	for _, tc := range []struct {
		name   string
		answer []byte
		args   []string
	}{
		{"workers", workers, nil},
		{"capture failed", failed, []string{"--executor", "3"}},
		{"captured", captured, []string{"--executor", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "")+".sock")
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = io.Copy(io.Discard, io.LimitReader(c, 4096)) // the request, up to its CloseWrite
				_, _ = c.Write(append(tc.answer, '\n'))
			}()
			var out, errb bytes.Buffer
			run(append([]string{"capture", "--control", path}, tc.args...), &out, &errb)
			all := out.String() + errb.String()
			if !strings.Contains(all, "boom") {
				t.Fatalf("the answer is not shown: %q", all)
			}
			for _, line := range strings.SplitAfter(all, "\n") {
				for _, r := range strings.TrimSuffix(line, "\n") {
					if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
						t.Fatalf("control %U printed: %q", r, all)
					}
				}
			}
		})
	}
}

// TestCaptureReplayHintPowerShell: on Windows the replay command is one
// PowerShell reads the capture's path back from: backslashes as they are,
// a path with a space in single quotes with its ' doubled.
func TestCaptureReplayHintPowerShell(t *testing.T) {
	withLocalShell(t, shellquote.PowerShell)
	dir := testenv.SocketDir(t)
	for i, tc := range []struct{ path, want string }{
		{`C:\Users\me\captures\x.capture`, `replay: sparkdap replay C:\Users\me\captures\x.capture` + "\n"},
		{`C:\Users\Jo O'Neil\captures\x.capture`, `replay: sparkdap replay 'C:\Users\Jo O''Neil\captures\x.capture'` + "\n"},
	} {
		answer, _ := json.Marshal(control.Answer{Capture: &control.CaptureResult{Path: tc.path, Function: "f", Summary: "captured f"}})
		sock := filepath.Join(dir, fmt.Sprintf("%d.sock", i))
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 4096))
			_, _ = c.Write(append(answer, '\n'))
		}()
		var out, errb bytes.Buffer
		code := run([]string{"capture", "--control", sock, "--executor", "3"}, &out, &errb)
		l.Close()
		if code != 0 || !strings.HasSuffix(out.String(), tc.want) {
			t.Errorf("capture of %s: exit %d, printed %q (stderr %q), want it to end %q", tc.path, code, out.String(), errb.String(), tc.want)
		}
	}
}
