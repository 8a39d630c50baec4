package framework

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// make e2e runs the suite once per plugin (PluginEnv). The local pass,
// the full one, runs every test; a cloud's pass runs only what touches
// its cloud. A test says which by a marker, the first statement of its
// body, which ReadPlan reads from the source before any test runs:
//
//   - no marker: a core test (probes, volumes, DNS, the security
//     context, …): it exercises nothing a cloud plugin does, and with a
//     simulator its cells would be the same local cells, so only the
//     full pass runs it;
//   - PluginPath(t): the test exercises the plugin path (launch, boot,
//     join, sizing from the catalog, a cell's end, …): every pass runs it;
//   - AlsoIn(t, cloud): a core test that exercises something of one cloud
//     only incidentally (a takeover adopting that cloud's instances),
//     kept in that cloud's pass on purpose;
//   - Only(t, clouds...): a test about those clouds' simulators (their
//     faults, their metadata): only their passes run it.
//
// A new test is therefore core unless it says otherwise.

// PluginEnv names the variable that picks the pass: the plugin kip runs
// with (local, the default, aws, gce or azure).
const PluginEnv = "KIP_E2E_PLUGIN"

// AllEnv names the variable that makes a cloud's pass run every test
// the full pass runs, besides its own: KIP_E2E_ALL=1.
const AllEnv = "KIP_E2E_ALL"

// Passes are the suite's passes, in make e2e's order: the full pass
// first.
var Passes = []string{PluginLocal, PluginAWS, PluginGCE, PluginAzure}

// clouds are the passes that run the suite through a cloud simulator.
var clouds = Passes[1:]

// Pass is this run's pass: $KIP_E2E_PLUGIN, local when unset.
func Pass() string {
	if p := os.Getenv(PluginEnv); p != "" {
		return p
	}
	return PluginLocal
}

// PluginPath marks a test that exercises the plugin path: every pass
// runs it. It must be the first statement of the Test function (ReadPlan
// finds it there) and does nothing at run time.
func PluginPath(t testing.TB) { t.Helper() }

// AlsoIn marks a core test that cloud's pass runs too, on purpose,
// because it exercises something of that cloud incidentally (why); the
// full pass runs it as every core test. First statement of the Test
// function, as PluginPath.
func AlsoIn(t testing.TB, cloud, why string) { t.Helper() }

// Only marks a test about clouds' simulators: their passes run it, the
// full pass does not. At run time it skips the test in another pass (a
// cloud's pass with KIP_E2E_ALL runs every test). First statement of
// the Test function, as PluginPath.
func Only(t testing.TB, clouds ...string) {
	t.Helper()
	if pass := Pass(); !slices.Contains(clouds, pass) {
		t.Skipf("about the %s simulator: runs in the %s pass of make e2e, not the %s one",
			strings.Join(clouds, ", "), strings.Join(clouds, ", "), pass)
	}
}

// Plan is which pass runs each test of a package, as its markers say.
type Plan struct {
	// passes holds each Test function's passes, in Passes' order.
	passes map[string][]string
}

// markers are the marker functions ReadPlan knows.
var markers = map[string]bool{"PluginPath": true, "AlsoIn": true, "Only": true}

// pluginConsts are the constants a marker may name a cloud by.
var pluginConsts = map[string]string{"PluginAWS": PluginAWS, "PluginGCE": PluginGCE, "PluginAzure": PluginAzure}

// ReadPlan reads the Test functions of the package in dir (its _test.go
// files) and their markers. A marker anywhere but as a Test function's
// first statement, or naming no cloud, is an error: the plan would lose
// the test's cloud passes without a word.
func ReadPlan(dir string) (*Plan, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, fmt.Errorf("reading the test plan: %w", err)
	}
	sort.Strings(files)
	fset := token.NewFileSet()
	p := &Plan{passes: map[string][]string{}}
	var errs []error
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("reading the test plan: %w", err)
		}
		if !e2eBuild(f) {
			continue // not in the e2e test binary
		}
		alias := frameworkName(f)
		if alias == "" {
			// Tests that do not import the framework are core.
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && isTest(fn) {
					p.passes[fn.Name.Name] = []string{PluginLocal}
				}
			}
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var first ast.Node
			if len(fn.Body.List) > 0 {
				first = fn.Body.List[0]
			}
			var passes []string
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				name := markerName(call, alias)
				if name == "" {
					return true
				}
				at := fset.Position(call.Pos())
				stmt, isStmt := first.(*ast.ExprStmt)
				switch {
				case !isTest(fn):
					errs = append(errs, fmt.Errorf("%s: %s.%s in %s: a marker belongs in a Test function", at, alias, name, fn.Name.Name))
				case !isStmt || stmt.X != call:
					errs = append(errs, fmt.Errorf("%s: %s.%s in %s: a marker must be the function's first statement", at, alias, name, fn.Name.Name))
				default:
					var err error
					if passes, err = markerPasses(name, call.Args); err != nil {
						errs = append(errs, fmt.Errorf("%s: %s.%s in %s: %w", at, alias, name, fn.Name.Name, err))
					}
				}
				return true
			})
			if !isTest(fn) {
				continue
			}
			if passes == nil {
				passes = []string{PluginLocal}
			}
			p.passes[fn.Name.Name] = passes
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("reading the test plan: %w", errors.Join(errs...))
	}
	return p, nil
}

