package troubleshooting

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Dirs are the directories, relative to the repository root, whose Go
// files make up kip: the host, the cell agent, the local disk
// provisioner and the commands. Tests and test helpers (directories
// whose name ends in "test", testdata) are left out, and so is a
// directory that does not exist.
var Dirs = []string{"host", "cell", "localprov", "cmd"}

// statusTypes are the types whose Reason field a user reads in kubectl:
// pod, container and node status, and the cell agent's pod event.
var statusTypes = map[string]bool{
	"PodStatus": true, "PodCondition": true, "NodeCondition": true,
	"ContainerStateWaiting": true, "ContainerStateTerminated": true,
	"Event": true,
}

// external holds the values of the constants of other modules that kip
// passes as a reason. A new one fails the scan (as untraced) until it is
// added here.
var external = map[string]string{
	"corev1.PodReasonTerminationByKubelet": "TerminationByKubelet",
}

// Untraced is a reason argument that Scan could not follow to a constant
// or a string literal: a struct field, a call's result it cannot see.
type Untraced struct {
	// Key is "<package dir>.<function>: <expression>".
	Key string
	// Pos is the file and line.
	Pos string
}

// Result is what Scan found.
type Result struct {
	// Reasons maps each reason to the places that emit it.
	Reasons map[string][]string
	// Untraced lists the reason arguments Scan could not follow.
	Untraced []Untraced
}

type function struct {
	pkg    string
	name   string // "" for a function literal that is not assigned a name
	params []string
	body   *ast.BlockStmt
}

type file struct {
	pkg  string
	path string
	ast  *ast.File
}

type scanner struct {
	root   string
	fset   *token.FileSet
	files  []file
	consts map[string]map[string]string // package dir → name → value
	global map[string]string            // constant name → value, any package
	funcs  map[string][]*function       // "pkg.name" → functions of that name
	lits   map[*ast.FuncLit]string      // function literal → the name it is assigned to
	uses   map[string]int               // identifier → how often it occurs, declarations included
	sinks  map[string]map[int]bool      // "pkg.name" → indexes of its reason parameters
	found  map[string]map[string]bool   // reason → the positions that emit it
	untr   map[string]Untraced          // Untraced.Key → the argument
}

// Scan parses the Go files under root's Dirs and lists the reasons kip
// emits. A reason is the value of a constant whose name begins or ends
// with "Reason" and that the code uses, or a string that reaches a reason
// argument: the reason of a recorder's Event or Eventf, a Reason field of
// statusTypes, or a parameter of a function of the same package that
// passes it to one of those (found by following calls until nothing new
// turns up). A reason argument it cannot follow to a constant or a
// literal (a struct field, a range variable) is listed as Untraced.
func Scan(root string) (*Result, error) {
	s := &scanner{
		root: root, fset: token.NewFileSet(), consts: map[string]map[string]string{}, global: map[string]string{},
		funcs: map[string][]*function{}, lits: map[*ast.FuncLit]string{}, uses: map[string]int{}, sinks: map[string]map[int]bool{},
		found: map[string]map[string]bool{}, untr: map[string]Untraced{},
	}
	for _, dir := range Dirs {
		if _, err := os.Stat(filepath.Join(root, dir)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := s.parseDir(root, dir); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", dir, err)
		}
	}
	s.collect()
	for {
		n := s.sinkCount()
		s.found, s.untr = map[string]map[string]bool{}, map[string]Untraced{}
		s.constReasons()
		for _, f := range s.files {
			for _, d := range f.ast.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					fn := s.funcOf(f.pkg, fd.Name.Name, fd.Type, fd.Body)
					ast.Walk(&visitor{s: s, file: f, stack: []*function{fn}}, fd.Body)
				}
			}
		}
		if s.sinkCount() == n {
			break
		}
	}
	res := &Result{Reasons: map[string][]string{}}
	for r, at := range s.found {
		res.Reasons[r] = slices.Sorted(maps.Keys(at))
	}
	for _, u := range s.untr {
		res.Untraced = append(res.Untraced, u)
	}
	slices.SortFunc(res.Untraced, func(a, b Untraced) int { return strings.Compare(a.Pos, b.Pos) })
	return res, nil
}

