package capture

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoFrontEndImport: both front ends (dap, pycharm) use this package,
// which depends on neither.
func TestNoFrontEndImport(t *testing.T) {
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
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "github.com/sparkdap/sparkdap/dap" || p == "github.com/sparkdap/sparkdap/pycharm" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
