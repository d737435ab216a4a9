package workerwrap

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// The worker wrapper's Python, a package of modules by role
// (python/remote_debug). Spark imports the daemon module before
// --py-files reach sys.path, so the executors get one file: buildModule
// concatenates the modules in the order their package's MODULES names,
// each without its relative imports (python/remote_debug/__init__.py says
// what that asks of the modules, and tests/test_layout.py checks it).
//
//go:embed python/remote_debug/*.py
var moduleFS embed.FS

// packageDir is the package's directory inside moduleFS.
const packageDir = "python/remote_debug"

// moduleSource is the body of every generated file, after the settings
// header.
var moduleSource = mustBuildModule(moduleFS)

func mustBuildModule(fsys fs.FS) []byte {
	b, err := buildModule(fsys)
	if err != nil {
		panic("workerwrap: " + err.Error())
	}
	return b
}

// buildModule is the one-file form of the package at packageDir in fsys.
func buildModule(fsys fs.FS) ([]byte, error) {
	init, err := fs.ReadFile(fsys, path.Join(packageDir, "__init__.py"))
	if err != nil {
		return nil, err
	}
	names, err := moduleOrder(init)
	if err != nil {
		return nil, err
	}
	files, err := fs.Glob(fsys, path.Join(packageDir, "*.py"))
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{"__init__": true}
	for _, n := range names {
		listed[n] = true
	}
	for _, f := range files {
		if n := strings.TrimSuffix(path.Base(f), ".py"); !listed[n] {
			return nil, fmt.Errorf("%s is not in MODULES of %s/__init__.py", f, packageDir)
		}
	}
	var out bytes.Buffer
	for i, n := range names {
		src, err := fs.ReadFile(fsys, path.Join(packageDir, n+".py"))
		if err != nil {
			return nil, err
		}
		body, err := dropRelativeImports(src)
		if err != nil {
			return nil, fmt.Errorf("%s.py: %w", n, err)
		}
		if i > 0 {
			out.WriteString("\n\n")
		}
		fmt.Fprintf(&out, "# --- remote_debug/%s.py %s\n\n", n, strings.Repeat("-", max(3, 60-len(n))))
		out.Write(bytes.TrimSpace(body))
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}

// moduleOrder reads the MODULES tuple of the package's __init__.py: a line
// `MODULES = (`, one quoted name per line, then `)`.
func moduleOrder(init []byte) ([]string, error) {
	var names []string
	in := false
	for _, line := range strings.Split(string(init), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "MODULES = (":
			in = true
		case in && line == ")":
			if len(names) == 0 {
				return nil, errors.New("MODULES is empty")
			}
			return names, nil
		case in:
			n, err := strconv.Unquote(strings.TrimSuffix(line, ","))
			if err != nil || n == "" || strings.ContainsAny(n, "/.") {
				return nil, fmt.Errorf("MODULES: bad entry %q", line)
			}
			names = append(names, n)
		}
	}
	return nil, errors.New("no MODULES tuple in __init__.py")
}

// dropRelativeImports removes the top-level `from .mod import ...`
// statements of a module, a parenthesised name list included: in the one
// file, every name they import is already defined above.
func dropRelativeImports(src []byte) ([]byte, error) {
	var out bytes.Buffer
	lines := strings.SplitAfter(string(src), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "from .") {
			if strings.Contains(line, "from .") && strings.HasPrefix(strings.TrimSpace(line), "from .") {
				return nil, fmt.Errorf("line %d: a relative import must be at the top level", i+1)
			}
			out.WriteString(line)
			continue
		}
		if strings.Contains(line, `\`) || strings.Contains(line, " as ") {
			return nil, fmt.Errorf("line %d: %q: want `from .mod import a, b`", i+1, strings.TrimSpace(line))
		}
		if strings.Contains(line, "(") {
			for !strings.Contains(lines[i], ")") {
				i++
				if i == len(lines) {
					return nil, errors.New("unterminated import")
				}
			}
		}
	}
	return out.Bytes(), nil
}

// DebuggerReportScript is Python source for `python -c` that prints the
// wrapper's verdict on the debugger that Python loads (pydevd-pycharm if
// pycharm, else debugpy) as one tab-separated line: kind (supported,
// untested, unusable or absent), name, version, Python version, words.
// It is support.py itself, so `sparkdap doctor` reaches the verdict a
// worker would, from the same code.
func DebuggerReportScript(pycharm bool) string {
	src, err := fs.ReadFile(moduleFS, path.Join(packageDir, "support.py"))
	if err != nil {
		panic("workerwrap: " + err.Error()) // embedded: present in every build
	}
	call := "_report(False)"
	if pycharm {
		call = "_report(True)"
	}
	return string(src) + "\n" + call + "\n"
}
