package doctor

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// debuggerDir is one release of the debugger matrix, as
// scripts/setup-debuggers installs it (a pip --target directory).
func debuggerDir(t *testing.T, release string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "debuggers", release))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		testenv.Missing(t, "needs the debugger matrix (./scripts/setup-debuggers): %v", err)
	}
	return dir
}

// pythonWith is an interpreter, as the executors would run it, whose
// sys.path starts with dir: the debugger there is the one it loads.
func pythonWith(t *testing.T, py, dir string, args ...string) string {
	t.Helper()
	shim := filepath.Join(t.TempDir(), "python")
	script := "#!/bin/sh\nPYTHONPATH=" + shellquote.Quote(dir) + " PYTHONDONTWRITEBYTECODE=1 exec " + shellquote.Quote(py)
	for _, a := range args {
		script += " " + a
	}
	if err := os.WriteFile(shim, []byte(script+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return shim
}

// patchedCopy lays out src at dst as symbolic links, except the files
// patches names (paths relative to src), which are copies edited by
// their function, and the directories on the way to them: a real
// debugger with one thing changed, for the price of a few files.
func patchedCopy(t *testing.T, src, dst string, patches map[string]func(string) string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if patch, ok := patches[name]; ok {
			data, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			patched := patch(string(data))
			if patched == string(data) {
				t.Fatalf("the patch of %s changed nothing: the debugger's source moved", filepath.Join(src, name))
			}
			if err := os.WriteFile(filepath.Join(dst, name), []byte(patched), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		inner := map[string]func(string) string{}
		for p, f := range patches {
			if rest, ok := strings.CutPrefix(p, name+"/"); ok {
				inner[rest] = f
			}
		}
		if len(inner) > 0 {
			patchedCopy(t, filepath.Join(src, name), filepath.Join(dst, name), inner)
			continue
		}
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
	for p := range patches {
		if first, _, _ := strings.Cut(p, "/"); !dirHas(entries, first) {
			t.Fatalf("%s has no %s to patch", src, p)
		}
	}
}

func dirHas(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// checkPythonOnly runs doctor's Python check alone, on cfg.
func checkPythonOnly(t *testing.T, cfg Config) (string, bool) {
	t.Helper()
	cfg.Timeout = 60 * time.Second
	var out bytes.Buffer
	d := &doctor{f: cfg, out: &out}
	if d.pycharm() {
		d.checkPyCharmBuild()
	}
	_, ok := d.checkPython(context.Background())
	t.Logf("%+v:\n%s", cfg, out.String())
	return out.String(), ok
}

// TestDoctorDebuggerVerdicts: the executors' Python loads a real debugpy
// (from the debugger matrix, first on its path), and doctor says what the
// wrapper would do with it: debug (supported: OK; untested: WARN), run
// undebugged (an internal missing: FAIL, unless the job forces it or ships
// its own debugger), or nothing to load (FAIL).
func TestDoctorDebuggerVerdicts(t *testing.T) {
	testenv.SkipIfShort(t, "runs the doctor's Python check with each debugger")
	py := testenv.Python(t)
	oldest := debuggerDir(t, "debugpy-1.6.7")
	newest := debuggerDir(t, "debugpy-1.8.22")
	untested := filepath.Join(t.TempDir(), "debugpy-1.9.0")
	patchedCopy(t, newest, untested, map[string]func(string) string{
		"debugpy/_version.py": replace(`"version": "1.8.22"`, `"version": "1.9.0"`),
	})
	// The lease on stops needs PyDB.do_wait_suspend; a release without
	// it must not be debugged with.
	lacking := filepath.Join(t.TempDir(), "debugpy-lacking")
	patchedCopy(t, newest, lacking, map[string]func(string) string{
		"debugpy/_vendored/pydevd/pydevd.py": replace("    def do_wait_suspend(self, thread,", "    def do_wait_suspend_renamed(self, thread,"),
	})
	t.Setenv(UntestedDebuggerEnv, "")
	force := "spark.executorEnv." + UntestedDebuggerEnv + "=1"
	const install = `-m pip install 'debugpy>=1.6.7,<1.9'   (on every executor too)`

	tests := []struct {
		name   string
		python string
		confs  []string
		ships  bool
		v      verdict
		usable bool
		wants  []string
	}{
		{name: "supported", python: pythonWith(t, py, oldest), v: vOK, usable: true,
			wants: []string{"debugpy 1.6.7, Python 3.", "a release sparkdap supports"}},
		{name: "untested", python: pythonWith(t, py, untested), v: vWarn, usable: true,
			wants: []string{"debugpy 1.9.0, Python 3.", "untested (sparkdap supports debugpy 1.6.7 to 1.8.x)",
				"so workers are debugged with it", "fix: for a tested release: "}},
		{name: "unusable", python: pythonWith(t, py, lacking), v: vFail,
			wants: []string{"debugpy 1.8.22, Python 3.", "lacks PyDB.do_wait_suspend (for the lease on stops): the wrapper runs the executors undebugged",
				install + ", or set --conf " + force + " to try it anyway"}},
		{name: "unusable, forced", python: pythonWith(t, py, lacking), confs: []string{force}, v: vWarn, usable: true,
			wants: []string{"lacks PyDB.do_wait_suspend", "spark.executorEnv." + UntestedDebuggerEnv + " makes the wrapper try it anyway", "fix: "}},
		{name: "unusable, the job ships its own", python: pythonWith(t, py, lacking), ships: true, v: vWarn,
			wants: []string{"lacks PyDB.do_wait_suspend (for the lease on stops); the job ships its own debugger"}},
		{name: "absent, the job ships its own", python: pythonWith(t, py, t.TempDir(), "-S"), ships: true, v: vWarn,
			wants: []string{"cannot import debugpy; the job ships its own debugger"}},
		// -S: no site-packages, as a Python without any debugger.
		{name: "absent", python: pythonWith(t, py, t.TempDir(), "-S"), v: vFail,
			wants: []string{"cannot import debugpy: ModuleNotFoundError: No module named 'debugpy'", install + ", or point PYSPARK_PYTHON at an interpreter that has it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, usable := checkPythonOnly(t, Config{Python: tt.python, Confs: tt.confs, ShipsDebugger: tt.ships})
			wantCheck(t, out, "Python "+tt.python, tt.v, tt.wants...)
			if usable != tt.usable {
				t.Errorf("usable for the test connection: %v, want %v", usable, tt.usable)
			}
			if tt.ships && strings.Contains(out, "fix: ") {
				t.Errorf("a fix for a debugger the job does not use:\n%s", out)
			}
		})
	}
}

// TestDoctorPyCharmDebugger: with --pycharm-build, the executors' Python is
// checked for pydevd-pycharm, and for the build of the user's PyCharm.
func TestDoctorPyCharmDebugger(t *testing.T) {
	testenv.SkipIfShort(t, "runs the doctor's Python check with each build")
	py := testenv.Python(t)
	dir := debuggerDir(t, "pydevd-pycharm-253.33813.30")
	withPyCharm := pythonWith(t, py, dir)
	const install = "-m pip install 'pydevd-pycharm~="
	tests := []struct {
		name, build, python string
		ships               bool
		v, buildV           verdict
		wants, buildWants   []string
	}{
		{name: "its build", build: "253.33813.30", python: withPyCharm, v: vOK, buildV: vOK,
			wants: []string{"pydevd-pycharm 253.33813.30, Python 3.", "a release sparkdap supports"}},
		{name: "its build, given short", build: "253.33813", python: withPyCharm, v: vOK, buildV: vOK},
		{name: "another build", build: "253.17525.96", python: withPyCharm, v: vWarn, buildV: vOK,
			wants: []string{"it is not the pydevd-pycharm of PyCharm 253.17525.96", "PyCharm warns when they differ",
				"fix: " + withPyCharm + " " + install + "253.17525.96'"}},
		{name: "an untested PyCharm", build: "251.23774.444", python: withPyCharm, v: vWarn, buildV: vWarn,
			wants:      []string{"not the pydevd-pycharm of PyCharm 251.23774.444", install + "251.23774.444'"},
			buildWants: []string{"untested: sparkdap supports pydevd-pycharm 253.* to 263.*", "runs workers undebugged and says what is missing"}},
		{name: "none", build: "253.33813.30", python: pythonWith(t, py, t.TempDir(), "-S"), v: vFail, buildV: vOK,
			wants: []string{"cannot import pydevd_pycharm: ModuleNotFoundError", install + "253.33813.30'"}},
		// The job ships the pydevd-pycharm of the build, if told it.
		{name: "none, the job ships it", build: "253.33813.30", python: pythonWith(t, py, t.TempDir(), "-S"), ships: true, v: vWarn, buildV: vOK,
			wants: []string{"cannot import pydevd_pycharm; the job ships its own debugger (when submit, conf or wrap get --pycharm-build 253.33813.30), which the workers use instead"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := checkPythonOnly(t, Config{Python: tt.python, PyCharmBuild: tt.build, ShipsDebugger: tt.ships})
			wantCheck(t, out, "PyCharm build "+tt.build, tt.buildV, tt.buildWants...)
			wantCheck(t, out, "Python "+tt.python, tt.v, tt.wants...)
			if strings.Contains(out, "debugpy") {
				t.Errorf("PyCharm's check speaks of debugpy:\n%s", out)
			}
		})
	}
}

// TestDoctorPyCharmRun: a whole doctor run for PyCharm checks
// pydevd-pycharm and skips the test connection, which needs debugpy and a
// DAP port, saying why.
func TestDoctorPyCharmRun(t *testing.T) {
	testenv.SkipIfShort(t, "runs Python, pyspark and Java")
	py := testenv.Python(t, "pyspark")
	withPyCharm := pythonWith(t, py, debuggerDir(t, "pydevd-pycharm-263.7307.50"))
	code, out := runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t), Python: withPyCharm, PyCharmBuild: "263.7307.50"})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantCheck(t, out, "PyCharm build 263.7307.50", vOK)
	wantCheck(t, out, "Python "+withPyCharm, vOK, "pydevd-pycharm 263.7307.50")
	wantCheck(t, out, "test connection", vSkip, "not run with --pycharm-build")
}

// TestSupportedDebuggersAreTheWrappers: doctor's ranges are the wrapper's
// (support.py's SUPPORTED_RANGES and SUPPORTED_WORDS), and every release
// the debugger matrix and the test suite install is inside them.
func TestSupportedDebuggersAreTheWrappers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "workerwrap", "python", "remote_debug", "support.py"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	ranges := pythonDict(t, src, "SUPPORTED_RANGES")
	words := pythonDict(t, src, "SUPPORTED_WORDS")
	if len(ranges) != len(SupportedDebuggers) || len(words) != len(SupportedDebuggers) {
		t.Errorf("support.py ranges %v, words %v; doctor has %d debuggers", ranges, words, len(SupportedDebuggers))
	}
	tupleRE := regexp.MustCompile(`^\(\((.*?),?\), \((.*?),?\)\)$`)
	for name, r := range SupportedDebuggers {
		m := tupleRE.FindStringSubmatch(ranges[name])
		if m == nil {
			t.Errorf("support.py's range of %s: %q, want ((first,), (last,))", name, ranges[name])
			continue
		}
		if first, last := ints(t, m[1]), ints(t, m[2]); compareTuples(first, r.First) != 0 || compareTuples(last, r.Last) != 0 {
			t.Errorf("%s: support.py's range %v to %v, doctor's %v to %v", name, first, last, r.First, r.Last)
		}
		if w, _ := strconv.Unquote(words[name]); w != r.Words {
			t.Errorf("%s: support.py's words %s, doctor's %q", name, words[name], r.Words)
		}
	}
	for _, req := range []string{"requirements-debuggers.txt", "requirements-test.txt"} {
		f, err := os.Open(filepath.Join("..", req))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, version, ok := strings.Cut(strings.TrimSpace(sc.Text()), "==")
			if r, known := SupportedDebuggers[name]; ok && known && !r.Contains(version) {
				t.Errorf("%s installs %s %s, outside what doctor calls supported (%s)", req, name, version, r.Words)
			}
		}
		f.Close()
	}
}

