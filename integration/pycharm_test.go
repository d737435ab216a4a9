package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/internal/testenv"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/pycharm/pycharmtest"
)

// requirePyCharmSpark returns python3's path when pyspark and pydevd-pycharm
// are importable and Spark can run; otherwise the test is testenv.Missing.
func requirePyCharmSpark(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping Spark job in -short mode")
	}
	py, _ := testenv.Spark(t, "pydevd_pycharm")
	return py
}

var executorPortRE = regexp.MustCompile(`executor port (\S+);`)

// TestPyCharmSparkBreakpoint runs a real PySpark job whose executor code is
// debugged with pydevd-pycharm through `sparkdap serve --ide-kind pycharm`,
// with the test double of PyCharm's debug server in PyCharm's place. The
// developer's sources live in another directory than the copy Spark runs:
// the breakpoint is set on the local path and the suspend comes back with
// it.
func TestPyCharmSparkBreakpoint(t *testing.T) {
	py := requirePyCharmSpark(t)
	bin := sparkdapBinary(t)
	ctx := testContext(t, 5*time.Minute)

	local, deploy := t.TempDir(), t.TempDir()
	for _, f := range []string{"pcjob.py", "pcmath.py"} {
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(local, f))
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(deploy, f))
	}
	localMath := filepath.Join(local, "pcmath.py")
	line := testenv.MarkedLine(t, localMath, "pcmath-scale")

	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ide.Close()
	ide.Log = func(dir string, m pycharm.Message) { t.Logf("pycharm %s %s", dir, m) }

	// The proxy.
	serveErr := &syncbuf.Buffer{}
	serve := exec.CommandContext(ctx, bin, "serve", "--ide-kind", "pycharm", "--pycharm", ide.Addr(),
		"--executors", "127.0.0.1:0", "--token", testToken, "--root", local, "--log-level", "debug")
	serve.Stderr = serveErr
	serve.WaitDelay = 5 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
		t.Logf("sparkdap serve log:\n%s", serveErr.String())
	}()
	var executors string
	for deadline := time.Now().Add(30 * time.Second); executors == ""; time.Sleep(50 * time.Millisecond) {
		if m := executorPortRE.FindStringSubmatch(serveErr.String()); m != nil {
			executors = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not report its executor port:\n%s", serveErr.String())
		}
	}

	// The job: partition 1 only, from the deploy directory.
	out := filepath.Join(t.TempDir(), "result.json")
	submitOut := &syncbuf.Buffer{}
	submit := exec.CommandContext(ctx, bin, "submit", "--ide", "pycharm", "--partitions", "1", "--proxy", executors,
		"--", "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
		"--conf", "spark.pyspark.python="+py, "--py-files", filepath.Join(deploy, "pcmath.py"),
		filepath.Join(deploy, "pcjob.py"), out)
	submit.Dir = deploy
	submit.Env = append(os.Environ(), "SPARKDAP_TOKEN="+testToken)
	submit.Stdout, submit.Stderr = submitOut, submitOut
	submit.WaitDelay = 10 * time.Second
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	submitDone := make(chan error, 1)
	go func() { submitDone <- submit.Wait() }()
	defer func() {
		if submit.ProcessState == nil {
			_ = submit.Process.Kill()
			<-submitDone
		}
		t.Logf("sparkdap submit output:\n%s", submitOut.String())
	}()

	// PyCharm's side: accept the proxy, handshake, breakpoint, run.
	acceptCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := ide.Accept(acceptCtx); err != nil {
		t.Fatalf("the proxy never connected to the PyCharm double: %v\nsubmit:\n%s", err, submitOut.String())
	}
	version, err := ide.Handshake(ctx)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	t.Logf("pydevd version through the proxy: %q", version)
	if version == "sparkdap" {
		t.Errorf("CMD_VERSION was answered by the proxy's fallback, not by the executor's pydevd")
	}
	if err := ide.SetBreakpoint(1, localMath, line); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Send(pycharm.CmdRun); err != nil {
		t.Fatal(err)
	}

	suspendCtx, cancelSuspend := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelSuspend()
	suspend, err := ide.WaitFor(suspendCtx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend })
	if err != nil {
		t.Fatalf("no suspend: %v\nsubmit:\n%s", err, submitOut.String())
	}
	threads, _, err := pycharmtest.ParseXML(suspend.Payload)
	if err != nil || len(threads) != 1 || len(threads[0].Frames) == 0 {
		t.Fatalf("suspend payload: %v %+v", err, threads)
	}
	th := threads[0]
	top := th.Frames[0]
	if top.File != localMath || top.Line != line {
		t.Errorf("suspended at %s:%d, want the local path %s:%d", top.File, top.Line, localMath, line)
	}
	if th.StopReason != fmt.Sprint(pycharm.CmdSetBreak) {
		t.Errorf("stop reason %q, want %d (breakpoint)", th.StopReason, pycharm.CmdSetBreak)
	}

	// The thread was announced with the task's label.
	created, err := ide.WaitFor(ctx, func(m pycharm.Message) bool {
		if m.ID != pycharm.CmdThreadCreate {
			return false
		}
		ts, _, _ := pycharmtest.ParseXML(m.Payload)
		return len(ts) == 1 && ts[0].ID == th.ID
	})
	if err != nil {
		t.Errorf("no CMD_THREAD_CREATE for %s: %v", th.ID, err)
	} else {
		ts, _, _ := pycharmtest.ParseXML(created.Payload)
		if !strings.Contains(ts[0].Name, "partition 1") || !strings.HasPrefix(ts[0].Name, "[") {
			t.Errorf("thread name %q lacks the task label", ts[0].Name)
		}
		t.Logf("thread %s: %q", th.ID, ts[0].Name)
	}

	// The frame's variables.
	frameVars, err := ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0")
	if err != nil {
		t.Fatalf("get frame: %v", err)
	}
	_, vars, err := pycharmtest.ParseXML(frameVars.Payload)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	if !strings.HasSuffix(got["factor"], "2") || got["x"] == "" {
		t.Errorf("frame variables %v: want x and factor=2", got)
	}
	t.Logf("variables: %v", got)

	// Partition 1 holds 20..39: the first element to stop is 20.
	if !strings.HasSuffix(got["x"], " 20") && !strings.HasSuffix(got["x"], ":20") {
		t.Logf("note: x = %q", got["x"])
	}

	// Remove the breakpoint and resume: the job finishes.
	if err := ide.RemoveBreakpoint(1, localMath); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-submitDone:
		if err != nil {
			t.Fatalf("job failed: %v\n%s", err, submitOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("job did not finish after resume")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("job wrote no result: %v", err)
	}
	var res struct{ Sum, Count int }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Sum != 1560 || res.Count != 40 {
		t.Errorf("job result %+v, want sum 1560 count 40", res)
	}
	// Only the selected partition's worker attached.
	attached := 0
	sc := bufio.NewScanner(strings.NewReader(serveErr.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "attached (") {
			attached++
		}
	}
	if attached != 1 {
		t.Errorf("%d workers attached, want 1 (partition 1)", attached)
	}
}
