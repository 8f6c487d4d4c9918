package examplecheck_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// root is the repository; every package under it but internal/, the
// examples/ programs and testdata is public, contrib's modules included.
const root = "../.."

// TestExamplesAreSelfContained: an Example's body, as go doc shows it,
// names nothing declared at top level in a _test.go file (an unexported
// helper the reader never sees), unless it is a whole-file example
// (go/doc's rule: the file's only Example, no tests, other declarations),
// which go doc shows whole, its declarations with it (but not another
// test file's). An Example in a
// package's internal test package does not name the package's unexported
// identifiers either.
func TestExamplesAreSelfContained(t *testing.T) {
	for _, p := range publicPackages(t) {
		for _, ex := range p.examples {
			for _, id := range identsIn(ex.body) {
				switch {
				case id.Obj != nil:
					// Resolved in the example's own file: a local name, or one
					// of the file's top-level declarations.
					if p.topDecls[id.Obj.Decl] && !ex.wholeFile {
						t.Errorf("%s: %s names %s, declared at top level in %s: go doc does not show it",
							p.pos(id), ex.name, id.Name, p.fileOf[id.Obj.Decl])
					}
				case p.testNames[id.Name] != "":
					t.Errorf("%s: %s names %s, declared at top level in %s: go doc does not show it",
						p.pos(id), ex.name, id.Name, p.testNames[id.Name])
				case p.internalTest && p.unexported[id.Name] != "":
					t.Errorf("%s: %s names %s, unexported in %s: an application cannot",
						p.pos(id), ex.name, id.Name, p.unexported[id.Name])
				}
			}
		}
	}
}

// TestExamplesHandleTheirErrors: no call's last result, where Go puts an
// error, is assigned to _ in an Example (nor in the declarations a
// whole-file example shows): the reader copies `v, _ := f()` into an
// application. Without types the check cannot tell an error from a bool,
// so an Example checks an ok as it checks an error.
func TestExamplesHandleTheirErrors(t *testing.T) {
	for _, p := range publicPackages(t) {
		for _, ex := range p.examples {
			ast.Inspect(ex.shown, func(n ast.Node) bool {
				a, ok := n.(*ast.AssignStmt)
				if !ok || len(a.Rhs) != 1 {
					return true
				}
				call, ok := a.Rhs[0].(*ast.CallExpr)
				if ok && isBlank(a.Lhs[len(a.Lhs)-1]) {
					t.Errorf("%s: %s assigns the last result of %s to _", p.pos(a), ex.name, exprString(call.Fun))
				}
				return true
			})
		}
	}
}

type example struct {
	name      string
	body      *ast.BlockStmt
	shown     ast.Node // what go doc shows: the function, or its whole file
	wholeFile bool
}

type pkg struct {
	fset         *token.FileSet
	examples     []example
	topDecls     map[any]bool      // top-level declarations of the _test.go files
	fileOf       map[any]string    // their files
	testNames    map[string]string // top-level names of the _test.go files, and their file
	unexported   map[string]string // unexported top-level names of the package's own files
	internalTest bool
}

func (p *pkg) pos(n ast.Node) string {
	pos := p.fset.Position(n.Pos())
	rel, err := filepath.Rel(root, pos.Filename)
	if err != nil {
		rel = pos.Filename
	}
	return fmt.Sprintf("%s:%d", rel, pos.Line)
}

// publicPackages parses every public package that has an Example, one
// pkg per package name (a directory's internal and external test
// packages apart), once for both tests.
func publicPackages(t *testing.T) []*pkg {
	t.Helper()
	pkgs, err := parsePublic()
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found Examples in %d packages; the walk is broken", len(pkgs))
	}
	return pkgs
}

var parsePublic = sync.OnceValues(func() ([]*pkg, error) {
	var pkgs []*pkg
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "internal" || rel == "examples") {
			return filepath.SkipDir
		}
		ps, err := parseDir(path)
		pkgs = append(pkgs, ps...)
		return err
	})
	return pkgs, err
})

func parseDir(dir string) ([]*pkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	byName := map[string][]*ast.File{}
	var code []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(e.Name(), "_test.go") {
			code = append(code, f)
			continue
		}
		byName[f.Name.Name] = append(byName[f.Name.Name], f)
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var pkgs []*pkg
	for _, name := range names {
		p := &pkg{fset: fset, topDecls: map[any]bool{}, fileOf: map[any]string{}, testNames: map[string]string{},
			unexported: map[string]string{}, internalTest: !strings.HasSuffix(name, "_test")}
		for _, f := range byName[name] {
			file := filepath.Base(fset.Position(f.Pos()).Filename)
			for _, obj := range f.Scope.Objects {
				p.topDecls[obj.Decl] = true
				p.fileOf[obj.Decl] = file
				p.testNames[obj.Name] = file
			}
		}
		for _, f := range code {
			if f.Name.Name != name {
				continue
			}
			for _, obj := range f.Scope.Objects {
				if !ast.IsExported(obj.Name) {
					p.unexported[obj.Name] = filepath.Base(fset.Position(f.Pos()).Filename)
				}
			}
		}
		for _, f := range byName[name] {
			whole := map[string]bool{}
			for _, ex := range doc.Examples(f) {
				if _, ok := ex.Code.(*ast.File); ok {
					whole["Example"+ex.Name] = true
				}
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
					continue
				}
				ex := example{name: fn.Name.Name, body: fn.Body, shown: fn, wholeFile: whole[fn.Name.Name]}
				if ex.wholeFile {
					ex.shown = f
				}
				p.examples = append(p.examples, ex)
			}
		}
		if len(p.examples) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// identsIn lists the identifiers body uses as names: not a selector's
// field or method, not a composite literal's field key.
func identsIn(body ast.Node) []*ast.Ident {
	var ids []*ast.Ident
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			ast.Inspect(n.X, visit)
			return false
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); !ok || id.Obj != nil {
				ast.Inspect(n.Key, visit)
			}
			ast.Inspect(n.Value, visit)
			return false
		case *ast.Ident:
			ids = append(ids, n)
		}
		return true
	}
	ast.Inspect(body, visit)
	return ids
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.IndexExpr:
		return exprString(e.X)
	case *ast.IndexListExpr:
		return exprString(e.X)
	case *ast.CallExpr:
		return exprString(e.Fun) + "(…)"
	case *ast.FuncLit:
		return "func literal"
	}
	return fmt.Sprintf("%T", e)
}
