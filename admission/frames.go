package admission

import "strings"

// WrapperModule is the file name of the worker wrapper sparkdap generates
// (workerwrap's module, run as Spark's python daemon module).
const WrapperModule = "remote_debug.py"

// IsPlumbingFile reports whether an executor path is one of the files
// that run every Python worker before the user's code: the wrapper
// (remote_debug.py, its main, worker and module frames) and PySpark's
// daemon.py, which forks the workers. Their frames sit under every stop;
// the IDEs show them as library frames, never as the user's code.
func IsPlumbingFile(path string) bool {
	p := strings.ReplaceAll(path, "\\", "/")
	base := p[strings.LastIndexByte(p, '/')+1:]
	return base == WrapperModule || strings.HasSuffix(p, "/pyspark/daemon.py")
}
