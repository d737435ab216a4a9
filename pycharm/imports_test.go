package pycharm_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoDAPImport: the PyCharm front end shares only the executor-side
// core (worker, pathmap, internal/wirequeue) with the DAP front end, never
// package dap itself, so a third front end can be added the same way.
func TestNoDAPImport(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/sparkdap/sparkdap/dap" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