// e2eBuild says whether f's build constraint takes it into this
// platform's test binary built with the e2e tag.
func e2eBuild(f *ast.File) bool {
	for _, group := range f.Comments {
		if group.Pos() >= f.Package {
			break
		}
		for _, c := range group.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return true // the compiler will say
			}
			return expr.Eval(func(tag string) bool {
				return tag == "e2e" || tag == runtime.GOOS || tag == runtime.GOARCH || tag == "unix" ||
					(tag == "race" && testRace) || strings.HasPrefix(tag, "go1.")
			})
		}
	}
	return true
}

// frameworkName is the name f imports this package under; empty if it
// does not.
func frameworkName(f *ast.File) string {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path != "github.com/kipcell/kip/test/e2e/framework" {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return "framework"
	}
	return ""
}

// isTest says whether fn is a Test function (TestMain is not).
func isTest(fn *ast.FuncDecl) bool {
	name := fn.Name.Name
	return fn.Recv == nil && strings.HasPrefix(name, "Test") && name != "TestMain"
}

// markerName is the marker call calls (PluginPath, AlsoIn, Only), or "".
func markerName(call *ast.CallExpr, alias string) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != alias || !markers[sel.Sel.Name] {
		return ""
	}
	return sel.Sel.Name
}

// markerPasses are the passes the marker name with args gives its test.
func markerPasses(name string, args []ast.Expr) ([]string, error) {
	var named []string
	for _, arg := range args[1:] {
		if name == "AlsoIn" && len(named) == 1 {
			break // the why
		}
		cloud, err := cloudArg(arg)
		if err != nil {
			return nil, err
		}
		named = append(named, cloud)
	}
	switch name {
	case "PluginPath":
		return slices.Clone(Passes), nil
	case "AlsoIn":
		if len(named) != 1 {
			return nil, errors.New("names no cloud")
		}
		return []string{PluginLocal, named[0]}, nil
	default: // Only
		if len(named) == 0 {
			return nil, errors.New("names no cloud")
		}
		var passes []string
		for _, pass := range clouds {
			if slices.Contains(named, pass) {
				passes = append(passes, pass)
			}
		}
		return passes, nil
	}
}

// cloudArg is the cloud a marker's argument names: framework.PluginAWS,
// PluginGCE or PluginAzure, or the string itself.
func cloudArg(arg ast.Expr) (string, error) {
	switch a := arg.(type) {
	case *ast.SelectorExpr:
		if cloud, ok := pluginConsts[a.Sel.Name]; ok {
			return cloud, nil
		}
	case *ast.BasicLit:
		if s, err := strconv.Unquote(a.Value); err == nil && slices.Contains(clouds, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("a cloud is named by framework.PluginAWS, PluginGCE or PluginAzure, not %s", types.ExprString(arg))
}

// Tests are the plan's Test functions, sorted.
func (p *Plan) Tests() []string {
	tests := make([]string, 0, len(p.passes))
	for name := range p.passes {
		tests = append(tests, name)
	}
	sort.Strings(tests)
	return tests
}

// PassesOf are the passes that run test, in Passes' order; nil for a
// test the plan does not know.
func (p *Plan) PassesOf(test string) []string { return p.passes[test] }

// Runs are the tests pass runs, sorted.
func (p *Plan) Runs(pass string) []string {
	var tests []string
	for _, name := range p.Tests() {
		if slices.Contains(p.passes[name], pass) {
			tests = append(tests, name)
		}
	}
	return tests
}

// Select makes this test binary run only what pass runs, by adding the
// other tests to -test.skip (a -skip given on the command line still
// applies), and says so on log. With all (KIP_E2E_ALL), a cloud's pass
// runs the full pass's tests too. Call it from TestMain before m.Run.
func (p *Plan) Select(pass string, all bool, log io.Writer) error {
	if !slices.Contains(Passes, pass) {
		return fmt.Errorf("selecting the %s pass: %s=%s is none of %s", pass, PluginEnv, pass, strings.Join(Passes, ", "))
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	var skip []string
	for _, name := range p.Tests() {
		runs := slices.Contains(p.passes[name], pass) || (all && slices.Contains(p.passes[name], PluginLocal))
		if !runs {
			skip = append(skip, regexp.QuoteMeta(name))
		}
	}
	runs := len(p.passes) - len(skip)
	switch {
	case pass == PluginLocal:
		fmt.Fprintf(log, "e2e: the full pass (%s=%s) runs %d of %d tests\n", PluginEnv, pass, runs, len(p.passes))
	case all:
		fmt.Fprintf(log, "e2e: the %s pass with %s=1 runs %d of %d tests\n", pass, AllEnv, runs, len(p.passes))
	default:
		fmt.Fprintf(log, "e2e: the %s pass runs %d of %d tests: the plugin path and %s's own (%s=1 runs the full pass's too)\n",
			pass, runs, len(p.passes), pass, AllEnv)
	}
	if len(skip) == 0 {
		return nil
	}
	f := flag.Lookup("test.skip")
	if f == nil {
		return fmt.Errorf("selecting the %s pass: the test binary has no -test.skip flag", pass)
	}
	pattern := "^(" + strings.Join(skip, "|") + ")$"
	if given := f.Value.String(); given != "" {
		if strings.Contains(given, "/") {
			return fmt.Errorf("selecting the %s pass: -skip %q names subtests, which the pass's own -skip cannot join: skip whole tests, or set %s=1", pass, given, AllEnv)
		}
		pattern = given + "|" + pattern
	}
	if err := f.Value.Set(pattern); err != nil {
		return fmt.Errorf("selecting the %s pass: %w", pass, err)
	}
	return nil
}
