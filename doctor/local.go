package doctor

// The local checks: Python with debugpy, Spark, Java.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// pythonFor resolves the interpreter Spark's workers run, as Spark does:
// spark.pyspark.python, else $PYSPARK_PYTHON, else python3; --python
// names it outright.
func (d *doctor) pythonFor() (name, why string) {
	if d.f.Python != "" {
		return d.f.Python, "--python"
	}
	if v, ok := d.f.jobConf(ConfPySparkPython); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), ConfPySparkPython
	}
	if v := os.Getenv("PYSPARK_PYTHON"); v != "" {
		return v, "$PYSPARK_PYTHON"
	}
	return "python3", "PYSPARK_PYTHON is unset, so Spark runs python3 from PATH"
}

// runPython runs py -c code with the check timeout; it returns stdout and,
// on failure, the last line of stderr (the exception) as the error.
func (d *doctor) runPython(ctx context.Context, py, code string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", code)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("no answer within %s", d.f.Timeout)
	}
	if err != nil {
		if last := lastLine(stderr.String()); last != "" {
			return "", errors.New(last)
		}
		return "", err
	}
	return strings.TrimSpace(stdout.String()), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (d *doctor) checkPython(ctx context.Context) (string, bool) {
	py, why := d.pythonFor()
	if v, ok := d.f.jobConf("spark.executorEnv.PYSPARK_PYTHON"); ok && why != ConfPySparkPython && why != "--python" {
		d.report(checkResult{name: "spark.executorEnv.PYSPARK_PYTHON", v: vWarn,
			detail: fmt.Sprintf("%s does not choose the workers' Python: Spark runs %s (%s)", v, py, why),
			fix:    fmt.Sprintf("set --conf %s=%s instead", ConfPySparkPython, v)})
	}
	if archive, inside, ok := d.f.archiveFor(py); ok {
		return d.checkArchivePython(ctx, py, why, archive, inside)
	}
	name := "Python " + py + " (" + why + ")"
	if why == ConfPySparkPython {
		name = "executors' Python " + py + " (" + why + ")"
	}
	if !filepath.IsAbs(py) && strings.Contains(py, "/") {
		d.report(checkResult{name: name, v: vWarn,
			detail: "not checked: a relative path resolves in each executor's working directory, and none of the --archives given to doctor unpacks there",
			fix:    "pass the job's --archives to doctor too (e.g. --archives pyenv.tar.gz#pyenv for ./pyenv/bin/python)"})
		return py, false
	}
	path, err := exec.LookPath(py)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "not found: " + err.Error(),
			fix: "install Python 3, or set PYSPARK_PYTHON (and --python here) to an interpreter's path"})
		return py, false
	}
	return d.checkPythonAt(ctx, name, py, path)
}

// checkPythonAt runs the wrapper's debugger probe with the interpreter at
// path (shown as py), reporting under name. The Python is usable when the
// wrapper would debug with its debugger, forced or not.
func (d *doctor) checkPythonAt(ctx context.Context, name, py, path string) (string, bool) {
	out, err := d.runPython(ctx, path, d.debuggerProbe())
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "cannot run the debugger check: " + err.Error(),
			fix: fmt.Sprintf("repair that Python, or point %s at a working Python 3", pythonSetting(name))})
		return path, false
	}
	rep, ok := parseDebuggerReport(out)
	if !ok {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("unexpected answer %q", clean(out))})
		return path, false
	}
	install := func(req string) string {
		if d.pyPacked {
			return fmt.Sprintf("pip install %s in the environment, then pack it again", localShell.Quote(req))
		}
		fix := fmt.Sprintf("%s -m pip install %s   (on every executor too)", localShell.Program(py), localShell.Quote(req))
		if rep.kind == kindAbsent {
			fix += fmt.Sprintf(", or point %s at an interpreter that has it", pythonSetting(name))
		}
		return fix
	}
	r := d.debuggerResult(name, rep, rep.String(), install)
	d.report(r)
	return path, d.debuggerUsable(rep)
}

// pythonSetting names what chose the Python a check is named after.
func pythonSetting(name string) string {
	if strings.Contains(name, ConfPySparkPython) {
		return ConfPySparkPython
	}
	return "PYSPARK_PYTHON"
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

func (d *doctor) checkSpark(ctx context.Context, py string) {
	name := "Spark version"
	const code = "import pyspark; print(pyspark.__version__)"
	out, err := d.runPython(ctx, py, code)
	if err != nil && d.pyPacked {
		// A packed environment (venv-pack, conda-pack) seldom holds
		// pyspark: Spark puts its own on the executors' PYTHONPATH. The
		// pyspark that counts is the one spark-submit runs here.
		if local, lerr := d.runPython(ctx, "python3", code); lerr == nil {
			out, err = local, nil
			name += " (python3 here: Spark ships its pyspark to the executors, not the archive)"
		}
	}
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s cannot import pyspark: %v", py, err),
			fix: fmt.Sprintf("%s -m pip install pyspark (matching your cluster's Spark), or add %s to PYTHONPATH", localShell.Program(py), sparkHomePython())})
		return
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		d.report(checkResult{name: name, v: vWarn, detail: fmt.Sprintf("pyspark reports version %q, which sparkdap cannot read", out)})
		return
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if (major == 3 && minor >= 5) || major == 4 {
		d.report(checkResult{name: name, v: vOK, detail: "pyspark " + out})
		return
	}
	d.report(checkResult{name: name, v: vWarn, detail: "pyspark " + out + ": sparkdap is made and tested for Spark 3.5 and 4.x",
		fix: "the worker wrapper may still work; if breakpoints never bind, try Spark 3.5 or later"})
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

func (d *doctor) checkJava(ctx context.Context) {
	java, why := d.f.Java, "--java"
	if java == "" {
		java, why = "java", "from PATH"
		if home := os.Getenv("JAVA_HOME"); home != "" {
			java, why = filepath.Join(home, "bin", "java"), "$JAVA_HOME"
		}
	}
	name := "Java (" + why + ")"
	path, err := exec.LookPath(java)
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s not found: %v", java, err),
			fix: "install a JDK (Spark 4 needs Java 17 or 21; 3.5 runs on 8, 11, 17) and put it on PATH or set JAVA_HOME"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-version")
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("%s -version failed: %v: %s", path, err, lastLine(string(out))),
			fix: "repair or reinstall the JDK, or set JAVA_HOME to a working one"})
		return
	}
	first := lastLine(strings.SplitN(string(out), "\n", 2)[0])
	m := javaVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		d.report(checkResult{name: name, v: vWarn, detail: "unrecognised version: " + first})
		return
	}
	major, _ := strconv.Atoi(m[1])
	if major == 1 && m[2] != "" { // 1.8 = Java 8
		major, _ = strconv.Atoi(m[2])
	}
	if major < 17 {
		d.report(checkResult{name: name, v: vWarn, detail: first + ": Spark 4 needs Java 17 or later",
			fix: "fine for Spark 3.5; for Spark 4 install Java 17 and set JAVA_HOME"})
		return
	}
	d.report(checkResult{name: name, v: vOK, detail: first})
}

// localShell is the shell of this machine, which the fixes that run its
// Python are written for: PowerShell on Windows, else POSIX sh. The fixes
// for an SSH gateway or the cluster's nodes stay POSIX. Tests set it to
// check the other one's form.
var localShell = shellquote.Local

// sparkHomePython names Spark's Python directory as the local shell writes it.
func sparkHomePython() string {
	if localShell == shellquote.PowerShell {
		return `$env:SPARK_HOME\python`
	}
	return "$SPARK_HOME/python"
}
