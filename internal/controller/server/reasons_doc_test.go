package server

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// reasonsDoc is the reference every condition reason, event reason, state and phase must be
// in, backquoted, relative to this package's directory.
const reasonsDoc = "../../../docs/conditions.md"

// reasonsDocDirs are the packages whose reasons people see, relative to this package: the
// reconcilers of every kind (this check lives with the Server's, whose functions compute some
// reasons; it reads the other kinds' sources as files), the API types, the BMC client's failure reasons, the boot service and its boot
// stages, and the registry.
var reasonsDocDirs = []string{".", "../enroll", "../claim", "../maintenance", "../../../apis/metal/v1alpha1", "../../bmc", "../../bmc/redfish", "../../boot", "../../ignition", "../../registry"}

// reasonsDocComputed enumerates the reasons a function computes rather than spells out ("BMC" +
// the BMC's failure reason; "Power" + the power asked for + its delivery state), from the
// values the sources define. A function named *reason* that concatenates one needs an entry.
var reasonsDocComputed = map[string]func(src *reasonsDocSources) []string{
	"reasonOf": func(src *reasonsDocSources) []string {
		out := []string{reasonOf(errors.New("any other error"))}
		for _, r := range src.constsNamed("/apis/metal/v1alpha1", "BMCReason") {
			if r == metalv1alpha1.BMCReasonConnected {
				continue // a BMC that answers is no error
			}
			out = append(out, reasonOf(bmc.Errorf(r, "a failure")))
		}
		return out
	},
	"poweredReason": func(*reasonsDocSources) []string {
		var out []string
		for _, want := range []metalv1alpha1.Power{metalv1alpha1.PowerOn, metalv1alpha1.PowerOff} {
			for _, state := range fsm.Power.States {
				if state == metalv1alpha1.PowerShuttingDown && want != metalv1alpha1.PowerOff {
					continue // only a power-off is graceful (request)
				}
				out = append(out, poweredReason(&metalv1alpha1.PowerDelivery{Want: want, State: state}))
			}
		}
		return out
	},
}

