//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// pythonWithoutDebugpy returns an interpreter for the executors whose
// Python has no debugpy at all: the tests' Python run with -S (no
// site-packages, so no debugpy), with only pyspark and py4j put back on
// its path through a directory of their own. It checks that debugpy is
// not importable there.
func pythonWithoutDebugpy(t testing.TB) string {
	t.Helper()
	py := python(t)
	out, err := exec.Command(py, "-c", "import pyspark, py4j, os; print(os.path.dirname(pyspark.__file__)); print(os.path.dirname(py4j.__file__))").Output()
	if err != nil {
		t.Fatalf("find pyspark: %v", err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if err := os.Symlink(pkg, filepath.Join(lib, filepath.Base(pkg))); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "python-without-debugpy")
	body := "#!/bin/sh\nexport PYTHONPATH=\"" + lib + "${PYTHONPATH:+:$PYTHONPATH}\"\nexec \"" + py + "\" -S \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	check := exec.Command(script, "-c", "import importlib.util, pyspark.daemon, pyspark.worker; assert importlib.util.find_spec('debugpy') is None")
	check.Env = append(os.Environ(), "PYTHONPATH=")
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the debugpy-free Python is not: %v\n%s", err, out)
	}
	return script
}

// TestSparkShipsDebuggerToExecutorsWithoutOne: a real local-mode job
// under `sparkdap submit` (--ship-debugger auto, the default), whose
// executors' Python has no debugpy ("none") or one the wrapper calls
// unusable ("unusable": its pydevd lacks PyDB.do_wait_suspend), stops at a
// breakpoint with the task's real values, using the debugpy wheel that
// submit shipped; the executor log says so in one line, no frame shows
// the shipped debugger's files, the result is the plain one, and the
// daemon removes what it unpacked as it exits.
func TestSparkShipsDebuggerToExecutorsWithoutOne(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	for _, own := range []string{"none", "unusable"} {
		t.Run(own, func(t *testing.T) {
			ctx := testContext(t, 6*time.Minute)
			tmp := t.TempDir()
			env := []string{"TMPDIR=" + tmp}
			why := "this Python has no debugpy"
			if own == "none" {
				env = append(env, "PYSPARK_PYTHON="+pythonWithoutDebugpy(t), "PYSPARK_DRIVER_PYTHON="+python(t))
			} else {
				// Local mode: workers inherit spark-submit's PYTHONPATH, so
				// the crippled copy shadows site-packages' debugpy.
				env = append(env, "PYTHONPATH="+debugpyWithout(t, "do_wait_suspend"))
				why = "lacks PyDB.do_wait_suspend (for the lease on stops)"
			}

			// The developer's copy (src) and the one Spark runs (dir).
			src, dir := t.TempDir(), t.TempDir()
			job, srcJob := filepath.Join(dir, "four_partitions.py"), filepath.Join(src, "four_partitions.py")
			copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
			copyFile(t, filepath.Join("testdata", "four_partitions.py"), srcJob)
			p := startProxy(t, ctx, "--root", src)
			line := testenv.MarkedLine(t, job, "square")
			ide := attachAtLine(t, ctx, p, srcJob, line)
			out := filepath.Join(dir, "out.json")
			r := startSpark(t, ctx, dir, append(env, "SPARKDAP_TOKEN="+p.Token), sparkdapBinary(t),
				"submit", "--proxy", p.Executors, "--partitions", "1", "--", "--master", "local[2]", job, out)

			s := nextStop(t, ctx, ide, r)
			if s.path != srcJob || s.line != line {
				t.Errorf("stopped at %s:%d, want %s:%d", s.path, s.line, srcJob, line)
			}
			if x := s.locals["x"]; x < "10" || x > "19" || len(x) != 2 {
				t.Errorf("x = %q, want one of partition 1's values (10..19)", x)
			}
			if r, err := ide.Evaluate(ctx, s.frameID, "__import__('debugpy').__file__"); err != nil {
				t.Errorf("evaluate debugpy's file: %v", err)
			} else if !strings.Contains(r.Result, filepath.Join(tmp, "sparkdap-debugger-")) {
				t.Errorf("the worker's debugpy is %s, not the one unpacked under $TMPDIR", r.Result)
			}
			for _, f := range s.frames {
				if f.Source != nil && strings.Contains(f.Source.Path, "sparkdap-debugger-") {
					t.Errorf("frame %s shows the shipped debugger's file %s", f.Name, f.Source.Path)
				}
			}
			if _, err := ide.SetBreakpoints(ctx, srcJob); err != nil {
				t.Fatal(err)
			}
			if err := ide.Continue(ctx, s.threadID); err != nil {
				t.Fatal(err)
			}
			r.wait(t, ctx)
			if got := readJSON(t, out)["total"]; got != float64(20540) {
				t.Errorf("total = %v, want 20540 (the plain result)", got)
			}
			lines := regexp.MustCompile(`(?m)^sparkdap: \[pid \d+\] .*$`).FindAllString(r.out.String(), -1)
			if len(lines) != 1 || !strings.Contains(lines[0], "using debugpy 1.8.21 shipped with the job (") ||
				!strings.Contains(lines[0], why) {
				t.Errorf("executor log's sparkdap lines %q: want one, saying the shipped debugpy is used and why", lines)
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "sparkdap-debugger-*"))
			if len(left) != 0 {
				t.Errorf("the daemon left %v behind", left)
			}
		})
	}
}