func (s *scanner) parseDir(root, dir string) error {
	return filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(s.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("relating %s to %s: %w", path, root, err)
		}
		s.files = append(s.files, file{pkg: filepath.ToSlash(filepath.Dir(rel)), path: filepath.ToSlash(rel), ast: f})
		return nil
	})
}

// collect records the string constants, the functions and the names of
// the function literals assigned to a variable or a field.
func (s *scanner) collect() {
	for _, f := range s.files {
		if s.consts[f.pkg] == nil {
			s.consts[f.pkg] = map[string]string{}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				s.uses[n.Name]++
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					if t, ok := vs.Type.(*ast.Ident); vs.Type != nil && (!ok || t.Name != "string") {
						continue
					}
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if v, ok := stringLit(vs.Values[i]); ok {
								s.consts[f.pkg][name.Name] = v
								s.global[name.Name] = v
							}
						}
					}
				}
			case *ast.FuncDecl:
				if n.Body != nil {
					s.funcOf(f.pkg, n.Name.Name, n.Type, n.Body)
				}
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if lit, ok := rhs.(*ast.FuncLit); ok && i < len(n.Lhs) {
						if name := lastName(n.Lhs[i]); name != "" {
							s.lits[lit] = name
						}
					}
				}
			case *ast.KeyValueExpr:
				if lit, ok := n.Value.(*ast.FuncLit); ok {
					if name := lastName(n.Key); name != "" {
						s.lits[lit] = name
					}
				}
			}
			return true
		})
	}
}

// funcOf returns the function of pkg named name with type t and body,
// recording it the first time.
func (s *scanner) funcOf(pkg, name string, t *ast.FuncType, body *ast.BlockStmt) *function {
	key := pkg + "." + name
	for _, fn := range s.funcs[key] {
		if fn.body == body {
			return fn
		}
	}
	fn := &function{pkg: pkg, name: name, body: body}
	for _, field := range t.Params.List {
		if len(field.Names) == 0 {
			fn.params = append(fn.params, "_")
		}
		for _, n := range field.Names {
			fn.params = append(fn.params, n.Name)
		}
	}
	if name != "" {
		s.funcs[key] = append(s.funcs[key], fn)
	}
	return fn
}

// constReasons records the constants named Reason… or …Reason that
// kip's code uses: one only declared is emitted nowhere.
func (s *scanner) constReasons() {
	for _, f := range s.files {
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, name := range vs.Names {
					v, ok := s.consts[f.pkg][name.Name]
					if ok && s.uses[name.Name] > 1 && (strings.HasPrefix(name.Name, "Reason") || strings.HasSuffix(name.Name, "Reason")) {
						s.add(v, s.pos(name))
					}
				}
			}
		}
	}
}

func (s *scanner) sinkCount() int {
	n := 0
	for _, idx := range s.sinks {
		n += len(idx)
	}
	return n
}

func (s *scanner) pos(n ast.Node) string {
	p := s.fset.Position(n.Pos())
	name := p.Filename
	if rel, err := filepath.Rel(s.root, name); err == nil {
		name = rel
	}
	return filepath.ToSlash(name) + ":" + strconv.Itoa(p.Line)
}

func (s *scanner) add(reason, pos string) {
	if reason == "" {
		return
	}
	if s.found[reason] == nil {
		s.found[reason] = map[string]bool{}
	}
	s.found[reason][pos] = true
}

// visitor walks a function's body; stack holds the enclosing functions,
// outermost first.
type visitor struct {
	s     *scanner
	file  file
	stack []*function
}

func (v *visitor) Visit(n ast.Node) ast.Visitor {
	s := v.s
	switch n := n.(type) {
	case *ast.FuncLit:
		fn := s.funcOf(v.file.pkg, s.lits[n], n.Type, n.Body)
		return &visitor{s: s, file: v.file, stack: append(slices.Clone(v.stack), fn)}
	case *ast.CallExpr:
		for _, i := range s.reasonArgs(v.file.pkg, n) {
			if i < len(n.Args) {
				v.resolve(n.Args[i], 0)
			}
		}
	case *ast.CompositeLit:
		if statusTypes[lastName(n.Type)] {
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok && lastName(kv.Key) == "Reason" {
					v.resolve(kv.Value, 0)
				}
			}
		}
	case *ast.AssignStmt:
		if len(n.Lhs) == len(n.Rhs) {
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" {
					v.resolve(n.Rhs[i], 0)
				}
			}
		}
	}
	return v
}

