package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/pycharm"
)

// shortDir is a temporary directory with a path short enough for a Unix
// socket in it (~100 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sdcap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestListenControl: the control socket is the user's only (0600 in a
// 0700 directory, made so if looser), a socket a dead proxy left is
// replaced, and neither a live proxy's socket, nor a file that is not a
// socket, nor a linked directory is touched.
func TestListenControl(t *testing.T) {
	base := shortDir(t)
	dir := filepath.Join(base, "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.sock")
	l, err := listenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode(), err, want)
		}
	}
	if _, err := listenControl(path); err == nil || !strings.Contains(err.Error(), "another sparkdap serve answers there") {
		t.Errorf("second listen on a live socket: %v", err)
	}
	// A proxy that died leaves its socket (no unlink on close here).
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the dead proxy's socket is gone already: %v", err)
	}
	l2, err := listenControl(path)
	if err != nil {
		t.Fatalf("listen over a dead proxy's socket: %v", err)
	}
	l2.Close()

	plain := filepath.Join(dir, "plain.sock")
	mustWrite(t, plain, "mine")
	if _, err := listenControl(plain); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != "mine" {
		t.Errorf("the regular file was changed: %q", b)
	}
	elsewhere := shortDir(t)
	mustSymlink(t, elsewhere, filepath.Join(base, "linked"))
	if _, err := listenControl(filepath.Join(base, "linked", "c.sock")); err == nil || !strings.Contains(err.Error(), "a link is not followed") {
		t.Errorf("listen in a linked directory: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("a socket was made through the link: %v", ents)
	}
}

// TestControlPathFor: serve and capture derive the same socket from the
// same --ide, and different ones from different ports.
func TestControlPathFor(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := controlPathFor("127.0.0.1:4711"); got != "/run/user/1000/sparkdap/ide-127.0.0.1-4711.sock" {
		t.Errorf("controlPathFor = %s", got)
	}
	if controlPathFor("127.0.0.1:4711") == controlPathFor("127.0.0.1:4712") {
		t.Error("two IDE ports share a control socket")
	}
	if got := controlPathFor("[::1]:4711"); got != "/run/user/1000/sparkdap/ide-__1-4711.sock" {
		t.Errorf("controlPathFor(IPv6) = %s", got)
	}
}

// TestCaptureCommandErrors: what `sparkdap capture` says when there is no
// proxy, no stopped worker, an unknown executor, no capture directory, or
// a PyCharm-mode proxy.
func TestCaptureCommandErrors(t *testing.T) {
	dir := shortDir(t)
	serveHub := func(t *testing.T, name, capDir string) string {
		hub := dap.NewHub(dap.Config{CaptureDir: capDir, Log: zerolog.Nop()})
		path := filepath.Join(dir, name+".sock")
		l, err := listenControl(path)
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
				done <- dap.ServeControlWith(ctx, l, zerolog.Nop(), pycharmControl(px, capDir))
				return
			}
			done <- hub.ServeControl(ctx, l)
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
	workers, _ := json.Marshal(dap.ControlAnswer{Workers: []dap.StoppedWorker{{Executor: 3, Label: bad, Thread: 1, ThreadName: bad,
		StackError: bad, Frames: []dap.WorkerFrame{{Name: bad, File: bad, Line: 5}}, Top: 0}}})
	failed, _ := json.Marshal(dap.ControlAnswer{Error: "capture failed: executor 3: evaluate: " + bad, Code: dap.CodeFailed})
	captured, _ := json.Marshal(dap.ControlAnswer{Capture: &dap.CaptureResult{Path: "/c/" + bad, Function: bad, Summary: "captured " + bad}})
	dir := shortDir(t)
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
