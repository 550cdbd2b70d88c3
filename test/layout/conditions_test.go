package layout

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// conditionSetters are the functions that set or remove a condition, and which of their
// arguments are the conditions and the condition's type (-1: the type is the Type of the
// metav1.Condition literal given as the argument after the conditions).
var conditionSetters = map[string]struct{ conds, typ int }{
	module + "/internal/controller/status.SetCondition":      {0, 2},
	"k8s.io/apimachinery/pkg/api/meta.SetStatusCondition":    {0, -1},
	"k8s.io/apimachinery/pkg/api/meta.RemoveStatusCondition": {0, 1},
}

// conditionWrappers may pass a condition type they were given on: the one function every
// reconciler sets conditions through.
var conditionWrappers = map[string]bool{
	module + "/internal/controller/status.SetCondition": true,
}

// TestEachConditionIsSetInOnePlace: every condition of every kind is set (or removed) by one
// function, so that what a condition means, and when it is True, is read in one place. It
// type-checks the product's packages and follows every call that sets or removes a condition
// to the kind whose status it writes and the condition type it names, and fails when one
// (kind, type) is written from two functions, or when a call's kind or type cannot be told.
func TestEachConditionIsSetInOnePlace(t *testing.T) {
	pkgs := typeCheck(t, module+"/internal/...", module+"/apis/...")
	where := map[string]map[string]bool{} // "Kind Type" → functions
	var unknown []string
	for _, p := range pkgs {
		for _, f := range p.files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				fn := p.path + "." + funcName(fd)
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if as, ok := n.(*ast.AssignStmt); ok {
						for _, lhs := range as.Lhs {
							if writesConditions(lhs) {
								pos := p.fset.Position(as.Pos())
								unknown = append(unknown, fmt.Sprintf("%s:%d (%s)", strings.TrimPrefix(pos.Filename, p.root+"/"), pos.Line, fn))
							}
						}
						return true
					}
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					setter, ok := conditionSetters[calleeName(p.info, call)]
					if !ok || len(call.Args) <= max(setter.conds, setter.typ) {
						return true
					}
					pos := p.fset.Position(call.Pos())
					at := fmt.Sprintf("%s:%d (%s)", strings.TrimPrefix(pos.Filename, p.root+"/"), pos.Line, fn)
					kind := kindOf(p.info, call.Args[setter.conds])
					typ := conditionType(p.info, call, setter.typ)
					if conditionWrappers[fn] {
						return true
					}
					if kind == "" || typ == "" {
						unknown = append(unknown, at)
						return true
					}
					key := kind + " " + typ
					if where[key] == nil {
						where[key] = map[string]bool{}
					}
					where[key][fn] = true
					return true
				})
			}
		}
	}
	for _, u := range unknown {
		t.Errorf("%s sets a condition whose kind or type is not written out, or writes the conditions directly: set it with status.SetCondition(&obj.Status.Conditions, …, a condition type constant, …)", u)
	}
	var keys []string
	for k := range where {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(where[k]) > 1 {
			var fns []string
			for fn := range where[k] {
				fns = append(fns, strings.TrimPrefix(fn, module+"/"))
			}
			sort.Strings(fns)
			t.Errorf("the %s condition is set in %d places: %s", k, len(fns), strings.Join(fns, ", "))
		}
	}
	if len(where) < 10 {
		t.Errorf("found only %d conditions set: the check no longer sees the code's calls", len(where))
	}
}

// writesConditions says whether an assignment's target is an object's conditions, or one of
// them: x.Status.Conditions, x.Status.Conditions[i], x.Status.Conditions[i].Field.
func writesConditions(lhs ast.Expr) bool {
	for {
		switch e := lhs.(type) {
		case *ast.IndexExpr:
			lhs = e.X
			continue
		case *ast.SelectorExpr:
			if st, ok := e.X.(*ast.SelectorExpr); ok && e.Sel.Name == "Conditions" && st.Sel.Name == "Status" {
				return true
			}
			lhs = e.X
			continue
		case *ast.StarExpr:
			lhs = e.X
			continue
		}
		return false
	}
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// calleeName is the called function's package path and name, or "".
func calleeName(info *types.Info, call *ast.CallExpr) string {
	var id *ast.Ident
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	default:
		return ""
	}
	fn, ok := info.Uses[id].(*types.Func)
	if !ok || fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path() + "." + fn.Name()
}

// kindOf is the kind whose conditions &x.Status.Conditions are, or "".
func kindOf(info *types.Info, arg ast.Expr) string {
	u, ok := arg.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return ""
	}
	conds, ok := u.X.(*ast.SelectorExpr)
	if !ok || conds.Sel.Name != "Conditions" {
		return ""
	}
	st, ok := conds.X.(*ast.SelectorExpr)
	if !ok || st.Sel.Name != "Status" {
		return ""
	}
	tv, ok := info.Types[st.X]
	if !ok {
		return ""
	}
	typ := tv.Type
	if ptr, ok := typ.(*types.Pointer); ok {
		typ = ptr.Elem()
	}
	named, ok := typ.(*types.Named)
	if !ok {
		return ""
	}
	return named.Obj().Name()
}

// conditionType is the constant condition type a call names (argument i, or the Type field of
// the condition literal after the conditions when i is -1), or "".
func conditionType(info *types.Info, call *ast.CallExpr, i int) string {
	var expr ast.Expr
	if i >= 0 {
		expr = call.Args[i]
	} else {
		lit, ok := call.Args[1].(*ast.CompositeLit)
		if !ok {
			return ""
		}
		for _, e := range lit.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Type" {
					expr = kv.Value
				}
			}
		}
	}
	if expr == nil {
		return ""
	}
	tv, ok := info.Types[expr]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return ""
	}
	return constant.StringVal(tv.Value)
}

// typedPackage is a package of the module, parsed and type-checked (its non-test files).
type typedPackage struct {
	path, root string
	fset       *token.FileSet
	files      []*ast.File
	info       *types.Info
}

// typeCheck type-checks the packages the patterns name from their sources, their imports
// from the compiler's export data (go list -export), as go vet does.
func typeCheck(t *testing.T, patterns ...string) []typedPackage {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,DepOnly,Module"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		DepOnly                 bool
		Module                  *struct{ Dir string }
	}
	exports := map[string]string{}
	var targets []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var l listed
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		exports[l.ImportPath] = l.Export
		if !l.DepOnly {
			targets = append(targets, l)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var pkgs []typedPackage
	for _, l := range targets {
		p := typedPackage{path: l.ImportPath, fset: fset, info: &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}}
		if l.Module != nil {
			p.root = l.Module.Dir
		}
		for _, name := range l.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(l.Dir, name), nil, 0)
			if err != nil {
				t.Fatalf("parsing %s: %v", name, err)
			}
			p.files = append(p.files, f)
		}
		if _, err := (&types.Config{Importer: imp}).Check(l.ImportPath, fset, p.files, p.info); err != nil {
			t.Fatalf("type-checking %s: %v", l.ImportPath, err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list named no package")
	}
	return pkgs
}
