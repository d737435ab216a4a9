package testenv

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// NoImports fails t if a non-test Go file of the package in the current
// directory imports one of forbidden: how a package's tests hold its
// place in the architecture (the PyCharm front end never imports the DAP
// one; the shared capture package imports neither).
func NoImports(t *testing.T, forbidden ...string) {
	t.Helper()
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
			if p, _ := strconv.Unquote(imp.Path.Value); slices.Contains(forbidden, p) {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
