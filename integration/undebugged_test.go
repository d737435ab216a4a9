//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestSparkDebuggerWithoutLeaseInternalRunsUndebugged: the executors'
// debugpy is a real one whose pydevd lacks PyDB.do_wait_suspend, on which
// the lease on stops rests. Every selected worker runs undebugged, the
// job's result is the plain one, and the reason, naming what is missing,
// is one line in the executor's log, in serve's log and in the IDE's
// console; no worker becomes a session.
func TestSparkDebuggerWithoutLeaseInternalRunsUndebugged(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	crippled := debugpyWithout(t, "do_wait_suspend")

	p := startProxy(t, ctx)
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	job := filepath.Join(dir, "four_partitions.py")
	copyFile(t, filepath.Join("testdata", "four_partitions.py"), job)
	out := filepath.Join(dir, "out.json")
	// local mode: the workers inherit spark-submit's PYTHONPATH, so the
	// crippled copy shadows site-packages' debugpy.
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token, "PYTHONPATH=" + crippled}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "1", "--ship-debugger", "never", "--", "--master", "local[2]", job, out)
	r.wait(t, ctx)
	if got := readJSON(t, out)["total"]; got != float64(20540) {
		t.Errorf("total = %v, want 20540 (the plain result)", got)
	}

	const missing = "lacks PyDB.do_wait_suspend (for the lease on stops)"
	lines := regexp.MustCompile(`(?m)^sparkdap: \[pid \d+\] .*$`).FindAllString(r.out.String(), -1)
	if len(lines) != 1 || !strings.Contains(lines[0], "debugger unavailable (debugpy ") || !strings.Contains(lines[0], missing) {
		t.Errorf("executor log's sparkdap lines %q: want one, naming what is missing", lines)
	}
	if strings.Contains(r.out.String(), "Traceback") {
		t.Errorf("the job's output holds a traceback")
	}
	serveLine := regexp.MustCompile(`(?m)^sparkdap: worker \S+ pid \d+ runs undebugged: debugpy \S+ ` + regexp.QuoteMeta(missing) + `.*$`)
	if !serveLine.MatchString(p.Log()) {
		t.Errorf("serve's log does not say why the worker ran undebugged")
	}
	if strings.Contains(p.Log(), "executor attached") || strings.Contains(p.Log(), "hello accepted") {
		t.Errorf("a worker without the lease's internal became a session")
	}
	if _, err := ide.WaitEvent(ctx, "output", func(b json.RawMessage) bool {
		var body godap.OutputEventBody
		return json.Unmarshal(b, &body) == nil && body.Category == "console" &&
			strings.Contains(body.Output, "runs undebugged: debugpy ") && strings.Contains(body.Output, missing)
	}); err != nil {
		t.Errorf("the IDE's console never said why: %v", err)
	}
}

// debugpyWithout copies the debugpy the tests' Python imports into a
// directory of its own, with PyDB's method renamed in the vendored pydevd
// (its only definition), and returns the directory.
func debugpyWithout(t testing.TB, method string) string {
	t.Helper()
	out, err := exec.Command(python(t), "-c", "import debugpy, os; print(os.path.dirname(debugpy.__file__))").Output()
	if err != nil {
		t.Fatalf("find debugpy: %v", err)
	}
	src := strings.TrimSpace(string(out))
	dst := filepath.Join(t.TempDir(), "site")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v: %s", src, err, out)
	}
	file := filepath.Join(dst, "debugpy", "_vendored", "pydevd", "pydevd.py")
	code, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// "(self," leaves alone a docstring's "def do_wait_suspend(...)".
	def := []byte("    def " + method + "(self,")
	if n := bytes.Count(code, def); n != 1 {
		t.Fatalf("%s defines %s %d times, want once", file, method, n)
	}
	code = bytes.Replace(code, def, []byte("    def "+method+"_removed_by_test(self,"), 1)
	if err := os.WriteFile(file, code, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
