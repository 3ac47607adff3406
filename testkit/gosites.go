package testkit

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
)

// BareGoSites parses every non-test Go file of the module rooted at dir
// (its nested modules, testdata and dot-directories skipped) and returns,
// as "file:line:col: go statement", "...: recover()" or "...: Go(f) of a
// WaitGroup or group", each go statement, each call of the builtin recover
// and each one-argument Go method call (sync.WaitGroup.Go, errgroup's)
// outside allowed: paths relative to
// dir, slash-separated, matched as prefixes ("internal/", "guard.go").
// aggflow's modules start goroutines with component's Lifecycle.Go or
// component.Go and run user code under component.Call or Catch, so that a
// panic or runtime.Goexit is caught and recorded: each module's test fails
// on what this returns. The error is the walk's or a parse's. Cost: a parse
// of every file.
func BareGoSites(dir string, allowed ...string) ([]string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
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
				// A Go method of one argument starts f unguarded:
				// sync.WaitGroup's, errgroup.Group's (component.Go and
				// Lifecycle.Go take two).
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" && len(n.Args) == 1 {
					sites = append(sites, fmt.Sprintf("%s: Go(f) of a WaitGroup or group", fset.Position(n.Pos())))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, s := range sites { // relative to dir: shorter, and stable across machines
		sites[i] = filepath.ToSlash(strings.TrimPrefix(s, root+string(filepath.Separator)))
	}
	return sites, nil
}

// isModule reports whether dir holds a go.mod of its own.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
