//go:build linux

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

	"github.com/sparkdap/sparkdap/admission"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// requirePyCharmSpark returns python3's path when pyspark and pydevd-pycharm
// are importable and Spark can run; otherwise the test is testenv.Missing.
func requirePyCharmSpark(t testing.TB) string {
	t.Helper()
	testenv.SkipIfShort(t, "runs a Spark job")
	py, _ := testenv.Spark(t, "pydevd_pycharm")
	return py
}

var executorPortRE = regexp.MustCompile(`executor port (\S+);`)

// pycharmJob is a real PySpark job (testdata/pycharm) debugged with
// pydevd-pycharm through `sparkdap serve --ide-kind pycharm`, with the test
// double of PyCharm's debug server in PyCharm's place. The developer's
// sources live in another directory than the copy Spark runs.
type pycharmJob struct {
	ide        *pycharmtest.Server
	local      string // the developer's copy of testdata/pycharm
	localMath  string
	capDir     string // the proxy's --capture-dir
	control    string // the proxy's --control socket
	line       int
	out        string
	serveErr   *syncbuf.Buffer
	submitOut  *syncbuf.Buffer
	submitDone chan error
	serve      *exec.Cmd
}

func startPyCharmJob(t testing.TB, ctx context.Context, master, partitions string) *pycharmJob {
	return startPyCharmScript(t, ctx, master, partitions, "pcjob.py")
}

// startPyCharmScript runs testdata/pycharm/<script> (same result as
// pcjob.py); submitFlags go to `sparkdap submit` before its --.
func startPyCharmScript(t testing.TB, ctx context.Context, master, partitions, script string, submitFlags ...string) *pycharmJob {
	t.Helper()
	return startPyCharmRun(t, ctx, master, partitions, script, nil, submitFlags)
}

// startPyCharmScriptServe is startPyCharmScript with more flags for serve.
func startPyCharmScriptServe(t testing.TB, ctx context.Context, master, partitions, script string, serveArgs ...string) *pycharmJob {
	t.Helper()
	return startPyCharmRun(t, ctx, master, partitions, script, serveArgs, nil)
}

// startPyCharmRun starts serve (with serveArgs) and the job (submitFlags
// before submit's --).
func startPyCharmRun(t testing.TB, ctx context.Context, master, partitions, script string, serveArgs, submitFlags []string) *pycharmJob {
	t.Helper()
	return startPyCharmRunEnv(t, ctx, nil, master, partitions, script, serveArgs, submitFlags)
}

// startPyCharmRunEnv is startPyCharmRun with submitEnv added to the job's
// environment (spark-submit's, and so its local workers'): a test that
// runs in parallel cannot set the process's own.
func startPyCharmRunEnv(t testing.TB, ctx context.Context, submitEnv []string, master, partitions, script string, serveArgs, submitFlags []string) *pycharmJob {
	t.Helper()
	py := requirePyCharmSpark(t)
	bin := sparkdapBinary(t)
	local, deploy := t.TempDir(), t.TempDir()
	for _, f := range []string{script, "pcmath.py"} {
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(local, f))
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(deploy, f))
	}
	j := &pycharmJob{local: local, localMath: filepath.Join(local, "pcmath.py"), capDir: filepath.Join(t.TempDir(), "captures"), serveErr: &syncbuf.Buffer{},
		submitOut: &syncbuf.Buffer{}, submitDone: make(chan error, 1)}
	j.line = testenv.MarkedLine(t, j.localMath, "pcmath-scale")

	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	ide.Log = func(dir string, m pycharm.Message) { t.Logf("pycharm %s %s", dir, m) }
	j.ide = ide

	sockDir := testenv.SocketDir(t)
	j.control = filepath.Join(sockDir, "c.sock")

	// The proxy.
	serve := exec.CommandContext(ctx, bin, append([]string{"serve", "--ide-kind", "pycharm", "--pycharm", ide.Addr(), "--control", j.control,
		"--executors", "127.0.0.1:0", "--token", testToken, "--root", local, "--capture-dir", j.capDir, "--log-level", "debug"}, serveArgs...)...)
	serve.Stderr = j.serveErr
	serve.WaitDelay = 5 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	j.serve = serve
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
		t.Logf("sparkdap serve log:\n%s", j.serveErr.String())
	})
	var executors string
	for deadline := time.Now().Add(30 * time.Second); executors == ""; time.Sleep(50 * time.Millisecond) {
		if m := executorPortRE.FindStringSubmatch(j.serveErr.String()); m != nil {
			executors = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not report its executor port:\n%s", j.serveErr.String())
		}
	}

	// The job, from the deploy directory.
	j.out = filepath.Join(t.TempDir(), "result.json")
	submitArgs := append([]string{"submit", "--ide-kind", "pycharm", "--partitions", partitions, "--proxy", executors}, submitFlags...)
	submit := exec.CommandContext(ctx, bin, append(submitArgs, "--", "--master", master, "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
		"--conf", "spark.pyspark.python="+py, "--py-files", filepath.Join(deploy, "pcmath.py"),
		filepath.Join(deploy, script), j.out)...)
	submit.Dir = deploy
	submit.Env = append(append(os.Environ(), "SPARKDAP_TOKEN="+testToken), submitEnv...)
	submit.Stdout, submit.Stderr = j.submitOut, j.submitOut
	submit.WaitDelay = 10 * time.Second
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.submitDone <- submit.Wait() }()
	t.Cleanup(func() {
		if submit.ProcessState == nil {
			_ = submit.Process.Kill()
			<-j.submitDone
		}
		t.Logf("sparkdap submit output:\n%s", j.submitOut.String())
	})

	acceptCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := ide.Accept(acceptCtx); err != nil {
		t.Fatalf("the proxy never connected to the PyCharm double: %v\nsubmit:\n%s", err, j.submitOut.String())
	}
	return j
}