// TestSparkConnectShipsDebuggerToWorkersWithoutOne: a Connect server
// started with the script `sparkdap conf --connect` prints, whose workers'
// debugpy is one the wrapper calls unusable, stops in a client's UDF
// through the debugpy `sparkdap wrap` put next to the wrapper.
func TestSparkConnectShipsDebuggerToWorkersWithoutOne(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Spark Connect server")
	ce := requireConnect(t)
	ctx := testContext(t, 8*time.Minute)
	l := newConnectLayout(t)
	p := startProxy(t, ctx, "--root", filepath.Dir(l.client))
	line := testenv.MarkedLine(t, l.client, "connect-udf")
	ide := attachAtLine(t, ctx, p, l.client, line)
	script := connectScript(t, ctx, l, "--proxy", p.Executors, "--partitions", "0")
	if _, err := os.Stat(filepath.Join(l.wrapDir, "debugpy-1.8.21-py2.py3-none-any.whl")); err != nil {
		t.Fatalf("sparkdap wrap put no debugger next to the wrapper: %v", err)
	}
	server := startConnectServer(t, ctx, ce, l.server,
		[]string{"SPARKDAP_TOKEN=" + p.Token, "PYTHONPATH=" + debugpyWithout(t, "do_wait_suspend")}, "bash", script)
	out := filepath.Join(t.TempDir(), "debugged.json")
	job := startSpark(t, ctx, filepath.Dir(l.client), ce.env, ce.py, l.client, server.url, out)
	s := nextStop(t, ctx, ide, job)
	if s.path != l.client || s.line != line {
		t.Fatalf("stopped at %s:%d (%s), want the client's %s:%d", s.path, s.line, s.function, l.client, line)
	}
	if _, ok := s.locals["x"]; !ok {
		t.Errorf("no x among the UDF's locals %v", s.locals)
	}
	if _, err := ide.SetBreakpoints(ctx, l.client); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	job.wait(t, ctx)
	if !strings.Contains(server.out.String(), "using debugpy 1.8.21 shipped with the job (debugpy ") {
		t.Errorf("the server's workers never said they use the shipped debugpy")
	}
}

