//go:build linux

// Package integration runs `sparkdap serve` as a real process against real
// debugpy workers and drives it as an IDE would, through internal/dapclient.
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// testToken is what the proxy expects from workers unless a test says otherwise.
const testToken = "1e6b4d2a9c0f83e7b5a1d4c9f2e07b36"

var (
	// binDir holds the sparkdap binary, built once per `go test` run by the
	// first test that needs it.
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sparkdap-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	packageEnd.mu.Lock()
	for i := len(packageEnd.fns) - 1; i >= 0; i-- {
		packageEnd.fns[i]()
	}
	packageEnd.mu.Unlock()
	os.RemoveAll(dir)
	os.Exit(code)
}

// packageEnd holds what outlives one test (the package's YARN), undone
// in reverse order by TestMain after the last test.
var packageEnd struct {
	mu  sync.Mutex
	fns []func()
}

func atPackageEnd(fn func()) {
	packageEnd.mu.Lock()
	defer packageEnd.mu.Unlock()
	packageEnd.fns = append(packageEnd.fns, fn)
}

func sparkdapBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "sparkdap")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "github.com/sparkdap/sparkdap/cmd/sparkdap")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sparkdap: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// python returns the real interpreter path with debugpy importable, or the
// test is testenv.Missing. The real path, not a version manager's shim
// (pyenv), which costs a shell start per worker and puts a wrapper between
// us and the pid.
func python(t testing.TB) string {
	t.Helper()
	return testenv.Python(t, "debugpy")
}

func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// proxy is a running `sparkdap serve`.
type proxy struct {
	IDE, Executors, Token string
	stderr                *syncbuf.Buffer
	stop                  func() // SIGTERM, then wait for the exit; once
}

// Stop ends serve as a user's Ctrl-C or a supervisor would, and returns
// once it has exited (its last words are then in Log).
func (p *proxy) Stop() { p.stop() }

// Log is everything the proxy has written to stderr so far.
func (p *proxy) Log() string { return p.stderr.String() }

func startProxy(t testing.TB, ctx context.Context, extra ...string) *proxy {
	t.Helper()
	return startProxyTo(t, ctx, nil, extra...)
}

// startProxyTo is startProxy with serve's stdout and stderr going to out
// (nil: the buffer Log reads).
func startProxyTo(t testing.TB, ctx context.Context, out *os.File, extra ...string) *proxy {
	t.Helper()
	bin := sparkdapBinary(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := append([]string{"serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
		"--token", testToken, "--ready-file", ready, "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, args...)
	p := &proxy{stderr: &syncbuf.Buffer{}}
	cmd.Stdout = p.stderr
	cmd.Stderr = p.stderr
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sparkdap serve: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			// SIGTERM first so a shutdown bug shows up in the log, then force.
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Errorf("sparkdap serve ignored SIGTERM for 5s")
			}
		})
	}
	t.Cleanup(func() {
		p.stop()
		if strings.Contains(p.Log(), "WARNING: DATA RACE") {
			t.Errorf("the race detector caught a data race in sparkdap serve")
		}
		if t.Failed() {
			t.Logf("sparkdap serve %s stderr:\n%s", strings.Join(args, " "), p.Log())
		}
	})

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(ready)
		if err == nil {
			var r struct{ IDE, Executors, Token string }
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("ready file %s: %v: %q", ready, err, data)
			}
			if r.IDE == "" || r.Executors == "" || r.Token != testToken {
				t.Fatalf("ready file %s incomplete or wrong token: %s", ready, data)
			}
			p.IDE, p.Executors, p.Token = r.IDE, r.Executors, r.Token
			return p
		}
		select {
		case err := <-exited:
			t.Fatalf("sparkdap serve exited before it was ready: %v\n%s", err, p.Log())
		case <-ctx.Done():
			t.Fatalf("sparkdap serve never wrote %s: %v\n%s", ready, ctx.Err(), p.Log())
		case <-tick.C:
		}
	}
}

// dialIDE connects a DAP client to the proxy's IDE port. SPARKDAP_TRACE=1
// logs the whole conversation.
func dialIDE(t testing.TB, ctx context.Context, addr string) *dapclient.Client {
	t.Helper()
	c, err := dapclient.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	traceClient(t, c, "ide")
	t.Cleanup(func() { c.Close() })
	return c
}