// TestEveryReasonIsDocumented fails when the code can set a condition reason or record an event
// reason that docs/conditions.md does not name (as `Reason`), or when a state, phase or condition
// type is missing from it. The reasons are read from the sources: string constants whose name
// says Reason (and the boot stages), string literals given as the reason of setCondition, wait,
// notReady, Eventf and of condition, step and verdict literals, and the values of the functions
// that compute reasons. It reads files only: no apiserver.
func TestEveryReasonIsDocumented(t *testing.T) {
	src, err := readReasonsDocSources(reasonsDocDirs)
	if err != nil {
		t.Fatal(err)
	}
	documented, err := backquoted(reasonsDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range src.uncounted {
		t.Error(u)
	}
	// The collectors must each have found something: a path or a pattern gone stale would
	// otherwise pass this test with nothing checked.
	for _, kind := range []string{"const", "literal", "computed"} {
		if src.counts[kind] == 0 {
			t.Errorf("found no reasons of kind %q in %v: the test's patterns are out of date", kind, reasonsDocDirs)
		}
	}

	// States, phases and condition types.
	for _, s := range fsm.ServerStates {
		src.add(string(s), "fsm.ServerStates", "state")
	}
	for _, s := range fsm.ClaimPhases {
		src.add(string(s), "fsm.ClaimPhases", "state")
	}
	for _, s := range fsm.BMCStates {
		src.add(string(s), "fsm.BMCStates", "state")
	}
	for _, s := range fsm.MaintenanceStates {
		src.add(string(s), "fsm.MaintenanceStates", "state")
	}
	for _, s := range fsm.Power.States {
		src.add(string(s), "fsm.Power.States", "state")
	}
	for _, s := range src.constsNamed("/apis/metal/v1alpha1", "BootConfigurationState") {
		src.add(s, "metalv1alpha1.BootConfigurationState*", "state")
	}
	for _, dir := range []string{"/apis/metal/v1alpha1", "/internal/registry"} {
		for _, c := range src.constsNamed(dir, "Condition") {
			src.add(c, dir+" Condition*", "condition type")
		}
	}

	var missing []string
	for _, reason := range slices.Sorted(maps.Keys(src.found)) {
		if documented[reason] {
			continue
		}
		sites := src.found[reason]
		if len(sites) > 3 {
			sites = append(sites[:3:3], fmt.Sprintf("and %d more", len(sites)-3))
		}
		missing = append(missing, fmt.Sprintf("%s (%s)", reason, strings.Join(sites, "; ")))
	}
	if len(missing) > 0 {
		t.Errorf("%d reason(s), state(s) or condition type(s) the code sets are not in %s; add each, backquoted, "+
			"with what it means and what a person should do:\n  %s", len(missing), filepath.Base(reasonsDoc), strings.Join(missing, "\n  "))
	}
}

// reasonsDocSources is what the sources say: string constants by package, and every reason
// found with where.
type reasonsDocSources struct {
	root   string                       // the module's directory
	module string                       // the module's path
	consts map[string]map[string]string // package path (under the module) → name → value
	found  map[string][]string          // reason → where
	counts map[string]int               // kind of find → how many
	// uncounted are functions that compute reasons the test cannot enumerate.
	uncounted []string
}

// camelCase is what a reason looks like (the apiserver allows a little more); it keeps
// messages and formats given where a reason may also go out of the way.
var camelCase = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

func (s *reasonsDocSources) add(reason, where, kind string) {
	if !camelCase.MatchString(reason) {
		return
	}
	if !slices.Contains(s.found[reason], where) {
		s.found[reason] = append(s.found[reason], where)
	}
	s.counts[kind]++
}

// constsNamed is the values of the string constants of the package at dir (relative to the
// module) whose name starts with prefix, sorted.
func (s *reasonsDocSources) constsNamed(dir, prefix string) []string {
	var out []string
	for name, v := range s.consts[s.module+dir] {
		if strings.HasPrefix(name, prefix) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

type reasonsDocFile struct {
	pkg     string // the package's path
	file    *ast.File
	imports map[string]string // name in the file → package path
}

func readReasonsDocSources(dirs []string) (*reasonsDocSources, error) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		return nil, err
	}
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	src := &reasonsDocSources{root: root, module: module, consts: map[string]map[string]string{}, found: map[string][]string{}, counts: map[string]int{}}
	fset := token.NewFileSet()
	var files []reasonsDocFile
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return nil, err
		}
		pkg := module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		names, err := filepath.Glob(filepath.Join(abs, "*.go"))
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, reasonsDocFile{pkg: pkg, file: f, imports: importNames(f)})
		}
	}
	// Constants first: call sites name those of other packages.
	for _, f := range files {
		src.collectConsts(fset, f)
	}
	for _, f := range files {
		src.collectSites(fset, f)
	}
	return src, nil
}

func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", goMod)
}

func importNames(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if spec.Name != nil {
			name = spec.Name.Name
		}
		out[name] = p
	}
	return out
}

func (s *reasonsDocSources) where(fset *token.FileSet, pos token.Pos) string {
	p := fset.Position(pos)
	if rel, err := filepath.Rel(s.root, p.Filename); err == nil {
		return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
	}
	return p.String()
}

// collectConsts records the file's string constants, and as reasons those whose name says
// Reason and the boot stages (of type Stage: BootProgress reasons and boot service events).
func (s *reasonsDocSources) collectConsts(fset *token.FileSet, f reasonsDocFile) {
	if s.consts[f.pkg] == nil {
		s.consts[f.pkg] = map[string]string{}
	}
	for _, decl := range f.file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			typ, _ := vs.Type.(*ast.Ident)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				v, ok := stringLiteral(vs.Values[i])
				if !ok {
					continue
				}
				s.consts[f.pkg][name.Name] = v
				if strings.Contains(name.Name, "Reason") || (typ != nil && typ.Name == "Stage") {
					s.add(v, s.where(fset, name.Pos())+" "+name.Name, "const")
				}
			}
		}
	}
}

