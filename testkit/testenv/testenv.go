// Package testenv is what the tests need from the machine — Python with
// given modules, Spark, OpenSSH's sshd, tools such as tmux — and the
// breakpoint marks in their Python sources.
//
// The rule for a missing prerequisite is one for every test: locally the
// test skips, saying what to install; with CI=true it fails, because
// scripts/setup installs everything in CI and a silent skip there would
// hide a broken environment.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/breakmark"
	"github.com/sparkdap/sparkdap/testkit/sshdtest"
)

// CI reports whether the tests run in CI (CI=true), where a missing
// prerequisite is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing ends the test for want of something: a skip locally, a failure
// in CI. Like t.Skipf and t.Fatalf it does not return when t is a real
// *testing.T.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("required in CI (scripts/setup installs it): "+format, args...)
		return
	}
	t.Skipf("skipping: "+format, args...)
}

// pythonResult is one interpreter probe, run once per module set.
type pythonResult struct {
	once sync.Once
	path string
	err  error
}

var pythons sync.Map // strings.Join(modules, ",") -> *pythonResult

// Python returns the real path (sys.executable, not a pyenv shim) of the
// python3 on PATH, after checking it imports modules; without them the
// test is Missing.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	key := strings.Join(modules, ",")
	v, _ := pythons.LoadOrStore(key, &pythonResult{})
	r := v.(*pythonResult)
	r.once.Do(func() { r.path, r.err = probePython(modules) })
	if r.err != nil {
		Missing(t, "%v", r.err)
	}
	return r.path
}

func probePython(modules []string) (string, error) {
	// Generous: importing pyspark and pandas on a loaded machine is slow.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	imports := append([]string{"sys"}, modules...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "python3", "-c", "import "+strings.Join(imports, ", ")+"; print(sys.executable)")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	path := strings.TrimSpace(string(out))
	if err == nil && path == "" {
		err = errors.New("sys.executable is empty")
	}
	if err != nil {
		what := "python3"
		if len(modules) > 0 {
			what += " with " + strings.Join(modules, ", ") + " importable"
		}
		return "", fmt.Errorf("needs %s (pip install -r requirements-test.txt): %w\n%s", what, err, lastLines(stderr.String(), 5))
	}
	return path, nil
}

// lastLines keeps a Python traceback's end, where the ImportError is.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Spark checks for what a local-mode PySpark job needs — python3 importing
// pyspark and modules, Java, spark-submit — and returns the interpreter and
// spark-submit ($SPARK_HOME/bin/spark-submit when SPARK_HOME is set, as
// pip's spark-submit itself defers to it; else the one on PATH).
func Spark(t testing.TB, modules ...string) (python, sparkSubmit string) {
	t.Helper()
	python = Python(t, append([]string{"pyspark"}, modules...)...)
	if _, err := exec.LookPath("java"); err != nil {
		Missing(t, "needs Java 17 for Spark: %v", err)
		return "", ""
	}
	if home := os.Getenv("SPARK_HOME"); home != "" {
		sparkSubmit = filepath.Join(home, "bin", "spark-submit")
		if _, err := os.Stat(sparkSubmit); err != nil {
			Missing(t, "SPARK_HOME=%s has no bin/spark-submit: %v", home, err)
			return "", ""
		}
		return python, sparkSubmit
	}
	sparkSubmit, err := exec.LookPath("spark-submit")
	if err != nil {
		Missing(t, "spark-submit not on PATH (pip install pyspark puts it there): %v", err)
		return "", ""
	}
	return python, sparkSubmit
}

// Tool returns the path of the program name on PATH, or the test is
// Missing; install says how to get it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "needs %s (%s): %v", name, install, err)
	}
	return p
}

// SSHD returns the path of OpenSSH's server, or the test is Missing.
func SSHD(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(sshdtest.Path); err != nil {
		Missing(t, "needs OpenSSH's server at %s (apt-get install openssh-server): %v", sshdtest.Path, err)
	}
	return sshdtest.Path
}

// MarkedLine is breakmark.Line for a test, which fails without the line.
func MarkedLine(t testing.TB, path, name string) int {
	t.Helper()
	n, err := breakmark.Line(path, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
