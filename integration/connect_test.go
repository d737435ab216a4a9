//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// These tests run examples/README.md's Spark Connect recipe for real: a
// local-mode Spark Connect server from the pip-installed pyspark, started by
// the script `sparkdap conf -connect` prints, and a client script in another
// folder whose UDF runs in the server's Python workers.

// connectEnv is what the tests need for a Connect server and its clients.
type connectEnv struct {
	py, sparkHome string
	env           []string // for the server and the client
}

// requireConnect finds a Spark with a Connect server and the client's gRPC
// packages, or skips (fails in CI) without them. Spark 3.5's pip package
// has no Connect server: it is a separate Maven package there.
func requireConnect(t testing.TB) connectEnv {
	t.Helper()
	py := python(t)
	sparkHome, _ := requireStandalone(t, py)
	out, err := exec.Command(py, "-c", "import pyspark; print(pyspark.__version__)").Output()
	if err != nil {
		t.Fatalf("pyspark version: %v", err)
	}
	version := strings.TrimSpace(string(out))
	if major, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0]); major < 4 {
		t.Skipf("skipping on pyspark %s: its pip package ships no Spark Connect server (Spark 3.5 has it only as the separate spark-connect_2.12 Maven package)", version)
	}
	if _, err := os.Stat(filepath.Join(sparkHome, "sbin", "start-connect-server.sh")); err != nil {
		testenv.Missing(t, "no Spark Connect server in %s: %v", sparkHome, err)
	}
	if out, err := exec.Command(py, "-c", "import pyspark.sql.connect.session").CombinedOutput(); err != nil {
		testenv.Missing(t, "the Spark Connect client needs grpcio, grpcio-status, googleapis-common-protos, zstandard (pip install -r requirements-test.txt): %v\n%s", err, tail(string(out), 2000))
	}
	logs := t.TempDir()
	return connectEnv{py: py, sparkHome: sparkHome, env: []string{
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_PYTHON=" + py,
		// start-connect-server.sh makes a log directory even in the
		// foreground (default: inside SPARK_HOME) and checks a pid file.
		"SPARK_LOG_DIR=" + filepath.Join(logs, "logs"), "SPARK_PID_DIR=" + filepath.Join(logs, "pid"),
	}}
}

// connectServer is a Spark Connect server of the test, in its own process
// group so that stopping it also ends its JVM and Python workers.
type connectServer struct {
	url  string
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
	stop func()
}

// startConnectServer runs bin (start-connect-server.sh, or the script that
// wraps it) with args and the server options of examples/README.md's
// recipe: local[2], a free port, no UI. It returns once the server listens
// on loopback.
func startConnectServer(t testing.TB, ctx context.Context, ce connectEnv, dir string, env []string, bin string, args ...string) *connectServer {
	t.Helper()
	port := freePort(t, "127.0.0.1")
	args = append(args, "--master", "local[2]",
		"--conf", "spark.connect.grpc.binding.port="+strconv.Itoa(port),
		"--conf", "spark.ui.enabled=false")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), ce.env...), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &connectServer{url: "sc://127.0.0.1:" + strconv.Itoa(port), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the Connect server (%s): %v", bin, err)
	}
	pgid := cmd.Process.Pid
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(20 * time.Second):
			}
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // and whatever is left in the group
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				t.Errorf("Connect server (pid %d) survived SIGKILL for 10s", pgid)
			}
		})
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("Connect server %s %s output (last 8 KiB):\n%s", bin, strings.Join(args, " "), tail(s.out.String(), 8<<10))
		}
	})
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	started := regexp.MustCompile(`Spark Connect server started at: (\S+)`)
	for !started.MatchString(s.out.String()) {
		select {
		case <-s.done:
			t.Fatalf("the Connect server exited (%v) before it listened", s.err)
		case <-deadline:
			t.Fatalf("the Connect server did not listen within 3 minutes")
		case <-ctx.Done():
			t.Fatalf("the Connect server: %v", ctx.Err())
		case <-tick.C:
		}
	}
	if at := started.FindStringSubmatch(s.out.String())[1]; at != "127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("the Connect server listens on %s, want 127.0.0.1:%d (loopback only)", at, port)
	}
	return s
}

// connectLayout is where a test's files live: the developer's client script
// in one folder, the server's working directory in another, and the
// wrapper in a third.
type connectLayout struct {
	root, client, server, wrapDir string
}

