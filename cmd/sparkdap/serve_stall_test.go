//go:build unix

package main

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

	"golang.org/x/sys/unix"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// serve's stderr is a pipe that fills up once serve is ready and is then
// not read (`serve 2>&1 | less` left unscrolled, a terminal paused with
// Ctrl-S): an IDE still attaches, a worker still joins (both print lines
// while the proxy holds its locks), and with the worker stopped, DAP
// round trips to it complete while the
// proxy logs at debug level. Once the pipe is read again, what was kept
// arrives, and a count of what was dropped, if anything was.
// stallToken is a token serve accepts (128 bits, as `openssl rand -hex 16`).
const stallToken = "5f0c2b7e9a41d38c6e2f7b90a1d4c853"

func TestServeKeepsServingWithStderrFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	// Read serve's stderr until it is ready, then never again until the end.
	var head strings.Builder
	stopReading := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 4096)
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			_ = pr.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			n, err := pr.Read(buf)
			head.Write(buf[:n])
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()

	dir := t.TempDir()
	ready := filepath.Join(dir, "ready.json")
	c, f := serveCmd(io.Discard)
	if err := parseFlags(c.fs, []string{"--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0", "--token", stallToken,
		"--ready-file", ready, "--log-level", "debug", "--live", "off", "--no-path-mapping",
		"--control", filepath.Join(dir, "ctl.sock")}); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveUntil(sctx, f, c.fs.Args(), pw) }()
	var addrs struct{ IDE, Executors string }
	for {
		b, err := os.ReadFile(ready)
		if err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		select {
		case err := <-served:
			t.Fatalf("serve ended before it was ready: %v", err)
		case <-ctx.Done():
			t.Fatal("serve never became ready")
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(stopReading)
	<-readerDone
	_ = pr.SetReadDeadline(time.Time{})
	fillPipe(t, pw) // from now on every write to the pipe would block

	ide, err := dapclient.Dial(ctx, addrs.IDE)
	if err != nil {
		t.Fatal(err)
	}
	defer ide.Close()
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach"}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := fakepydevd.Dial(ctx, addrs.Executors, fakepydevd.Config{Token: stallToken, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.Configured():
	case <-ctx.Done():
		t.Fatal("the worker's handshake never finished")
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	st, err := ide.StoppedEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 { // each logs lines at debug level
		frames, err := ide.StackTrace(ctx, st.ThreadId)
		if err != nil || len(frames) == 0 {
			t.Fatalf("round trip %d to the stopped worker: %v (%d frames)", i, err, len(frames))
		}
	}

	// Read the pipe, stop serve: the filler, what was kept, the count.
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- string(b)
	}()
	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	pw.Close()
	// Lines that did not fit while the pipe was full are dropped and
	// counted; none is lost without that notice.
	log := head.String() + <-got
	dropped := strings.Contains(log, "log line(s) dropped: stderr was not being read]")
	for _, want := range []string{"sparkdap: IDE port", "sparkdap: + executor", "IDE detached"} {
		if !dropped && !strings.Contains(log, want) {
			t.Errorf("stderr lost %q without saying so; it ends:\n%s", want, log[max(0, len(log)-4096):])
		}
	}
}

// fillPipe writes filler lines to w until the pipe's buffer is full. serve
// has put w in blocking mode (os.File.Fd does), so the writes are made
// non-blocking for the while.
func fillPipe(t *testing.T, w *os.File) {
	t.Helper()
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("filler ", 15) + "\n")
	var werr error
	full := false
	if err := rc.Control(func(fd uintptr) {
		if werr = unix.SetNonblock(int(fd), true); werr != nil {
			return
		}
		defer unix.SetNonblock(int(fd), false)
		for range 1 << 16 { // a pipe holds at most 1 MiB by default
			if _, werr = unix.Write(int(fd), line); werr != nil {
				full = errors.Is(werr, unix.EAGAIN)
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !full {
		t.Fatalf("the pipe never filled: %v", werr)
	}
}
