//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// Fault tests: real `sparkdap serve` processes, real debugpy workers and a
// real local-mode Spark job, with the proxy killed, the IDE leaving and an
// executor dying under them.

// faultProxy is a `sparkdap serve` the test may kill -9.
type faultProxy struct {
	*proxy
	cmd    *exec.Cmd
	exited chan error
}

// startFaultProxy is startProxy, keeping hold of the process.
func startFaultProxy(t testing.TB, ctx context.Context, extra ...string) *faultProxy {
	t.Helper()
	bin := sparkdapBinary(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := append([]string{"serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
		"--token", testToken, "--ready-file", ready, "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, args...)
	p := &faultProxy{proxy: &proxy{stderr: &syncbuf.Buffer{}}, cmd: cmd, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sparkdap serve: %v", err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
		if strings.Contains(p.Log(), "WARNING: DATA RACE") {
			t.Errorf("the race detector caught a data race in sparkdap serve")
		}
		if t.Failed() {
			t.Logf("sparkdap serve stderr:\n%s", p.Log())
		}
	})
	for range 1500 { // 30 s
		if data, err := os.ReadFile(ready); err == nil {
			var r struct{ IDE, Executors, Token string }
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("ready file: %v", err)
			}
			p.IDE, p.Executors, p.Token = r.IDE, r.Executors, r.Token
			return p
		}
		select {
		case err := <-p.exited:
			t.Fatalf("sparkdap serve exited before it was ready: %v\n%s", err, p.Log())
		case <-ctx.Done():
			t.Fatalf("sparkdap serve not ready: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("sparkdap serve never became ready")
	return nil
}

// kill9 kills the proxy the hard way: no cleanup of any kind.
func (p *faultProxy) kill9(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("sparkdap serve survived SIGKILL for 10s")
	}
}

// TestFaultProxyKilledWhileWorkersStopped: kill -9 the proxy while real
// debugpy workers sit at a breakpoint. pydevd resumes on EOF: every worker
// finishes with its full, correct result.
func TestFaultProxyKilledWhileWorkersStopped(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 2*time.Minute)
	p := startFaultProxy(t, ctx)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, true)
	var ws []*worker
	for id := 1; id <= 3; id++ {
		ws = append(ws, startWorker(t, ctx, p.proxy, id, workerOpts{}))
	}
	collectStops(t, ctx, c, ws, len(ws), true)
	p.kill9(t)
	for _, w := range ws {
		w.waitSuccess(t, ctx)
	}
}

// TestFaultIDEReconnects: the IDE goes away (politely, or its connection
// just drops) while workers are connected. A new IDE sees the same
// workers, sets breakpoints again, and they stop again.
func TestFaultIDEReconnects(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	for _, tt := range []struct {
		name  string
		leave func(ctx context.Context, c *dapclient.Client) error
	}{
		{"disconnect", func(ctx context.Context, c *dapclient.Client) error { return c.Disconnect(ctx, false) }},
		{"dropped connection", func(ctx context.Context, c *dapclient.Client) error { return c.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t, 2*time.Minute)
			p := startFaultProxy(t, ctx)
			first := dialIDE(t, ctx, p.IDE)
			attachMerged(t, ctx, first, true)
			gate := filepath.Join(t.TempDir(), "go")
			var ws []*worker
			for id := 1; id <= 2; id++ {
				ws = append(ws, startWorker(t, ctx, p.proxy, id, workerOpts{gate: gate}))
			}
			for _, w := range ws {
				w.waitLine(t, ctx, "CONNECTED")
			}
			if err := tt.leave(ctx, first); err != nil {
				t.Fatalf("first IDE leaving: %v", err)
			}
			// A dropped connection is noticed when the proxy reads its end;
			// a new IDE attaching before that is refused as a second one.
			for i := 0; !strings.Contains(p.Log(), "IDE detached"); i++ {
				if i == 500 {
					t.Fatal("the proxy never noticed the first IDE leaving")
				}
				time.Sleep(10 * time.Millisecond)
			}

			second := dialIDE(t, ctx, p.IDE)
			attachMerged(t, ctx, second, false)
			threads, err := second.Threads(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				found := false
				for _, th := range threads {
					found = found || strings.Contains(th.Name, fmt.Sprintf("pid %d", w.PID))
				}
				if !found {
					t.Fatalf("the new IDE does not see worker %d (pid %d): threads %+v", w.ID, w.PID, threads)
				}
			}
			script := workerScript(t)
			if err := setWorkerBreakpoint(ctx, second, script, testenv.MarkedLine(t, script, "")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			stops := collectStops(t, ctx, second, ws, len(ws), true)
			if _, err := second.SetBreakpoints(ctx, script); err != nil {
				t.Fatal(err)
			}
			for _, s := range stops {
				if err := second.Continue(ctx, s.threadID); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range ws {
				w.waitSuccess(t, ctx)
			}
			if n := countEvents(first, "stopped"); n != 0 {
				t.Errorf("the departed IDE got %d stopped events", n)
			}
		})
	}
}

// TestFaultExecutorDiesMidRequest: a worker is killed while the IDE waits
// for a slow evaluate in it. The IDE gets an error response at once (not
// after --request-timeout), and the other worker is still debuggable.
func TestFaultExecutorDiesMidRequest(t *testing.T) {
	testenv.SkipIfShort(t, "starts debugpy workers")
	python(t)
	ctx := testContext(t, 2*time.Minute)
	p := startFaultProxy(t, ctx, "--request-timeout", "90s")
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, true)
	ws := []*worker{startWorker(t, ctx, p.proxy, 1, workerOpts{}), startWorker(t, ctx, p.proxy, 2, workerOpts{})}
	stops := collectStops(t, ctx, c, ws, len(ws), true)
	victim, survivor := stops[0], stops[1]

	frames, err := c.StackTrace(ctx, victim.threadID)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Send(ctx, "evaluate", map[string]any{
		"expression": "__import__('time').sleep(30)", "frameId": frames[0].Id, "context": "repl"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the evaluate reach pydevd
	if err := syscall.Kill(victim.worker.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := pending.Wait(waitCtx)
	if err != nil {
		t.Fatalf("no answer to evaluate %v after its executor died: %v", time.Since(killed), err)
	}
	if resp.Success {
		t.Fatalf("evaluate in a killed worker succeeded: %s", resp.Body)
	}
	t.Logf("error response %v after kill -9: %q", time.Since(killed).Round(time.Millisecond), resp.Message)
	if !strings.Contains(resp.Message, "went away") {
		t.Errorf("error %q does not say the executor went away", resp.Message)
	}

	// The survivor is untouched.
	sframes, err := c.StackTrace(ctx, survivor.threadID)
	if err != nil {
		t.Fatalf("the surviving worker's stack: %v", err)
	}
	ev, err := c.Evaluate(ctx, sframes[0].Id, "value")
	if err != nil || ev.Result != fmt.Sprint(survivor.worker.value(0)) {
		t.Fatalf("evaluate in the surviving worker = %+v, %v", ev, err)
	}
	if _, err := c.SetBreakpoints(ctx, workerScript(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Continue(ctx, survivor.threadID); err != nil {
		t.Fatal(err)
	}
	survivor.worker.waitSuccess(t, ctx)
}

// TestFaultSparkJobSurvivesProxyKill: a real local-mode Spark job under
// `sparkdap submit` is stopped at a breakpoint in a --py-files module when
// the proxy is killed -9. The job completes with the same result as a plain
// run, and neither the job's nor its workers' output shows the token.
func TestFaultSparkJobSurvivesProxyKill(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	dir := t.TempDir()
	for _, f := range []string{"loans.py", "loanlib.py"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", "loans", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(dir, "loanlib.py")
	line := testenv.MarkedLine(t, lib, "loanlib-payment")

	p := startFaultProxy(t, ctx, "--root", dir)
	c := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, c, false)
	if bps, err := c.SetBreakpoints(ctx, lib, line); err != nil || len(bps) != 1 {
		t.Fatalf("setBreakpoints %s:%d = %+v, %v", lib, line, bps, err)
	}

	out := filepath.Join(dir, "result.json")
	job := exec.CommandContext(ctx, sparkdapBinary(t), "submit", "--proxy", p.Executors, "--partitions", "0", "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
		"--py-files", "loanlib.py", "loans.py", "--output", out)
	job.Dir = dir
	job.Env = append(os.Environ(), "SPARKDAP_TOKEN="+p.Token)
	job.WaitDelay = 10 * time.Second
	jobOut := &syncbuf.Buffer{}
	job.Stdout, job.Stderr = jobOut, jobOut
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	jobDone := make(chan error, 1)
	go func() { jobDone <- job.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("sparkdap submit output:\n%s", jobOut)
		}
	}()

	stopped := make(chan error, 1)
	go func() { _, err := c.StoppedEvent(ctx); stopped <- err }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("no stop in the Spark job: %v", err)
		}
	case err := <-jobDone:
		t.Fatalf("the job ended (%v) without stopping at %s:%d", err, lib, line)
	}
	t.Logf("the job's partition 0 is stopped at loanlib.py:%d; kill -9 the proxy", line)
	p.kill9(t)

	select {
	case err := <-jobDone:
		if err != nil {
			t.Fatalf("the job failed after the proxy was killed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the job did not finish after the proxy was killed")
	}
	got, want := readJSON(t, out), readJSON(t, filepath.Join("..", "workerwrap", "testdata", "loans.want.json"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job result after the proxy was killed:\n%v\nwant (plain run):\n%v", got, want)
	}
	if strings.Contains(jobOut.String(), p.Token) {
		t.Errorf("the access token appears in the job's (and its workers') output")
	}
}