// attachAtLine connects a DAP client to p's IDE port and attaches it as an
// IDE does, justMyCode off, with one line breakpoint at path:line set
// before configurationDone.
func attachAtLine(t testing.TB, ctx context.Context, p *proxy, path string, line int) *dapclient.Client {
	t.Helper()
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, func(ctx context.Context) error {
		_, err := ide.SetBreakpoints(ctx, path, line)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ide
}

func traceClient(t testing.TB, c *dapclient.Client, name string) {
	if os.Getenv("SPARKDAP_TRACE") == "1" {
		c.SetTrace(func(format string, args ...any) { t.Logf(name+": "+format, args...) })
	}
}

// workerScript is the absolute path of testdata/worker.py, as debugpy
// reports it in stack frames.
func workerScript(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// worker is one running testdata/worker.py.
type worker struct {
	ID         int
	PID        int
	Iterations int
	stdout     *syncbuf.Buffer
	stderr     *syncbuf.Buffer
	lines      chan string
	exited     chan struct{}
	exitErr    error
}

type workerOpts struct {
	token      string // default: the proxy's
	iterations int    // default 3
	gate       string
}

func startWorker(t testing.TB, ctx context.Context, p *proxy, id int, o workerOpts) *worker {
	t.Helper()
	py := python(t)
	if o.token == "" {
		o.token = p.Token
	}
	if o.iterations == 0 {
		o.iterations = 3
	}
	host, port, err := splitHostPort(p.Executors)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-X", "frozen_modules=off", workerScript(t), "--host", host, "--port", port,
		"--token", o.token, "--id", strconv.Itoa(id), "--iterations", strconv.Itoa(o.iterations)}
	if o.gate != "" {
		args = append(args, "--gate", o.gate)
	}
	cmd := exec.Command(py, args...)
	// Keep pydevd's frozen-module warning out of the failure output.
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	return runWorker(t, cmd, id, o.iterations)
}

// runWorker starts cmd, a worker script that prints its progress lines on
// stdout, as worker id; it is killed at the end of the test if still
// running, and its output logged if the test failed.
func runWorker(t testing.TB, cmd *exec.Cmd, id, iterations int) *worker {
	t.Helper()
	w := &worker{ID: id, Iterations: iterations, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{},
		lines: make(chan string, 16), exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker %d: %v", id, err)
	}
	w.PID = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(w.stdout, sc.Text())
			select {
			case w.lines <- sc.Text():
			default: // nobody is listening for progress lines any more
			}
		}
		w.exitErr = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = cmd.Process.Kill()
			<-w.exited
		}
		if t.Failed() {
			t.Logf("worker %d (pid %d) stdout:\n%s\nstderr:\n%s", id, w.PID, w.stdout, w.stderr)
		}
	})
	return w
}

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", "", fmt.Errorf("address %q has no port", addr)
	}
	return addr[:i], addr[i+1:], nil
}

// waitLine waits for a stdout line starting with prefix.
func (w *worker) waitLine(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	for {
		select {
		case line := <-w.lines:
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-w.exited:
			t.Fatalf("worker %d exited (%v) before printing %q", w.ID, w.exitErr, prefix)
		case <-ctx.Done():
			t.Fatalf("worker %d never printed %q: %v", w.ID, prefix, ctx.Err())
		}
	}
}

// value is what compute() holds in "value" on iteration i in this worker.
func (w *worker) value(i int) int { return w.ID*1000 + i }

// waitSuccess waits for the worker to exit 0 after printing its full result.
func (w *worker) waitSuccess(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-w.exited:
	case <-ctx.Done():
		t.Fatalf("worker %d (pid %d) still running: %v", w.ID, w.PID, ctx.Err())
	}
	if w.exitErr != nil {
		var ee *exec.ExitError
		if errors.As(w.exitErr, &ee) {
			t.Fatalf("worker %d (pid %d) exited with %v", w.ID, w.PID, ee)
		}
		t.Fatalf("worker %d: %v", w.ID, w.exitErr)
	}
	total := 0
	for i := range w.Iterations {
		total += w.value(i)
	}
	want := fmt.Sprintf("RESULT %d %d %d", w.ID, w.PID, total)
	if !strings.Contains(w.stdout.String(), want) {
		t.Fatalf("worker %d output lacks %q:\n%s", w.ID, want, w.stdout)
	}
}
