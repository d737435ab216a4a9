package doctor

// The executors' debugger: which one their Python loads and whether the
// worker wrapper debugs with it. The verdict is the wrapper's own: doctor
// runs the wrapper's support.py (workerwrap.DebuggerReportScript) with
// that Python, so doctor and a worker never disagree about a release.

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// DebuggerRange is the span of one debugger's releases that the debugger
// matrix tests.
type DebuggerRange struct {
	// First and Last bound a version's leading numbers, compared as
	// Python compares tuples (support.py's _version_tuple).
	First, Last []int
	Words       string // the range as people read it
	Pip         string // a pip requirement for a release inside it
}

// SupportedDebuggers is support.py's SUPPORTED_RANGES and SUPPORTED_WORDS,
// for what doctor says before any Python runs (a test checks they agree).
var SupportedDebuggers = map[string]DebuggerRange{
	"debugpy": {First: []int{1, 6, 7}, Last: []int{1, 8, 999999},
		Words: "debugpy 1.6.7 to 1.8.x", Pip: "debugpy>=1.6.7,<1.9"},
	"pydevd-pycharm": {First: []int{253}, Last: []int{263, 999999, 999999},
		Words: "pydevd-pycharm 253.* to 263.* (PyCharm 2025.3 to 2026.3)", Pip: "pydevd-pycharm>=253,<264"},
}

// Contains says whether version is inside the range, read as support.py
// reads it (leading numbers only: 1.8.0rc1 is 1.8.0).
func (r DebuggerRange) Contains(version string) bool {
	v := versionTuple(version)
	return len(v) > 0 && compareTuples(r.First, v) <= 0 && compareTuples(v, r.Last) <= 0
}

// versionTuple is support.py's _version_tuple: "1.6.7.post1" -> 1 6 7.
func versionTuple(version string) []int {
	var out []int
	for _, part := range strings.Split(version, ".") {
		digits := part[:len(part)-len(strings.TrimLeft(part, "0123456789"))]
		if digits == "" {
			break
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			break
		}
		out = append(out, n)
		if len(digits) != len(part) {
			break
		}
	}
	return out
}

func compareTuples(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// pycharmBuildRE is a PyCharm build as Help → About shows it ("Build
// #PY-253.33813.30") or as pip pins pydevd-pycharm to it: at least two
// numbers, as pip's ~= needs.
var pycharmBuildRE = regexp.MustCompile(`^(?:#?[A-Z]{2}-)?(\d+(?:\.\d+)+)$`)

// ParsePyCharmBuild reads a PyCharm build, with or without Help → About's
// product prefix, and returns its numbers (253.33813.30).
func ParsePyCharmBuild(s string) (string, error) {
	m := pycharmBuildRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", fmt.Errorf("%q is not a PyCharm build: want its numbers as Help → About shows them, e.g. 253.33813.30", s)
	}
	return m[1], nil
}

// UntestedDebuggerEnv, set to 1 in the executors' environment, makes the
// wrapper try a debugger that lacks an internal it uses.
const UntestedDebuggerEnv = "SPARKDAP_UNTESTED_DEBUGGER"

// untestedDebuggerAllowed says where the job lets the wrapper try a
// debugger it would refuse, or "": the job's spark.executorEnv, or (local
// mode: the workers inherit it) this environment.
func (d *doctor) untestedDebuggerAllowed() string {
	key := "spark.executorEnv." + UntestedDebuggerEnv
	if v, ok := d.f.jobConf(key); ok {
		if truthy(v) {
			return key
		}
		return ""
	}
	if truthy(os.Getenv(UntestedDebuggerEnv)) {
		return "$" + UntestedDebuggerEnv
	}
	return ""
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// The kinds of support.py's report.
const (
	kindSupported = "supported"
	kindUntested  = "untested"
	kindUnusable  = "unusable"
	kindAbsent    = "absent"
)

// debuggerReport is what the probe found in one Python.
type debuggerReport struct {
	kind, name, version, python, words string
	executable                         string // sys.executable, where the probe said it
}

// String is what the probe found, as the checks of a Python say it.
func (r debuggerReport) String() string {
	s := fmt.Sprintf("%s %s, Python %s", r.name, r.version, r.python)
	if r.executable != "" {
		s += " (" + r.executable + ")"
	}
	return s
}

// debuggerModule is the module the wrapper imports, as an import error
// names it.
func (d *doctor) debuggerModule() string {
	if d.pycharm() {
		return "pydevd_pycharm"
	}
	return "debugpy"
}

func (d *doctor) pycharm() bool { return d.f.PyCharmBuild != "" }

// debuggerProbe is the code the executors' Python runs: the wrapper's
// verdict, then the interpreter's path for the report.
func (d *doctor) debuggerProbe() string {
	return workerwrap.DebuggerReportScript(d.pycharm()) + "import sys as _doctor_sys\nprint('executable\\t' + _doctor_sys.executable)\n"
}

func knownKind(k string) bool {
	return k == kindSupported || k == kindUntested || k == kindUnusable || k == kindAbsent
}

// parseDebuggerReport finds the probe's lines in out (a sitecustomize may
// print before them).
func parseDebuggerReport(out string) (debuggerReport, bool) {
	var r debuggerReport
	found := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimRight(line, "\r"), "\t")
		switch {
		case len(f) == 2 && f[0] == "executable":
			r.executable = clean(f[1])
		case len(f) == 5 && !found && knownKind(f[0]) && SupportedDebuggers[f[1]].Words != "":
			// The words name what is missing, longer than a line from
			// elsewhere.
			r.kind, r.name, r.version, r.python, r.words = f[0], f[1], clean(f[2]), clean(f[3]), admission.Clean(strings.TrimSpace(f[4]), 600)
			found = true
		}
	}
	return r, found
}