func newConnectLayout(t testing.TB) connectLayout {
	t.Helper()
	root := t.TempDir()
	l := connectLayout{
		root:    root,
		client:  filepath.Join(root, "home", "dev", "connect", "connect_job.py"),
		server:  filepath.Join(root, "srv", "connect"),
		wrapDir: filepath.Join(root, "opt", "sparkdap"),
	}
	copyFile(t, filepath.Join("..", "examples", "connect", "connect_job.py"), l.client)
	for _, d := range []string{l.server, l.wrapDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// connectScript runs the documented `sparkdap wrap` and `sparkdap conf
// -connect`, and returns the script conf printed.
func connectScript(t testing.TB, ctx context.Context, l connectLayout, confArgs ...string) string {
	t.Helper()
	bin := sparkdapBinary(t)
	if out, err := exec.CommandContext(ctx, bin, "wrap", "-o", l.wrapDir).CombinedOutput(); err != nil {
		t.Fatalf("sparkdap wrap: %v\n%s", err, out)
	}
	args := append([]string{"conf", "-connect", "-wrapper", filepath.Join(l.wrapDir, "remote_debug.py")}, confArgs...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	script, err := cmd.Output()
	if err != nil {
		t.Fatalf("sparkdap %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	path := filepath.Join(filepath.Dir(l.wrapDir), "connect-server.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// runConnectClient runs the client script against url and returns its result.
func runConnectClient(t testing.TB, ctx context.Context, ce connectEnv, l connectLayout, url string) map[string]any {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	r := startSpark(t, ctx, filepath.Dir(l.client), ce.env, ce.py, l.client, url, out)
	r.wait(t, ctx)
	return readJSON(t, out)
}

// TestSparkConnectUDFStopsAtClientLine: a Connect server started with the
// script `sparkdap conf -connect` prints, a real `sparkdap serve` and a DAP
// client with a breakpoint in the Connect client's UDF. The task of
// partition 0 must stop there, at the developer's path and line, with the
// task's real values; the client's result must equal a plain Connect run's.
func TestSparkConnectUDFStopsAtClientLine(t *testing.T) {
	testenv.SkipIfShort(t, "starts two Spark Connect servers")
	ce := requireConnect(t)
	ctx := testContext(t, 10*time.Minute)
	l := newConnectLayout(t)

	// The reference: the same client against a plain Connect server.
	plainServer := startConnectServer(t, ctx, ce, l.server, nil, filepath.Join(ce.sparkHome, "sbin", "start-connect-server.sh"),
		"--wait", "--conf", "spark.connect.grpc.binding.address=127.0.0.1")
	plain := runConnectClient(t, ctx, ce, l, plainServer.url)
	plainServer.stop()

	// The second client, whose script the server cannot see: the
	// developer's copy beside the first client, under serve's --root (the
	// proxy indexes --root once), and the copy that runs elsewhere.
	remoteDir := filepath.Join(l.root, "laptop", "src")
	src := filepath.Join(filepath.Dir(l.client), "remote_job.py")
	ship := filepath.Join(remoteDir, "remote_job.py")
	copyFile(t, l.client, src)
	copyFile(t, l.client, ship)

	p := startProxy(t, ctx, "--root", filepath.Dir(l.client))
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	line := testenv.MarkedLine(t, l.client, "connect-udf")
	if err := ide.Attach(ctx, map[string]any{"type": "debugpy", "request": "attach", "justMyCode": false},
		func(ctx context.Context) error {
			_, err := ide.SetBreakpoints(ctx, l.client, line)
			return err
		}); err != nil {
		t.Fatal(err)
	}

	// The second client's script is gone before its job runs, as on a
	// machine other than the server's: SPARKDAP_DRIVER_DIR, exported
	// before the script runs, names its folder (see examples/README.md).
	script := connectScript(t, ctx, l, "--proxy", p.Executors, "--partitions", "0")
	server := startConnectServer(t, ctx, ce, l.server,
		[]string{"SPARKDAP_TOKEN=" + p.Token, "SPARKDAP_DRIVER_DIR=" + remoteDir}, "bash", script)
	if strings.Contains(server.out.String(), "without the wrapper") {
		t.Fatalf("the script started the server without the wrapper although it was there")
	}
	out := filepath.Join(t.TempDir(), "debugged.json")
	job := startSpark(t, ctx, filepath.Dir(l.client), ce.env, ce.py, l.client, server.url, out)

	s := nextStop(t, ctx, ide, job)
	if s.path != l.client || s.line != line {
		t.Fatalf("stopped at %s:%d (%s), want the client's %s:%d", s.path, s.line, s.function, l.client, line)
	}
	if m := labelRE.FindStringSubmatch(s.thread); m == nil || m[1] != "0" {
		t.Errorf("thread %q does not show the task label of partition 0", s.thread)
	}
	if x, err := strconv.Atoi(s.locals["x"]); err != nil || x < 0 || x >= 10 {
		t.Errorf("x = %q: want an id of partition 0 (0..9); locals %v", s.locals["x"], s.locals)
	}
	t.Logf("stopped in %q at %s:%d with x=%s", s.thread, s.path, s.line, s.locals["x"])

	if _, err := ide.SetBreakpoints(ctx, l.client); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	if got := readJSON(t, out); !reflect.DeepEqual(got, plain) {
		t.Errorf("result under sparkdap differs from the plain Connect run:\n got %v\nwant %v", got, plain)
	}

	// A client whose script the server cannot see.
	if _, err := ide.SetBreakpoints(ctx, src, line); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "remote.json")
	// Compiled from ship, which is then removed: the UDF's code names a
	// file that exists nowhere the server's workers look.
	runner := `import os, sys, __main__
src = sys.argv[1]
code = compile(open(src).read(), src, "exec")
os.remove(src)
sys.argv = sys.argv[1:]
__main__.__file__ = src
exec(code, __main__.__dict__)
`
	job = startSpark(t, ctx, l.root, ce.env, ce.py, "-c", runner, ship, server.url, out)
	s = nextStop(t, ctx, ide, job)
	if s.path != src || s.line != line {
		t.Fatalf("a client's UDF whose script is absent on the server stopped at %s:%d (%s), want the developer's %s:%d", s.path, s.line, s.function, src, line)
	}
	if x, err := strconv.Atoi(s.locals["x"]); err != nil || x < 0 || x >= 10 {
		t.Errorf("x = %q: want an id of partition 0 (0..9); locals %v", s.locals["x"], s.locals)
	}
	if _, err := os.Stat(ship); !os.IsNotExist(err) {
		t.Fatalf("%s still exists (%v): the stop proves nothing", ship, err)
	}
	if _, err := ide.SetBreakpoints(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	if got := readJSON(t, out); !reflect.DeepEqual(got, plain) {
		t.Errorf("result of the second client differs from the plain Connect run:\n got %v\nwant %v", got, plain)
	}

	attached := regexp.MustCompile(`(?m)^sparkdap: \+ executor \d+ attached \[(.*)\]$`).FindAllStringSubmatch(p.Log(), -1)
	// One per client job at most (a reused worker stays attached), and
	// only partition 0's: SPARKDAP_PARTITIONS=0 in the server's environment.
	if len(attached) == 0 || len(attached) > 2 {
		t.Errorf("%d debug sessions for two jobs with --partitions 0: %v", len(attached), attached)
	}
	for _, a := range attached {
		if !strings.Contains(a[1], "partition 0 ·") {
			t.Errorf("a debug session of another partition than 0: %s", a[1])
		}
	}
}

// TestSparkConnectScriptWithoutWrapperFailsOpen: when the wrapper the
// script names is gone by the time the server starts, the server must
// start without it and UDFs must run, undebugged, with the right result:
// with spark.python.daemon.module=remote_debug and no such module, every
// UDF would fail.
func TestSparkConnectScriptWithoutWrapperFailsOpen(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Spark Connect server")
	ce := requireConnect(t)
	ctx := testContext(t, 6*time.Minute)
	l := newConnectLayout(t)
	script := connectScript(t, ctx, l, "--partitions", "0")
	if err := os.Remove(filepath.Join(l.wrapDir, "remote_debug.py")); err != nil {
		t.Fatal(err)
	}
	server := startConnectServer(t, ctx, ce, l.server, []string{"SPARKDAP_TOKEN=" + testToken}, "bash", script)
	if !strings.Contains(server.out.String(), "cannot import remote_debug") {
		t.Errorf("the script did not say it starts the server without the wrapper")
	}
	got := runConnectClient(t, ctx, ce, l, server.url)
	// score(x) = 3x + 1 over ids 0..39.
	if total, want := got["total"], float64(3*780+40); total != want {
		t.Errorf("total = %v, want %v", total, want)
	}
}
