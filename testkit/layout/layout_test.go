package layout

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sparkdap/sparkdap"

// notProduct are the top-level folders that hold tests, test kits and the
// benchmark; every other folder with Go code is the product.
var notProduct = map[string]bool{"testkit": true, "bench": true, "integration": true}

// importEdge is one import of a non-test Go file, both ends given by their
// path in the module ("dap", "internal/dapwire").
type importEdge struct {
	file, from, to string
}

// productImports lists the imports of the module's own packages made by the
// non-test Go files under root. Build constraints are ignored, so a file
// for another OS counts as well.
func productImports(t *testing.T, root string) []importEdge {
	t.Helper()
	var edges []importEdge
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		from := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if to, ok := strings.CutPrefix(p, module+"/"); ok {
				edges = append(edges, importEdge{file: filepath.ToSlash(rel), from: from, to: to})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return edges
}

func topFolder(pkg string) string {
	top, _, _ := strings.Cut(pkg, "/")
	return top
}

// layoutViolations returns what breaks the folders' rules, one line each.
func layoutViolations(edges []importEdge) []string {
	var bad []string
	for _, e := range edges {
		from, to := topFolder(e.from), topFolder(e.to)
		switch {
		case !notProduct[from] && notProduct[to]:
			bad = append(bad, e.file+": the product imports "+e.to+", which is for tests and the benchmark")
		case from == "internal" && to != "internal":
			bad = append(bad, e.file+": internal/ imports the product room "+e.to+"; internal/ holds what the rooms build on")
		}
	}
	return bad
}

func TestFoldersKeepTheirRoles(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module root at %s: %v", root, err)
	}
	edges := productImports(t, root)
	if len(edges) < 50 {
		t.Fatalf("found only %d imports of the module's packages under %s: the walk is broken", len(edges), root)
	}
	for _, v := range layoutViolations(edges) {
		t.Error(v)
	}
}

// maxModuleLines bounds a product module, Go or Python: a file past it
// holds more than one role.
const maxModuleLines = 800

// isProductModule reports whether rel, a file's path in the repository,
// is product code: Go or Python outside the tests, test kits and bench.
func isProductModule(rel string) bool {
	if notProduct[topFolder(rel)] {
		return false
	}
	name := filepath.Base(rel)
	switch {
	case strings.HasSuffix(name, "_test.go"):
		return false
	case strings.HasSuffix(name, ".go"):
		return true
	case strings.HasSuffix(name, ".py"):
		return !strings.HasPrefix(name, "test_") && name != "conftest.py" && !slices.Contains(strings.Split(rel, "/"), "tests")
	}
	return false
}

func TestNoProductModuleOverLimit(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || !isProductModule(filepath.ToSlash(rel)) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n > maxModuleLines {
			t.Errorf("%s has %d lines, over %d: split it by role", rel, n, maxModuleLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d product modules under %s: the walk is broken", checked, root)
	}
}

func TestIsProductModule(t *testing.T) {
	tests := map[string]bool{
		"dap/hub.go":                              true,
		"dap/hub_test.go":                         false,
		"cmd/sparkdap/liveview/render.go":         true,
		"capture/python/sparkdap_replay_data.py":  true,
		"capture/python/tests/test_capture.py":    false,
		"workerwrap/python/tests/conftest.py":     false,
		"workerwrap/python/remote_debug/tasks.py": true,
		"testkit/kubetest/cluster.go":             false,
		"bench/storm.go":                          false,
		"integration/yarn_test.go":                false,
		"README.md":                               false,
	}
	for rel, want := range tests {
		if got := isProductModule(rel); got != want {
			t.Errorf("isProductModule(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestLayoutViolations(t *testing.T) {
	tests := []struct {
		name string
		edge importEdge
		want string
	}{
		{"a room imports a library", importEdge{"dap/hub.go", "dap", "internal/dapwire"}, ""},
		{"a room imports a room", importEdge{"doctor/doctor.go", "doctor", "dap"}, ""},
		{"the CLI imports a test kit", importEdge{"cmd/sparkdap/serve.go", "cmd/sparkdap", "testkit/testenv"}, "is for tests"},
		{"the demo imports a test kit", importEdge{"demo/demo.go", "demo", "testkit/testenv"}, "is for tests"},
		{"an example imports a test kit", importEdge{"examples/loans/files.go", "examples/loans", "testkit/testenv"}, "is for tests"},
		{"a room imports the benchmark", importEdge{"dap/hub.go", "dap", "bench"}, "is for tests"},
		{"a library imports a room", importEdge{"internal/liveview/render.go", "internal/liveview", "dap"}, "internal/ imports the product room dap"},
		{"a test kit imports a room", importEdge{"testkit/watchtest/w.go", "testkit/watchtest", "selection"}, ""},
		{"the benchmark imports a test kit", importEdge{"bench/latency.go", "bench", "testkit/testenv"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := layoutViolations([]importEdge{tt.edge})
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("got %q, want no violation", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("got %q, want one naming %q", got, tt.want)
			}
		})
	}
}
