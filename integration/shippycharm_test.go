//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// shippedPyCharmBuild is the PyCharm build whose pydevd-pycharm the test
// ships: one of requirements-debuggers.txt's.
const shippedPyCharmBuild = "253.33813.30"

// TestPyCharmSparkShipsPydevdPyCharm: a real local-mode job under
// `sparkdap submit --ide-kind pycharm --pycharm-build BUILD`, whose
// executors' Python has no pydevd-pycharm (nor debugpy), stops at a
// breakpoint set from the PyCharm double, through the PyCharm front end,
// with the pydevd-pycharm of that build that submit fetched from PyPI and
// shipped: the executor log says so in one line and nothing about Cython
// speedups, no frame shows the shipped debugger's files, the result is the
// plain one, and the daemon removes what it unpacked as it exits.
func TestPyCharmSparkShipsPydevdPyCharm(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 6*time.Minute)
	executorsPython := pythonWithoutDebugpy(t)
	if out, err := exec.Command(executorsPython, "-c", "import importlib.util; assert importlib.util.find_spec('pydevd_pycharm') is None and importlib.util.find_spec('pydevd') is None").CombinedOutput(); err != nil {
		t.Fatalf("the executors' Python has pydevd-pycharm: %v\n%s", err, out)
	}
	tmp := t.TempDir() // the executors' TMPDIR, where the daemon unpacks
	bin := sparkdapBinary(t)
	local, deploy := t.TempDir(), t.TempDir()
	for _, f := range []string{"pcjob.py", "pcmath.py"} {
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(local, f))
		copyFile(t, filepath.Join("testdata", "pycharm", f), filepath.Join(deploy, f))
	}
	j := &pycharmJob{local: local, localMath: filepath.Join(local, "pcmath.py"), serveErr: &syncbuf.Buffer{},
		submitOut: &syncbuf.Buffer{}, submitDone: make(chan error, 1)}
	j.line = testenv.MarkedLine(t, j.localMath, "pcmath-scale")

	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	ide.Log = func(dir string, m pycharm.Message) { t.Logf("pycharm %s %s", dir, m) }
	j.ide = ide

	serve := exec.CommandContext(ctx, bin, "serve", "--ide-kind", "pycharm", "--pycharm", ide.Addr(),
		"--executors", "127.0.0.1:0", "--token", testToken, "--root", local, "--log-level", "debug")
	serve.Stderr = j.serveErr
	serve.WaitDelay = 5 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
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

	j.out = filepath.Join(t.TempDir(), "result.json")
	submit := exec.CommandContext(ctx, bin, "submit", "--ide-kind", "pycharm", "--pycharm-build", shippedPyCharmBuild,
		"--partitions", "1", "--proxy", executors, "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
		"--py-files", filepath.Join(deploy, "pcmath.py"), filepath.Join(deploy, "pcjob.py"), j.out)
	submit.Dir = deploy
	submit.Env = append(os.Environ(), "SPARKDAP_TOKEN="+testToken, "TMPDIR="+tmp,
		"PYSPARK_PYTHON="+executorsPython, "PYSPARK_DRIVER_PYTHON="+python(t))
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
	// Fetching the sdist with pip and building the zip comes first.
	acceptCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := ide.Accept(acceptCtx); err != nil {
		t.Fatalf("the proxy never connected to the PyCharm double: %v\nsubmit:\n%s", err, j.submitOut.String())
	}
	if _, err := ide.Start(ctx, pycharmtest.Breakpoint{File: j.localMath, Line: j.line, Func: "scale"}); err != nil {
		t.Fatalf("handshake: %v", err)
	}

	th := j.nextSuspend(t, ctx)
	top := th.Frames[0]
	if top.File != j.localMath || top.Line != j.line {
		t.Fatalf("suspended at %s:%d, want the local path %s:%d", top.File, top.Line, j.localMath, j.line)
	}
	for _, f := range th.Frames {
		if strings.Contains(f.File, "sparkdap-debugger-") || strings.Contains(f.File, "pydevd_pycharm") {
			t.Errorf("frame %s shows the shipped debugger's file %s", f.Name, f.File)
		}
	}
	frame, err := ide.Request(ctx, pycharm.CmdGetFrame, th.ID, top.ID, "FRAME", "0")
	if err != nil {
		t.Fatalf("get frame: %v", err)
	}
	_, vars, err := pycharmtest.ParseXML(frame.Payload)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	// Partition 1 holds 20..39: the first element to stop is 20.
	if !matrixValue(got["factor"], 2) || !matrixValue(got["x"], 20) {
		t.Errorf("frame variables %v: want x = 20 and factor = 2", got)
	}
	out, errOut, err := ide.ConsoleExec(ctx, th.ID, top.ID, "import pydevd_pycharm, _pydevd_bundle.pydevd_trace_dispatch as td; "+
		"print(pydevd_pycharm.__file__, pydevd_pycharm.__version__, td.use_cython)")
	if err != nil || errOut != "" {
		t.Fatalf("console: stdout %q stderr %q err %v", out, errOut, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	loaded := strings.Fields(lines[len(lines)-1])
	if len(loaded) != 3 || !strings.HasPrefix(loaded[0], filepath.Join(tmp, "sparkdap-debugger-")) ||
		!strings.Contains(loaded[0], "/pydevd_pycharm.egg/") || loaded[1] != shippedPyCharmBuild {
		t.Errorf("the worker's pydevd_pycharm is %q, want %s's unpacked under $TMPDIR", loaded, shippedPyCharmBuild)
	}
	// Pure Python: the Cython speedups are not shipped, and pydevd knows.
	if len(loaded) == 3 && loaded[2] != "NO" {
		t.Errorf("pydevd's trace dispatch: use_cython %q, want NO", loaded[2])
	}
	if err := ide.RemoveBreakpoint(j.localMath, j.line); err != nil {
		t.Fatal(err)
	}
	if _, err := ide.Send(pycharm.CmdThreadRun, th.ID); err != nil {
		t.Fatal(err)
	}
	j.finish(t, ctx)

	log := j.submitOut.String()
	sparkdapLines := regexp.MustCompile(`(?m)^sparkdap: \[pid \d+\] .*$`).FindAllString(log, -1)
	if len(sparkdapLines) != 1 || !strings.Contains(sparkdapLines[0],
		"using pydevd-pycharm "+shippedPyCharmBuild+" shipped with the job (this Python has no pydevd-pycharm)") {
		t.Errorf("executor log's sparkdap lines %q: want one, saying the shipped pydevd-pycharm is used and why", sparkdapLines)
	}
	if l := grepLines(strings.ToLower(log), "cython"); l != "" {
		t.Errorf("the job's output speaks of Cython speedups:\n%s", l)
	}
	if l := grepLines(log, "speedups"); l != "" {
		t.Errorf("the job's output speaks of speedups:\n%s", l)
	}
	// pydevd's attach helper, which it loads at every attach on Python
	// 3.11 and older, ships too.
	if l := grepLines(log, "to exist"); l != "" {
		t.Errorf("pydevd misses a file of the shipped copy:\n%s", l)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "sparkdap-debugger-*"))
	if len(left) != 0 {
		t.Errorf("the daemon left %v behind", left)
	}
}
