package capi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryReasonIsInTheGuide fails when a reason of the provider's API (a string constant whose
// name says Reason) is not in docs/capi.md, backquoted, or when the provider sets a condition or
// records an event with a reason spelt as a literal instead of one of those constants. Files
// only: no apiserver.
func TestEveryReasonIsInTheGuide(t *testing.T) {
	guide, err := os.ReadFile("../../docs/capi.md")
	require.NoError(t, err)
	reasons := stringConsts(t, "../../apis/infrastructure/v1alpha1", "Reason")
	require.GreaterOrEqual(t, len(reasons), 10, "the reason constants are found")
	for name, value := range reasons {
		assert.Contains(t, string(guide), "`"+value+"`", "docs/capi.md does not explain %s (%s)", value, name)
	}

	// Reasons are the constants, never literals: setCondition's 5th argument, wait's and
	// notReady's 1st, Eventf's 4th.
	argOf := map[string]int{"setCondition": 4, "wait": 0, "notReady": 0, "Eventf": 3}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	calls := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := ""
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			i, ok := argOf[name]
			if !ok || len(call.Args) <= i {
				return true
			}
			calls++
			if lit, ok := call.Args[i].(*ast.BasicLit); ok {
				t.Errorf("%s: %s sets reason %s as a literal: make it a constant of apis/infrastructure/v1alpha1", file, name, lit.Value)
			}
			return true
		})
	}
	assert.Greater(t, calls, 10, "the reason-setting calls are found")
}

// stringConsts are the string constants of the package in dir whose names contain word.
func stringConsts(t *testing.T, dir, word string) map[string]string {
	t.Helper()
	out := map[string]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.Contains(name.Name, word) || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}