// pythonDict reads a module-level dict of string keys, one `"key": value,`
// per line (values on one line, or wrapped in parentheses over several).
func pythonDict(t *testing.T, src, name string) map[string]string {
	t.Helper()
	start := strings.Index(src, "\n"+name+" = {\n")
	if start < 0 {
		t.Fatalf("support.py has no %s = {", name)
	}
	body := src[start+len(name)+6:]
	body = body[:strings.Index(body, "\n}\n")]
	out := map[string]string{}
	entryRE := regexp.MustCompile(`(?s)\s*"([^"]+)": (.*?),\n`)
	for _, m := range entryRE.FindAllStringSubmatch(body+"\n", -1) {
		out[m[1]] = strings.Join(strings.Fields(m[2]), " ")
	}
	return out
}

func ints(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func TestDebuggerRanges(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"debugpy", "1.6.7", true},
		{"debugpy", "1.6.6", false},
		{"debugpy", "1.7.0", true},
		{"debugpy", "1.8.22", true},
		{"debugpy", "1.8.23rc1", true},
		{"debugpy", "1.9.0", false},
		{"debugpy", "unknown", false},
		{"pydevd-pycharm", "253.17525.96", true},
		{"pydevd-pycharm", "253", true},
		{"pydevd-pycharm", "263.7307.50", true},
		{"pydevd-pycharm", "252.99999.1", false},
		{"pydevd-pycharm", "264.1.1", false},
	} {
		if got := SupportedDebuggers[tc.name].Contains(tc.version); got != tc.want {
			t.Errorf("%s %s supported: %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"253.33813", "253.33813"},
		{"253.33813.30", "253.33813.30"},
		{"PY-253.33813.30", "253.33813.30"},
		{"#PY-253.33813.30", "253.33813.30"},
		{" 263.7307.50 ", "263.7307.50"},
		{"253", ""}, // pip's ~= needs two numbers
		{"2025.3", "2025.3"},
		{"latest", ""},
		{"253.33813; rm -rf ~", ""},
	} {
		got, err := ParsePyCharmBuild(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("ParsePyCharmBuild(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		build, installed string
		want             bool
	}{
		{"253.33813.30", "253.33813.30", true},
		{"253.33813", "253.33813.30", true},
		{"253.33813.30", "253.33813.31", false},
		{"253.33813.30", "253.33813", false},
		{"253.33813", "261.17801.91", false},
	} {
		if got := sameBuild(tc.build, tc.installed); got != tc.want {
			t.Errorf("sameBuild(%s, %s) = %v, want %v", tc.build, tc.installed, got, tc.want)
		}
	}
}

// The probe's line, as doctor reads it: only support.py's own, whatever
// else a sitecustomize prints, and never a kind or debugger it does not
// know.
func TestParseDebuggerReport(t *testing.T) {
	rep, ok := parseDebuggerReport("hello from sitecustomize\nuntested\tdebugpy\t1.9.0\t3.11.7\tdebugpy 1.9.0 is untested\nexecutable\t/usr/bin/python3\n")
	if !ok || rep.kind != kindUntested || rep.version != "1.9.0" || rep.python != "3.11.7" || rep.executable != "/usr/bin/python3" {
		t.Errorf("got %+v, %v", rep, ok)
	}
	for _, out := range []string{"", "1.8.22 3.11.0 /usr/bin/python3", "fine\tdebugpy\t1\t3\tx", "supported\tpdb\t1\t3\tx", "supported\tdebugpy\t1.8.22\t3.11"} {
		if rep, ok := parseDebuggerReport(out); ok {
			t.Errorf("%q read as %+v", out, rep)
		}
	}
}