// TestYARNShipsDebuggerToExecutorsWithoutOne: a client-mode job on a real
// YARN under `sparkdap submit`, whose containers' Python has no debugpy,
// stops at a breakpoint through the debugpy shipped in --py-files, which
// the container finds next to the wrapper in its working directory. The
// containers' Python is either the nodes' own ("python": the debugpy-free
// interpreter as PYSPARK_PYTHON) or a packed environment without debugpy
// ("packed": a plain venv, archived and shipped with --archives, chosen by
// spark.pyspark.python, as the YARN recipe does).
func TestYARNShipsDebuggerToExecutorsWithoutOne(t *testing.T) {
	testenv.SkipIfShort(t, "starts YARN and a Spark job on it")
	for _, form := range []string{"python", "packed"} {
		t.Run(form, func(t *testing.T) { yarnWithoutDebugpy(t, form) })
	}
}

// packedWithoutDebugpy archives a plain venv of py (no packages, so no
// debugpy; pyspark comes from PYSPARK_ARCHIVES_PATH) as a packed
// environment for --archives.
func packedWithoutDebugpy(t testing.TB, py string) string {
	t.Helper()
	dir := t.TempDir()
	env := filepath.Join(dir, "pyenv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", env).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v\n%s", err, out)
	}
	if out, err := exec.Command(filepath.Join(env, "bin", "python"), "-c",
		"import importlib.util, sys; assert importlib.util.find_spec('debugpy') is None, sys.path").CombinedOutput(); err != nil {
		t.Fatalf("the venv has a debugpy: %v\n%s", err, out)
	}
	archive := filepath.Join(dir, "pyenv.tar.gz")
	if out, err := exec.Command("tar", "-czf", archive, "-C", env, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return archive
}

func yarnWithoutDebugpy(t testing.TB, form string) {
	py := python(t)
	sparkHome, _ := requireStandalone(t, py)
	ctx := testContext(t, 10*time.Minute)
	y := sharedYARN(t)
	confDir := y.smallSparkConf(t, sparkHome)
	src, dir := t.TempDir(), t.TempDir()
	job, srcJob := filepath.Join(dir, "four_partitions.py"), filepath.Join(src, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), srcJob)
	line := testenv.MarkedLine(t, job, "square")
	p := startProxy(t, ctx, "--root", src)
	ide := attachAtLine(t, ctx, p, srcJob, line)
	env := []string{"HADOOP_CONF_DIR=" + y.ConfDir, "YARN_CONF_DIR=" + y.ConfDir, "SPARK_CONF_DIR=" + confDir,
		"SPARK_HOME=" + sparkHome, "SPARK_LOCAL_IP=127.0.0.1", "PYSPARK_ARCHIVES_PATH=local:" + yarnPySparkOnly(t, py),
		"PYSPARK_DRIVER_PYTHON=" + py, "SPARKDAP_TOKEN=" + p.Token}
	var sparkArgs []string
	switch form {
	case "python":
		env = append(env, "PYSPARK_PYTHON="+pythonWithoutDebugpy(t))
	case "packed":
		sparkArgs = []string{"--archives", packedWithoutDebugpy(t, py) + "#pyenv",
			"--conf", "spark.pyspark.python=./pyenv/bin/python", "--conf", "spark.pyspark.driver.python=" + py}
	}
	out := filepath.Join(dir, "out.json")
	args := append([]string{"submit", "--proxy", p.Executors, "--partitions", "1", "--",
		"--master", "yarn", "--deploy-mode", "client"}, sparkArgs...)
	r := startSpark(t, ctx, dir, env, sparkdapBinary(t), append(args, job, out)...)
	s := nextStop(t, ctx, ide, r)
	if s.path != srcJob || s.line != line {
		t.Errorf("stopped at %s:%d, want %s:%d", s.path, s.line, srcJob, line)
	}
	if x := s.locals["x"]; len(x) != 2 || x < "10" || x > "19" {
		t.Errorf("x = %q, want one of partition 1's values (10..19)", x)
	}
	if res, err := ide.Evaluate(ctx, s.frameID, "__import__('debugpy').__file__"); err != nil {
		t.Errorf("evaluate debugpy's file: %v", err)
	} else if !strings.Contains(res.Result, "sparkdap-debugger-") {
		t.Errorf("the container's debugpy is %s, not the shipped one", res.Result)
	}
	if form == "packed" {
		if res, err := ide.Evaluate(ctx, s.frameID, "__import__('sys').prefix"); err != nil || !strings.Contains(res.Result, "/pyenv") {
			t.Errorf("the container's sys.prefix is %v (%v), not the packed environment ./pyenv", res, err)
		}
	}
	if _, err := ide.SetBreakpoints(ctx, srcJob); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540 (the plain result)", got)
	}
}

