package courier_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// TestEveryCodeHasACodesForm: the form Code's doc gives, which a sender
// keeps a receiver's code in, holds for every code courier declares.
func TestEveryCodeHasACodesForm(t *testing.T) {
	t.Parallel()
	form := regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)
	f, err := parser.ParseFile(token.NewFileSet(), "code.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Errorf("%s: not a string literal", vs.Names[0])
			return true
		}
		code, _ := strconv.Unquote(lit.Value)
		if !form.MatchString(code) {
			t.Errorf("%s = %q has not a code's form", vs.Names[0], code)
		}
		n++
		return true
	})
	if n < 60 {
		t.Fatalf("found %d codes in code.go, want all of them", n)
	}
}
