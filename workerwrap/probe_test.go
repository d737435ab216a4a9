package workerwrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// ProbeArgs runs the module's own hello client and debugpy.connect, as
// `sparkdap doctor` does, against a real proxy.
func TestProbeArgsAgainstProxy(t *testing.T) {
	testenv.SkipIfShort(t, "starts real debugpy workers")
	python := testenv.Python(t, "debugpy")
	hub := dap.NewHub(dap.Config{Token: "probe-tok", Log: zerolog.Nop()})
	srv, err := dap.Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
	host, port, _ := net.SplitHostPort(srv.ExecutorAddr().String())

	for _, tc := range []struct {
		token, want string
		exit        int
	}{
		{"probe-tok", "CONNECTED ", 0},
		{"nope", "UNPROVEN ", 3}, // the worker stops at the proxy's proof
	} {
		t.Run(tc.token, func(t *testing.T) {
			cmd := exec.Command(python, ProbeArgs(host, port)...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() }) // cmd.Wait runs below
			fmt.Fprintln(stdin, tc.token)
			line := make(chan string, 1)
			go func() {
				line <- outcome(bufio.NewReader(stdout))
				_, _ = io.Copy(io.Discard, stdout)
			}()
			select {
			case l := <-line:
				if !strings.HasPrefix(l, tc.want) {
					t.Fatalf("probe said %q, want %q (stderr: %s)", l, tc.want, stderr.String())
				}
				if tc.want == "CONNECTED " && strings.TrimSpace(l) != fmt.Sprintf("CONNECTED %d", cmd.Process.Pid) {
					t.Errorf("probe said %q, want its pid %d", l, cmd.Process.Pid)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("probe said nothing in 60s (stderr: %s)", stderr.String())
			}
			stdin.Close() // a connected probe exits when its stdin closes
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var exit *exec.ExitError
				code := 0
				if errors.As(err, &exit) {
					code = exit.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != tc.exit {
					t.Errorf("exit %d, want %d (stderr: %s)", code, tc.exit, stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatal("probe did not exit within 60s of its stdin closing")
			}
		})
	}
}

// runProbe runs the module's probe (its real hello client) against addr
// with token and returns its outcome line once it exited.
func runProbe(t *testing.T, python, addr, token string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, ProbeArgs(host, port)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, token)
	line := outcome(bufio.NewReader(stdout))
	stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	return line
}

// TestProbeSquatterLearnsNoToken: a program that bound the executor port
// before the proxy gets the real module's hello and learns a nonce, not
// the token; the worker goes no further.
func TestProbeSquatterLearnsNoToken(t *testing.T) {
	python := testenv.Python(t, "debugpy")
	const token = "squatted-probe-tok"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heard := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			heard <- ""
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReader(c)
		first, _ := br.ReadString('\n')
		// It cannot compute the proof; it tries anyway.
		fmt.Fprintf(c, "SPARKDAP/2 CHALLENGE %s %s\n", strings.Repeat("0", 32), strings.Repeat("ab", 32))
		rest, _ := io.ReadAll(br)
		heard <- first + string(rest)
	}()
	if got := runProbe(t, python, ln.Addr().String(), token); !strings.HasPrefix(got, "UNPROVEN ") {
		t.Errorf("probe said %q, want UNPROVEN", got)
	}
	h := <-heard
	if strings.Contains(h, token) || !regexp.MustCompile(`^SPARKDAP/2 HELLO [0-9a-f]{32}\n$`).MatchString(h) {
		t.Errorf("the squatter heard %q", h)
	}
}

// TestProbeCapturedHelloReplayRefused: someone who watched a whole
// successful exchange between the real module and the real proxy (here a
// relay that records it) and replays the worker's lines to the proxy is
// refused.
func TestProbeCapturedHelloReplayRefused(t *testing.T) {
	testenv.SkipIfShort(t, "starts real debugpy workers")
	python := testenv.Python(t, "debugpy")
	const token = "relayed-probe-tok"
	hub := dap.NewHub(dap.Config{Token: token, Log: zerolog.Nop()})
	srv, err := dap.Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
	proxy := srv.ExecutorAddr().String()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var recorded []string // what the worker sent, per connection
	go func() {
		for i := 0; i < 10; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p, err := net.Dial("tcp", proxy)
			if err != nil {
				c.Close()
				return
			}
			var buf bytes.Buffer
			idx := i
			mu.Lock()
			recorded = append(recorded, "")
			mu.Unlock()
			go func() {
				_, _ = io.Copy(io.MultiWriter(p, writerFunc(func(b []byte) {
					mu.Lock()
					buf.Write(b)
					recorded[idx] = buf.String()
					mu.Unlock()
				})), c)
				p.Close()
			}()
			go func() { _, _ = io.Copy(c, p); c.Close() }()
		}
	}()
	if got := runProbe(t, python, ln.Addr().String(), token); !strings.HasPrefix(got, "CONNECTED ") {
		t.Fatalf("probe through the relay said %q", got)
	}
	mu.Lock()
	captured := append([]string(nil), recorded...)
	mu.Unlock()
	if len(captured) < 2 || !strings.HasPrefix(captured[0], "SPARKDAP/2 HELLO ") {
		t.Fatalf("relay recorded %q", captured)
	}
	for _, c := range captured {
		if strings.Contains(c, token) {
			t.Fatalf("the token crossed the wire: %q", c)
		}
	}

	// Replay the hello to the real proxy.
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, captured[0]); err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(c)
	if !bytes.Contains(reply, []byte("SPARKDAP/2 REFUSED wrong access token")) {
		t.Errorf("replayed hello: the proxy answered %q", reply)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// outcome is the probe's outcome line, past the ADMITTED it says once
// its hello is accepted.
func outcome(br *bufio.Reader) string {
	for {
		l, err := br.ReadString('\n')
		if l != "ADMITTED\n" || err != nil {
			return l
		}
	}
}
