package e2e

import (
	"fmt"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/kipcell/kip/test/e2e/framework"
)

// TestPassList holds doc.go's table of tests and passes to the markers
// (framework.ReadPlan): every Test function is listed once, with the
// passes its marker gives it and a reason; no row names a test that is
// gone; and every test runs in at least one pass. It needs no control
// plane, and runs without the e2e tag too (make test).
func TestPassList(t *testing.T) {
	plan, err := framework.ReadPlan(".")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := passTable("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Tests()) < 60 {
		t.Fatalf("the plan has %d tests; did ReadPlan stop reading the e2e files?", len(plan.Tests()))
	}
	for _, name := range plan.Tests() {
		passes := plan.PassesOf(name)
		if len(passes) == 0 {
			t.Errorf("%s runs in no pass", name)
			continue
		}
		want := strings.Join(passes, " ")
		if slices.Equal(passes, framework.Passes) {
			want = "all"
		}
		row, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("doc.go does not list %s; add its row:\n\t%-45s %-14s <why>", name, name, want)
		case row.passes != want:
			t.Errorf("doc.go lists %s in %q, its marker in %q", name, row.passes, want)
		case row.why == "":
			t.Errorf("doc.go lists %s without saying why", name)
		}
	}
	for name := range rows {
		if plan.PassesOf(name) == nil {
			t.Errorf("doc.go lists %s, which is no test of the package", name)
		}
	}
}

// passRow is a row of doc.go's table.
type passRow struct{ passes, why string }

// passTable reads the table of tests and passes from the package comment
// of file: the indented rows after the one headed "test passes why".
func passTable(file string) (map[string]passRow, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return nil, fmt.Errorf("reading the pass table: %w", err)
	}
	if f.Doc == nil {
		return nil, fmt.Errorf("reading the pass table: %s has no package comment", file)
	}
	rows := map[string]passRow{}
	in := false
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		fields := strings.Fields(line)
		if !in {
			in = slices.Equal(fields, []string{"test", "passes", "why"})
			continue
		}
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "Test") {
			break
		}
		name, rest := fields[0], fields[1:]
		var passes []string
		for len(rest) > 0 && (rest[0] == "all" || slices.Contains(framework.Passes, rest[0])) {
			passes, rest = append(passes, rest[0]), rest[1:]
		}
		if _, dup := rows[name]; dup {
			return nil, fmt.Errorf("reading the pass table: %s listed twice", name)
		}
		rows[name] = passRow{passes: strings.Join(passes, " "), why: strings.Join(rest, " ")}
	}
	if !in {
		return nil, fmt.Errorf(`reading the pass table: %s has no row "test passes why"`, file)
	}
	return rows, nil
}
