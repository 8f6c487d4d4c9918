// Package codetest reads the codes courier declares, for the tests that
// hold courier's answers to them: a code is findable from code.go, so the
// list is that file's, parsed, not a copy that could drift from it.
package codetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
)

// Declared returns every courier.Code constant code.go declares, in its
// order, by name. tb fails if the file cannot be read, if a Code's value
// is not a string literal, or if it finds fewer than 60 (a parse that
// missed the declarations).
func Declared(tb testing.TB) (names []string, codes []courier.Code) {
	tb.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("codetest: no source path to find code.go from")
	}
	file := filepath.Join(filepath.Dir(self), "..", "..", "code.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
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
			tb.Fatalf("code.go: %s is not a string literal", vs.Names[0])
		}
		code, _ := strconv.Unquote(lit.Value)
		names, codes = append(names, vs.Names[0].Name), append(codes, courier.Code(code))
		return true
	})
	if len(codes) < 60 {
		tb.Fatalf("codetest: found %d codes in %s, want all of them", len(codes), file)
	}
	return names, codes
}

// Set returns the codes Declared returns, as a set.
func Set(tb testing.TB) map[courier.Code]bool {
	tb.Helper()
	_, codes := Declared(tb)
	set := make(map[courier.Code]bool, len(codes))
	for _, c := range codes {
		set[c] = true
	}
	return set
}