// reasonArgument is which argument of a call is a reason: Eventf(regarding, related, type,
// reason, action, note, ...) of events.EventRecorder; status.SetCondition(conds, generation, type,
// status, reason, message); the Server's condition functions (setReady(server, failed, reason,
// message), setDiscovered, setProvisioned, setCleaned and registry.SetHardwareRecord(server,
// reason, message)), and the claim's (setBound, setReady(claim, reason, message)); wait(reason, message, after) of the server reconciler;
// notReady(reason, format, ...) of the boot service; bmc.Errorf and bmc.Classify(reason, ...).
func reasonArgument(f reasonsDocFile, call *ast.CallExpr) int {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		switch fun.Name {
		case "setCondition":
			return 4
		case "setDiscovered", "setProvisioned", "setCleaned", "setBound":
			return 1
		case "setReady":
			if strings.HasSuffix(f.pkg, "/internal/controller/server") {
				return 2 // setReady(server, failed, reason, message)
			}
			return 1
		case "wait", "notReady":
			return 0
		case "Errorf", "Classify":
			if strings.HasSuffix(f.pkg, "/internal/bmc") {
				return 0
			}
		}
	case *ast.SelectorExpr:
		switch fun.Sel.Name {
		case "SetCondition":
			if x, ok := fun.X.(*ast.Ident); ok && strings.HasSuffix(f.imports[x.Name], "/internal/controller/status") {
				return 4
			}
		case "SetHardwareRecord":
			if x, ok := fun.X.(*ast.Ident); ok && strings.HasSuffix(f.imports[x.Name], "/internal/registry") {
				return 1
			}
		case "Eventf":
			if len(call.Args) >= 6 {
				return 3
			}
		case "Errorf", "Classify":
			if x, ok := fun.X.(*ast.Ident); ok && strings.HasSuffix(f.imports[x.Name], "/internal/bmc") {
				return 0
			}
		}
	}
	return -1
}

// collectSites records the reasons given at call sites and in literals (a condition's Reason,
// a step's, a poll's or a verdict's reason), and those returned, or computed, by functions named
// for reasons.
func (s *reasonsDocSources) collectSites(fset *token.FileSet, f reasonsDocFile) {
	ast.Inspect(f.file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if i := reasonArgument(f, n); i >= 0 && i < len(n.Args) {
				s.site(fset, f, n.Args[i])
			}
		case *ast.CompositeLit:
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if key, ok := kv.Key.(*ast.Ident); ok && (key.Name == "reason" || key.Name == "Reason") {
						s.site(fset, f, kv.Value)
					}
				}
			}
		case *ast.FuncDecl:
			if n.Body == nil || !strings.Contains(strings.ToLower(n.Name.Name), "reason") {
				return true
			}
			computed := false
			ast.Inspect(n.Body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.ReturnStmt:
					for _, r := range m.Results {
						s.site(fset, f, r)
					}
				case *ast.BinaryExpr:
					if m.Op == token.ADD && (isStringLiteral(m.X) || isStringLiteral(m.Y)) {
						computed = true
					}
				}
				return true
			})
			if !computed {
				return true
			}
			enumerate, ok := reasonsDocComputed[n.Name.Name]
			if !ok {
				s.uncounted = append(s.uncounted, fmt.Sprintf("%s: %s computes reasons: enumerate them in reasonsDocComputed", s.where(fset, n.Pos()), n.Name.Name))
				return true
			}
			for _, r := range enumerate(s) {
				s.add(r, s.where(fset, n.Pos())+" "+n.Name.Name, "computed")
			}
		}
		return true
	})
}

// site records the reason an expression gives, when it is a literal or a constant (a variable
// is someone else's reason, found where it is made).
func (s *reasonsDocSources) site(fset *token.FileSet, f reasonsDocFile, e ast.Expr) {
	if v, ok := s.resolve(f, e); ok {
		s.add(v, s.where(fset, e.Pos()), "literal")
	}
}

func (s *reasonsDocSources) resolve(f reasonsDocFile, e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return stringLiteral(e)
	case *ast.ParenExpr:
		return s.resolve(f, e.X)
	case *ast.Ident:
		v, ok := s.consts[f.pkg][e.Name]
		return v, ok
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			if p, ok := f.imports[x.Name]; ok {
				v, ok := s.consts[p][e.Sel.Name]
				return v, ok
			}
		}
	case *ast.CallExpr:
		if fun, ok := e.Fun.(*ast.Ident); ok && fun.Name == "string" && len(e.Args) == 1 {
			return s.resolve(f, e.Args[0])
		}
	}
	return "", false
}

func stringLiteral(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

func isStringLiteral(e ast.Expr) bool {
	_, ok := stringLiteral(e)
	return ok
}

// backquoted is every `span` of the Markdown file.
func backquoted(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	return out, nil
}
