package component_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowed are the places that may start a goroutine or recover: this
// package (the guard), internal/ (its wrappers for the other modules), and
// the scheduler's runner, whose per-task deferred call is open-coded.
var allowed = []string{"component/", "internal/", "schedulers/parallel.go"}

// TestNoBareGoOrRecover parses every non-test Go file of the root module
// and fails on a go statement or a call of the builtin recover outside the
// allow-list, naming file:line: user code runs under component.Call, and
// goroutines start with Lifecycle.Go, held, guarded and recorded.
func TestNoBareGoOrRecover(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var sites []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || isModule(path)) {
				return filepath.SkipDir // another module of the workspace, or not code
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") ||
			slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(rel, a) }) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				sites = append(sites, fmt.Sprintf("%s: go statement", fset.Position(n.Pos())))
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "recover" && id.Obj == nil { // the builtin resolves to no object
					sites = append(sites, fmt.Sprintf("%s: recover()", fset.Position(n.Pos())))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) > 0 {
		t.Errorf("%d sites start a goroutine or recover outside the guard; use component.Call, Catch or Lifecycle.Go:\n\t%s",
			len(sites), strings.Join(sites, "\n\t"))
	}
}

// isModule reports whether dir holds a go.mod of its own.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