// debuggerRequirement is the pip requirement the fixes install: a supported
// debugpy, or the pydevd-pycharm of the user's PyCharm (the IDE only
// warns on another build, but that is the one it is made for).
func (d *doctor) debuggerRequirement() string {
	if d.pycharm() {
		return "pydevd-pycharm~=" + d.f.PyCharmBuild
	}
	return SupportedDebuggers["debugpy"].Pip
}

// debuggerResult is the verdict on the debugger an executors' Python
// loads, as the wrapper would reach it: a supported release is OK; an
// untested one that has every internal the wrapper uses is debugged with,
// a WARN; one that lacks an internal makes the wrapper run the workers
// undebugged, a FAIL unless the job forces it; none at all is a FAIL.
// found says what was found, in the check's words; install(req) is the
// fix that installs req where the executors get their Python.
func (d *doctor) debuggerResult(name string, rep debuggerReport, found string, install func(req string) string) checkResult {
	req := d.debuggerRequirement()
	// The probe's words, without the name and version found already says.
	lacks := strings.TrimPrefix(rep.words, rep.name+" "+rep.version+" ")
	ships := "the job ships its own debugger"
	if d.pycharm() {
		// It ships one for PyCharm only when told the build.
		ships += fmt.Sprintf(" (when submit, conf or wrap get --pycharm-build %s)", d.f.PyCharmBuild)
	}
	var r checkResult
	switch {
	case rep.kind == kindSupported:
		r = checkResult{name: name, v: vOK, detail: found + ", a release sparkdap supports"}
	case rep.kind == kindUntested:
		r = checkResult{name: name, v: vWarn,
			detail: fmt.Sprintf("%s: untested (sparkdap supports %s); it has every internal the wrapper uses, so workers are debugged with it",
				found, SupportedDebuggers[rep.name].Words),
			fix: "for a tested release: " + install(req)}
	case d.f.ShipsDebugger && rep.kind == kindUnusable:
		// The workers fall back on the job's own debugger: this one is
		// not the one they will use.
		r = checkResult{name: name, v: vWarn, detail: fmt.Sprintf("%s: %s; %s, which the workers use instead (not checked here)", found, lacks, ships)}
	case d.f.ShipsDebugger && rep.kind == kindAbsent:
		r = checkResult{name: name, v: vWarn, detail: fmt.Sprintf("cannot import %s; %s, which the workers use instead (not checked here)", d.debuggerModule(), ships)}
	case rep.kind == kindUnusable && d.untestedDebuggerAllowed() != "":
		r = checkResult{name: name, v: vWarn,
			detail: fmt.Sprintf("%s: %s; %s makes the wrapper try it anyway, without what it lacks", found, lacks, d.untestedDebuggerAllowed()),
			fix:    install(req)}
	case rep.kind == kindUnusable:
		r = checkResult{name: name, v: vFail,
			detail: fmt.Sprintf("%s: %s: the wrapper runs the executors undebugged with it", found, lacks),
			fix:    fmt.Sprintf("%s, or set --conf spark.executorEnv.%s=1 to try it anyway", install(req), UntestedDebuggerEnv)}
	case rep.kind == kindAbsent:
		r = checkResult{name: name, v: vFail, detail: fmt.Sprintf("cannot import %s: %s", d.debuggerModule(), rep.words), fix: install(req)}
	default:
		return checkResult{name: name, v: vFail, detail: fmt.Sprintf("unexpected answer %q", rep.kind)}
	}
	if d.pycharm() && rep.kind != kindAbsent && !sameBuild(d.f.PyCharmBuild, rep.version) {
		if r.v == vOK {
			r.v = vWarn
		}
		r.detail += fmt.Sprintf("; it is not the pydevd-pycharm of PyCharm %s (PyCharm warns when they differ)", d.f.PyCharmBuild)
		if r.fix == "" {
			r.fix = install(req)
		}
	}
	return r
}

// sameBuild says whether installed is the pydevd-pycharm of the PyCharm
// build given: the same numbers, as far as the build was given (253.33813
// takes any 253.33813.*, as pip's ~= does).
func sameBuild(build, installed string) bool {
	b, v := versionTuple(build), versionTuple(installed)
	if len(v) < len(b) {
		return false
	}
	return compareTuples(b, v[:len(b)]) == 0
}

// checkPyCharmBuild says whether sparkdap is tested with the PyCharm the
// user gave: outside the tested lines the wrapper still debugs with its
// pydevd-pycharm if that has every internal the wrapper uses.
func (d *doctor) checkPyCharmBuild() {
	b := d.f.PyCharmBuild
	name := "PyCharm build " + b
	r := SupportedDebuggers["pydevd-pycharm"]
	if r.Contains(b) {
		d.report(checkResult{name: name, v: vOK, detail: "a build sparkdap supports; the executors' pydevd-pycharm is checked against it"})
		return
	}
	d.report(checkResult{name: name, v: vWarn,
		detail: fmt.Sprintf("untested: sparkdap supports %s; the wrapper debugs with its pydevd-pycharm if that has every internal the wrapper uses, else runs workers undebugged and says what is missing (the check below says which)",
			r.Words),
		fix: "for a tested set-up, a PyCharm of a tested line, and its pydevd-pycharm on the executors"})
}

// debuggerUsable says whether the wrapper would debug with what the probe
// found: what the test connection, which runs the wrapper, needs.
func (d *doctor) debuggerUsable(rep debuggerReport) bool {
	switch rep.kind {
	case kindSupported, kindUntested:
		return true
	case kindUnusable:
		return d.untestedDebuggerAllowed() != ""
	}
	return false
}
