package testenv

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkipIfShort(t *testing.T) {
	f := flag.Lookup("test.short")
	was := f.Value.String()
	t.Cleanup(func() { f.Value.Set(was) })
	for _, short := range []string{"false", "true"} {
		if err := f.Value.Set(short); err != nil {
			t.Fatal(err)
		}
		r := &recorder{TB: t}
		SkipIfShort(r, "starts Spark")
		if want := short == "true"; (r.skipped != "") != want || (want && !strings.Contains(r.skipped, "starts Spark")) {
			t.Errorf("-short=%s: skipped %q; want a skip saying why only under -short", short, r.skipped)
		}
	}
}

// Every slow test is gated by SkipIfShort, so that scripts/test --quick
// means one thing: a hand-written `if testing.Short() { t.Skip(...) }`
// elsewhere is a second gate to keep in step.
func TestNoOtherShortGate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if s, ok := n.(*ast.IfStmt); ok && callsShort(s.Cond) && skips(s.Body) {
				rel, _ := filepath.Rel(root, fset.Position(s.Pos()).Filename)
				t.Errorf("%s:%d: skips on testing.Short() itself; call testenv.SkipIfShort(t, why)",
					rel, fset.Position(s.Pos()).Line)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// callsShort reports whether e calls testing.Short.
func callsShort(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Short" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testing" {
				found = true
			}
		}
		return !found
	})
	return found
}

// skips reports whether b calls a Skip method (Skip, Skipf, SkipNow).
func skips(b *ast.BlockStmt) bool {
	found := false
	ast.Inspect(b, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
			found = true
		}
		return !found
	})
	return found
}
