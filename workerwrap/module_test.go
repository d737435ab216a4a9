package workerwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

func TestBuildModule(t *testing.T) {
	init := "\"\"\"doc\"\"\"\nMODULES = (\n    \"a\",\n    \"b\",\n)\n"
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // in this order in the output
		notWant []string
		err     string
	}{
		{
			name: "order and relative imports",
			files: map[string]string{
				"b.py": "import os\n\nfrom .a import (\n    x,\n    y,\n)\n\n\ndef g():\n    return x + y\n",
				"a.py": "x = 1\ny = 2\n",
			},
			want:    []string{"# --- remote_debug/a.py", "x = 1", "# --- remote_debug/b.py", "import os", "def g():"},
			notWant: []string{"from .a", "    x,\n"},
		},
		{name: "unlisted module", files: map[string]string{"a.py": "", "b.py": "", "c.py": ""}, err: "c.py is not in MODULES"},
		{name: "aliased import", files: map[string]string{"a.py": "", "b.py": "from .a import x as y\n"}, err: "want `from .mod import a, b`"},
		{name: "import in a function", files: map[string]string{"a.py": "", "b.py": "def f():\n    from .a import x\n"}, err: "at the top level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{packageDir + "/__init__.py": {Data: []byte(init)}}
			for name, src := range tc.files {
				fsys[packageDir+"/"+name] = &fstest.MapFile{Data: []byte(src)}
			}
			out, err := buildModule(fsys)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, at := string(out), 0
			for _, w := range tc.want {
				i := strings.Index(s[at:], w)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in:\n%s", w, s)
				}
				at += i + len(w)
			}
			for _, w := range tc.notWant {
				if strings.Contains(s, w) {
					t.Errorf("%q left in:\n%s", w, s)
				}
			}
		})
	}
}

// The rendered file imports in Python as one module, every top-level name
// of every module of the package in it, and reads its baked settings.
func TestRenderedModuleHasEveryName(t *testing.T) {
	python := testenv.Python(t)
	dir := t.TempDir()
	o := NewOptions()
	o.Partitions = []int{3}
	if err := WriteFile(filepath.Join(dir, FileName), o); err != nil {
		t.Fatal(err)
	}
	pkg, err := filepath.Abs(packageDir)
	if err != nil {
		t.Fatal(err)
	}
	const check = `
import ast, os, sys
sys.path.insert(0, sys.argv[1])
import remote_debug as rd
ns = {}
exec(open(os.path.join(sys.argv[2], "__init__.py")).read(), ns)
missing = []
for mod in ns["MODULES"]:
    for node in ast.parse(open(os.path.join(sys.argv[2], mod + ".py")).read()).body:
        names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []
        if isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        missing += ["%s.%s" % (mod, n) for n in names if not hasattr(rd, n)]
cfg = rd._load_config()
print("MISSING", " ".join(missing))
print("CONFIG", cfg["proxy"][0], cfg["proxy"][1], cfg["partitions"])
`
	cmd := exec.Command(python, "-c", check, dir, pkg)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "MISSING \n") {
		t.Errorf("names missing from the rendered file: %s", got)
	}
	if !strings.Contains(got, "CONFIG 127.0.0.1 5678 [3]\n") {
		t.Errorf("settings read back: %s", got)
	}
}
