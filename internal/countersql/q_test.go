package countersql_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"
)

// Every q call in the package passes as many names as its SQL has %: q
// writes each % as the next name, and the calls are checked here, where a
// mismatch fails the build's tests, rather than by a panic at run time.
// The SQL of a call is its string literals, joined by + with what the
// package computes (percentsIn).
func TestEveryQCallHasANameForEachPercent(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "q" || len(call.Args) < 2 {
					return true
				}
				pos := fset.Position(call.Pos())
				if call.Ellipsis.IsValid() {
					t.Errorf("%s: q with names... cannot be checked; spell the names out", pos)
					return true
				}
				percents, ok := percentsIn(call.Args[1])
				if !ok {
					t.Errorf("%s: q's SQL is not a sum of string literals and values", pos)
					return true
				}
				if names := len(call.Args) - 2; names != percents {
					t.Errorf("%s: q has %d names for %d %%", pos, names, percents)
				}
				checked++
				return true
			})
		}
	}
	if checked < 200 {
		t.Fatalf("checked %d q calls; the package has more than 200", checked)
	}
}

// percentsIn counts the % of the string literals of e, a sum of string
// literals and other operands: the others are what the package computes
// (type names, operators, aliases, numbers), none of which holds a %. ok
// is false when e is not such a sum.
func percentsIn(e ast.Expr) (n int, ok bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return 0, false
		}
		s, err := strconv.Unquote(e.Value)
		return strings.Count(s, "%"), err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return 0, false
		}
		a, okA := percentsIn(e.X)
		b, okB := percentsIn(e.Y)
		return a + b, okA && okB
	case *ast.ParenExpr:
		return percentsIn(e.X)
	case *ast.Ident, *ast.SelectorExpr, *ast.CallExpr, *ast.IndexExpr:
		return 0, true
	}
	return 0, false
}
