package doctor

import (
	"fmt"
	"os"
	"strings"
)

// TestedDebugpy is the debugpy release sparkdap is tested with (the pin of
// requirements-test.txt) and the one the worker wrapper attaches with
// (workerwrap/python/remote_debug/pydevd_compat.py): the version the
// executors' Python must have.
const TestedDebugpy = "1.8.22"

// UntestedDebuggerEnv, set to 1 in the executors' environment, makes the
// wrapper try a debugger release it was not written for.
const UntestedDebuggerEnv = "SPARKDAP_UNTESTED_DEBUGGER"

// untestedDebuggerAllowed says where the job lets the wrapper try another
// debugpy, or "": the job's spark.executorEnv, or (local mode: the workers
// inherit it) this environment.
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

// debugpyResult is the verdict on an executors' Python whose debugpy is
// version: the wrapper refuses any release but TestedDebugpy (the job runs
// undebugged, with one line in each worker's log) unless the job allows
// an untested one. okDetail is the detail when it is the tested release;
// install is the fix that installs it where the executors get their
// Python.
func (d *doctor) debugpyResult(name, version, okDetail, install string) checkResult {
	if version == TestedDebugpy {
		return checkResult{name: name, v: vOK, detail: okDetail}
	}
	if where := d.untestedDebuggerAllowed(); where != "" {
		return checkResult{name: name, v: vWarn,
			detail: fmt.Sprintf("debugpy %s is not the release sparkdap is tested with (%s); %s lets the wrapper try it", clean(version), TestedDebugpy, where),
			fix:    install}
	}
	return checkResult{name: name, v: vFail,
		detail: fmt.Sprintf("debugpy %s: the wrapper attaches only with debugpy %s and runs the executors undebugged with any other", clean(version), TestedDebugpy),
		fix:    fmt.Sprintf("%s, or set --conf spark.executorEnv.%s=1 to try this one", install, UntestedDebuggerEnv)}
}