// reasonArgs returns the indexes of call's reason arguments: the reason
// of a recorder's Event, Eventf or AnnotatedEventf, or a parameter of a
// function of pkg found to be a reason.
func (s *scanner) reasonArgs(pkg string, call *ast.CallExpr) []int {
	name := lastName(call.Fun)
	var out []int
	if _, ok := call.Fun.(*ast.SelectorExpr); ok {
		switch {
		case (name == "Event" || name == "Eventf") && len(call.Args) >= 4:
			out = append(out, 2)
		case name == "AnnotatedEventf" && len(call.Args) >= 5:
			out = append(out, 3)
		}
	}
	for i := range s.sinks[pkg+"."+name] {
		out = append(out, i)
	}
	return out
}

// resolve follows e, an expression that is a reason, to the strings it
// can hold.
func (v *visitor) resolve(e ast.Expr, depth int) {
	s := v.s
	switch e := e.(type) {
	case *ast.ParenExpr:
		v.resolve(e.X, depth)
		return
	case *ast.BasicLit:
		if r, ok := stringLit(e); ok {
			s.add(r, s.pos(e))
			return
		}
	case *ast.Ident:
		for i := len(v.stack) - 1; i >= 0; i-- {
			fn := v.stack[i]
			if idx := slices.Index(fn.params, e.Name); idx >= 0 {
				if fn.name == "" {
					break
				}
				key := fn.pkg + "." + fn.name
				if s.sinks[key] == nil {
					s.sinks[key] = map[int]bool{}
				}
				s.sinks[key][idx] = true
				return
			}
		}
		if r, ok := s.consts[v.file.pkg][e.Name]; ok {
			s.add(r, s.pos(e))
			return
		}
		if depth < 4 && v.local(e, depth) {
			return
		}
	case *ast.SelectorExpr:
		if r, ok := external[exprString(e)]; ok {
			s.add(r, s.pos(e))
			return
		}
		if x, ok := e.X.(*ast.Ident); ok && ast.IsExported(e.Sel.Name) {
			if r, ok := s.global[e.Sel.Name]; ok && x.Name != "" {
				s.add(r, s.pos(e))
				return
			}
		}
	}
	outer := v.stack[0]
	key := outer.pkg + "." + outer.name + ": " + exprString(e)
	s.untr[key] = Untraced{Key: key, Pos: s.pos(e)}
}

// local follows a local variable to the values assigned to it in the
// outermost enclosing function, and to the results of the function of
// the same package it is assigned from. It reports false when it found
// no assignment.
func (v *visitor) local(id *ast.Ident, depth int) bool {
	found := false
	ast.Inspect(v.stack[0].body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for i, lhs := range as.Lhs {
			if l, ok := lhs.(*ast.Ident); !ok || l.Name != id.Name {
				continue
			}
			found = true
			if len(as.Rhs) == len(as.Lhs) {
				v.resolve(as.Rhs[i], depth+1)
				continue
			}
			var fns []*function
			if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
				fns = v.s.funcs[v.file.pkg+"."+lastName(call.Fun)]
			}
			if len(fns) == 0 {
				v.resolve(as.Rhs[0], depth+1) // reported as untraced
				continue
			}
			for _, fn := range fns {
				v.results(fn, i, depth+1)
			}
		}
		return true
	})
	return found
}

// results follows the i-th result of fn's return statements.
func (v *visitor) results(fn *function, i, depth int) {
	callee := &visitor{s: v.s, file: v.file, stack: []*function{fn}}
	ast.Inspect(fn.body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			if i < len(n.Results) && len(n.Results) > 1 {
				callee.resolve(n.Results[i], depth)
			}
		}
		return true
	})
}

// lastName is the identifier of e, or of its selector: "event" for
// c.event, "ContainerStateWaiting" for &corev1.ContainerStateWaiting.
func lastName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.StarExpr:
		return lastName(e.X)
	case *ast.IndexExpr:
		return lastName(e.X)
	}
	return ""
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

func exprString(e ast.Expr) string { return types.ExprString(e) }