// nextSuspend waits for the next breakpoint suspend and returns its thread.
func (j *pycharmJob) nextSuspend(t testing.TB, ctx context.Context) pycharmtest.Thread {
	t.Helper()
	suspendCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	suspend, err := j.ide.WaitFor(suspendCtx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdThreadSuspend })
	if err != nil {
		t.Fatalf("no suspend: %v\nsubmit:\n%s", err, j.submitOut.String())
	}
	threads, _, err := pycharmtest.ParseXML(suspend.Payload)
	if err != nil || len(threads) != 1 || len(threads[0].Frames) == 0 {
		t.Fatalf("suspend payload: %v %+v", err, threads)
	}
	return threads[0]
}

// finish waits for the job and checks its result and what PyCharm saw.
func (j *pycharmJob) finish(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case err := <-j.submitDone:
		if err != nil {
			t.Fatalf("job failed: %v\n%s", err, j.submitOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("job did not finish after resume")
	}
	b, err := os.ReadFile(j.out)
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
	// The proxy sends each breakpoint to every path the file may have on
	// the executor; the paths it does not have must not make pydevd
	// complain into the job's output.
	if lines := grepLines(j.submitOut.String(), "does not exist"); lines != "" {
		t.Errorf("the job's output has pydevd's complaints about breakpoint paths:\n%s", lines)
	}
	j.checkPyCharmView(t)
}

// checkPyCharmView: nothing PyCharm would log or drop, the session kept,
// no sparkdap thread shown.
func (j *pycharmJob) checkPyCharmView(t testing.TB) {
	t.Helper()
	if a := j.ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
	if st := j.ide.Strays(); len(st) > 0 {
		t.Errorf("PyCharm would drop: %v", st)
	}
	if j.ide.Dropped() {
		t.Errorf("PyCharm dropped the session (CMD_EXIT reached it)")
	}
	for id, name := range j.ide.Threads() {
		if strings.Contains(name, "sparkdap-") {
			t.Errorf("PyCharm shows sparkdap's own thread %s %q", id, name)
		}
	}
}

// TestPyCharmSparkBreakpoint: the breakpoint is set on the local path and
// the suspend comes back with it, labelled with its task.
func TestPyCharmSparkBreakpoint(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 5*time.Minute)
	// Partition 1 only.
	j := startPyCharmJob(t, ctx, "local[2]", "1")
	ide, localMath, line := j.ide, j.localMath, j.line

	// PyCharm's side: handshake, breakpoint, run.
	version, err := ide.Start(ctx, pycharmtest.Breakpoint{File: localMath, Line: line, Func: "scale"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	t.Logf("pydevd version through the proxy: %q", version)
	if version == "sparkdap" {
		t.Errorf("CMD_VERSION was answered by the proxy's fallback, not by the executor's pydevd")
	}
	th := j.nextSuspend(t, ctx)
	top := th.Frames[0]
	if top.File != localMath || top.Line != line {
		t.Errorf("suspended at %s:%d, want the local path %s:%d", top.File, top.Line, localMath, line)
	}
	if th.StopReason != fmt.Sprint(pycharm.CmdSetBreak) {
		t.Errorf("stop reason %q, want %d (breakpoint)", th.StopReason, pycharm.CmdSetBreak)
	}
	// PyCharm cannot mark a frame as a library frame: the wrapper's and
	// PySpark daemon's frames under every stop are not sent at all.
	for _, f := range th.Frames {
		if admission.IsPlumbingFile(f.File) {
			t.Errorf("PyCharm was shown a frame of %s (%s line %d) under the stop", f.File, f.Name, f.Line)
		}
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

	// "!capture" in PyCharm's Debug Console: the proxy captures
	// scale(20) through pydevd-pycharm's line protocol; replay runs it
	// from the local source, and after a local fix runs the fix.
	out, errOut, err := ide.ConsoleExec(ctx, th.ID, top.ID, "!capture")
	if err != nil || errOut != "" || !strings.HasPrefix(out, "captured scale (") {
		t.Fatalf("!capture: stdout %q stderr %q err %v", out, errOut, err)
	}
	_, capPath, _ := strings.Cut(strings.TrimSpace(out), "replay: sparkdap replay ")
	capPath, _, _ = strings.Cut(capPath, "\n") // notes follow
	if filepath.Dir(capPath) != j.capDir {
		t.Fatalf("!capture wrote %q, want a file in %s", capPath, j.capDir)
	}
	var doc struct{ Format, LocalFile, Data, Code string }
	if b, err := os.ReadFile(capPath); err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("capture file %s: %v", capPath, err)
	}
	if doc.Format != "sparkdap-capture/3" || doc.LocalFile != localMath || doc.Data == "" || doc.Code == "" {
		t.Errorf("capture file: %+v", doc)
	}
	// pcmath is a module the job imports: replay loads scale from the
	// local copy of its file, as the proxy mapped it.
	if rc, o := replay(t, ctx, capPath); rc != 0 || !strings.Contains(o, "returned 40") ||
		!strings.Contains(o, "using scale (a def) from "+localMath+":") || !strings.Contains(o, "(your local source)") {
		t.Errorf("replay of scale(20): status %d, output:\n%s", rc, o)
	}
	// `sparkdap capture` against the PyCharm-mode proxy: it lists the
	// stopped worker by pid, and captures its innermost frame.
	pid, _ := pycharm.ThreadPID(th.ID)
	cli := func(args ...string) string {
		t.Helper()
		o, err := exec.CommandContext(ctx, sparkdapBinary(t), append([]string{"capture", "--control", j.control}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sparkdap capture %q: %v\n%s", args, err, o)
		}
		return string(o)
	}
	if o := cli(); !strings.Contains(o, fmt.Sprintf("executor %d  [", pid)) || !strings.Contains(o, "=> #0 scale  "+localMath) {
		t.Errorf("sparkdap capture lists:\n%s", o)
	}
	if o := cli("--executor", fmt.Sprint(pid)); !strings.HasPrefix(o, "captured scale (") || !strings.Contains(o, "file: "+j.capDir) {
		t.Errorf("sparkdap capture --executor %d:\n%s", pid, o)
	}
	// The frame's variables still show: the capture left the stop as it was.
	if _, err := ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0"); err != nil {
		t.Errorf("get frame after the capture: %v", err)
	}

	// Remove the breakpoint and resume: the job finishes.
	if err := ide.RemoveBreakpoint(localMath, line); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)
	// The developer fixes scale locally: replay runs the fix.
	src, err := os.ReadFile(localMath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(localMath, []byte(strings.Replace(string(src), "factor = 2", "factor = 3", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, o := replay(t, ctx, capPath); rc != 0 || !strings.Contains(o, "returned 60") {
		t.Errorf("replay after the local fix: status %d, output:\n%s", rc, o)
	}
	// Only the selected partition's worker attached.
	attached := 0
	sc := bufio.NewScanner(strings.NewReader(j.serveErr.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "attached (") {
			attached++
		}
	}
	if attached != 1 {
		t.Errorf("%d workers attached, want 1 (partition 1)", attached)
	}
}

// TestPyCharmSparkReusedWorker: one Python worker (local[1], worker reuse
// on) runs both partitions, both selected, with PyCharm's default suspend
// policy ALL. PyCharm names a thread only from CMD_THREAD_CREATE: at the
// second task's stop the same thread must carry the second task's label.
// And the wrapper's own threads never show.
func TestPyCharmSparkReusedWorker(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 5*time.Minute)
	j := startPyCharmJob(t, ctx, "local[1]", "0,1")
	// Partition 0 holds 0..19, partition 1 20..39: stop at each one's first.
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale",
		Condition: "x in (0, 20)"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	var first string
	for i, want := range []string{"partition 0", "partition 1"} {
		th := j.nextSuspend(t, ctx)
		name := j.ide.ThreadName(th.ID)
		t.Logf("stop %d: thread %s shown as %q", i, th.ID, name)
		if !strings.Contains(name, want) {
			t.Errorf("stop %d: PyCharm shows the thread as %q, want the label of %s", i, name, want)
		}
		if i == 0 {
			first = th.ID
		} else if th.ID != first {
			t.Errorf("the second task ran in another thread (%s, then %s): the worker was not reused", first, th.ID)
		}
		j.checkPyCharmView(t)
		if _, err := j.ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
			t.Fatal(err)
		}
	}
	j.finish(t, ctx)
}

// TestPyCharmSparkLambdaInDriverFunction: a breakpoint on a lambda inside
// the driver's main(). PyCharm names main as the breakpoint's function;
// pydevd matches it against the frame's, and the executor runs <lambda>.
func TestPyCharmSparkLambdaInDriverFunction(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	ctx := testContext(t, 5*time.Minute)
	j := startPyCharmScript(t, ctx, "local[2]", "0", "pclambda.py")
	file := filepath.Join(j.local, "pclambda.py")
	line := testenv.MarkedLine(t, file, "pclambda")
	if _, err := j.ide.Start(ctx, pycharmtest.Breakpoint{File: file, Line: line, Func: "main"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	th := j.nextSuspend(t, ctx)
	if top := th.Frames[0]; top.File != file || top.Line != line {
		t.Errorf("suspended at %s:%d, want %s:%d", top.File, top.Line, file, line)
	}
	if err := j.ide.RemoveBreakpoint(file, line); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)
}