// TestStandaloneShipsDebuggerToExecutorsWithoutOne: a job on a real
// standalone master and worker under `sparkdap submit`, whose executors'
// Python has no debugpy, stops in the worker's executor through the
// debugpy shipped in --py-files (in the executor's work directory, next
// to the wrapper).
func TestStandaloneShipsDebuggerToExecutorsWithoutOne(t *testing.T) {
	testenv.SkipIfShort(t, "starts a Spark standalone cluster")
	py := python(t)
	sparkHome, _ := requireStandalone(t, py)
	ctx := testContext(t, 8*time.Minute)
	root := t.TempDir()
	src, dir := filepath.Join(root, "src"), filepath.Join(root, "ship")
	job, srcJob := filepath.Join(dir, "four_partitions.py"), filepath.Join(src, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), srcJob)
	line := testenv.MarkedLine(t, job, "square")
	env := []string{"PYSPARK_PYTHON=" + pythonWithoutDebugpy(t), "PYSPARK_DRIVER_PYTHON=" + py,
		"SPARK_LOCAL_IP=127.0.0.1", "SPARK_HOME=" + sparkHome}

	masterPort, masterUI, workerUI := threeFreePorts(t)
	sparkClass := filepath.Join(sparkHome, "bin", "spark-class")
	master := standaloneStart(t, root, append(env, "SPARK_MASTER_OPTS=-Dspark.master.rest.enabled=false"), "master",
		sparkClass, "org.apache.spark.deploy.master.Master",
		"--host", "127.0.0.1", "--port", strconv.Itoa(masterPort), "--webui-port", strconv.Itoa(masterUI))
	master.waitFor(t, ctx, "I have been elected leader", 3*time.Minute)
	masterURL := fmt.Sprintf("spark://127.0.0.1:%d", masterPort)
	worker := standaloneStart(t, root, env, "worker", sparkClass, "org.apache.spark.deploy.worker.Worker", masterURL,
		"--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--work-dir", filepath.Join(root, "work"),
		"--webui-port", strconv.Itoa(workerUI))
	worker.waitFor(t, ctx, "Successfully registered with master", 3*time.Minute)

	p := startProxy(t, ctx, "--root", src)
	ide := attachAtLine(t, ctx, p, srcJob, line)
	out := filepath.Join(dir, "out.json")
	r := startSpark(t, ctx, dir, append(env, "SPARKDAP_TOKEN="+p.Token), sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "1", "--",
		"--master", masterURL, "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false", job, out)
	s := nextStop(t, ctx, ide, r)
	if s.path != srcJob || s.line != line {
		t.Errorf("stopped at %s:%d, want %s:%d", s.path, s.line, srcJob, line)
	}
	if !strings.Contains(s.thread, "exec 0 ·") {
		t.Errorf("thread %q: not the standalone worker's executor", s.thread)
	}
	if res, err := ide.Evaluate(ctx, s.frameID, "__import__('debugpy').__file__"); err != nil {
		t.Errorf("evaluate debugpy's file: %v", err)
	} else if !strings.Contains(res.Result, "sparkdap-debugger-") {
		t.Errorf("the executor's debugpy is %s, not the shipped one", res.Result)
	}
	if _, err := ide.SetBreakpoints(ctx, srcJob); err != nil {
		t.Fatal(err)
	}
	if err := ide.Continue(ctx, s.threadID); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540 (the plain result)", got)
	}
}
