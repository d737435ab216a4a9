package workerwrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/testenv"
)

// ProbeArgs runs the module's own hello client and debugpy.connect, as
// `sparkdap doctor` does, against a real proxy.
func TestProbeArgsAgainstProxy(t *testing.T) {
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
		{"nope", "REFUSED wrong access token", 3},
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
				l, _ := bufio.NewReader(stdout).ReadString('\n')
				line <- l
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
