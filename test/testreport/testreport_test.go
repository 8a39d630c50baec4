package testreport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ev is one go test -json line.
func ev(action, test, output string, elapsed float64) string {
	data, _ := json.Marshal(Event{Action: action, Package: "example.com/p", Test: test, Output: output, Elapsed: elapsed})
	return string(data)
}

func TestRenderer(t *testing.T) {
	passing := []string{
		ev("start", "", "", 0),
		ev("output", "", "control plane up\n", 0),
		ev("run", "TestA", "", 0),
		ev("output", "TestA", "=== RUN   TestA\n", 0),
		ev("output", "TestA", "    a_test.go:4: only on failure\n", 0),
		ev("output", "TestA", "--- PASS: TestA (1.50s)\n", 0),
		ev("pass", "TestA", "", 1.5),
	}
	failing := []string{
		ev("run", "TestB", "", 0),
		ev("output", "TestB", "=== RUN   TestB\n", 0),
		ev("run", "TestB/sub", "", 0),
		ev("output", "TestB/sub", "    b_test.go:9: wanted 2\n", 0),
		ev("fail", "TestB/sub", "", 0.1),
		ev("output", "TestB", "--- FAIL: TestB (0.20s)\n", 0),
		ev("fail", "TestB", "", 0.2),
	}
	for _, tc := range []struct {
		name  string
		lines []string
		r     Renderer
		want  string
	}{{
		name:  "a passing test prints nothing, the package its lines and result",
		lines: append(passing, ev("output", "", "PASS\n", 0), ev("output", "", "ok  \texample.com/p\t1.6s\n", 0), ev("pass", "", "", 1.6)),
		want:  "control plane up\nok  \texample.com/p\t1.6s\n",
	}, {
		name:  "with Tests, a line for each top-level test",
		lines: append(passing, failing...),
		r:     Renderer{Tests: true},
		want:  "control plane up\n--- PASS: TestA (1.50s)\n=== RUN   TestB\n    b_test.go:9: wanted 2\n--- FAIL: TestB (0.20s)\n",
	}, {
		name:  "a failed test's whole output, its subtests' too",
		lines: failing,
		want:  "=== RUN   TestB\n    b_test.go:9: wanted 2\n--- FAIL: TestB (0.20s)\n",
	}, {
		name: "a package that ends with a test still running shows what it said",
		lines: []string{
			ev("run", "TestC", "", 0),
			ev("output", "TestC", "=== RUN   TestC\n", 0),
			ev("output", "TestC", "    c_test.go:3: waiting\n", 0),
			ev("output", "", "panic: test timed out after 1s\n", 0),
			ev("fail", "", "", 1),
		},
		want: "panic: test timed out after 1s\n--- UNFINISHED: TestC (the package ended while it ran)\n=== RUN   TestC\n    c_test.go:3: waiting\n",
	}, {
		name:  "lines that are no events, and build output",
		lines: []string{"go: downloading example.com/q v1.0.0", `{"ImportPath":"example.com/p","Action":"build-output","Output":"p.go:1: syntax error\n"}`, "{not json"},
		want:  "go: downloading example.com/q v1.0.0\np.go:1: syntax error\n{not json\n",
	}, {
		name:  "verbose prints every output line",
		lines: passing,
		r:     Renderer{Verbose: true},
		want:  "control plane up\n=== RUN   TestA\n    a_test.go:4: only on failure\n--- PASS: TestA (1.50s)\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			r := tc.r
			r.W = &b
			for _, line := range tc.lines {
				r.Line([]byte(line))
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunAndSummary runs two steps, one inside the other, as make check
// runs make e2e's passes, and a third beside them, and reads their report
// back.
func TestRunAndSummary(t *testing.T) {
	dir := t.TempDir()
	events := strings.Join([]string{
		ev("run", "TestSlow", "", 0), ev("pass", "TestSlow", "", 42),
		ev("run", "TestFast", "", 0), ev("pass", "TestFast", "", 0.5),
		ev("run", "TestFast/sub", "", 0), ev("pass", "TestFast/sub", "", 99), // a subtest is no top-level test
		ev("run", "TestBad", "", 0), ev("output", "TestBad", "broken\n", 0), ev("fail", "TestBad", "", 3),
	}, "\n")
	script := filepath.Join(dir, "events")
	if err := os.WriteFile(script, []byte(events+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs strings.Builder
	code, err := Run(t.Context(), RunOptions{Dir: dir, Name: "outer", Stdout: &out, Stderr: &errs},
		[]string{"sh", "-c", "sleep 0.05; " + os.Args[0] + " -test.run '^TestHelperStep$' -- " + dir + " " + script + "; echo done; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Errorf("exit code %d, want 3 (the command's)", code)
	}
	if !strings.Contains(out.String(), "done\n") {
		t.Errorf("the outer step's own line is missing from its output:\n%s", out.String())
	}
	rep, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A step that ran meanwhile beside the outer one, not inside it: make
	// e2e runs the cloud passes at once.
	outer := rep.Steps[0]
	beside := Step{Name: "e2e aws", Start: outer.Start.Add(time.Millisecond), End: outer.End.Add(-time.Millisecond)}
	if err := writeStep(filepath.Join(dir, fileName(beside.Name)), beside); err != nil {
		t.Fatal(err)
	}
	if rep, err = Read(dir); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Steps {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"outer", "e2e aws", "e2e local"}, names); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if rep.Steps[0].Exit != 3 || rep.Steps[2].Exit != 1 {
		t.Errorf("exit codes %d and %d, want 3 and 1", rep.Steps[0].Exit, rep.Steps[2].Exit)
	}
	var b strings.Builder
	rep.Summary(&b, 2)
	summary := b.String()
	for _, want := range []string{
		"  outer ",
		"    e2e local ", // inside outer
		"\n  e2e aws ",   // beside it
		"2 passed, 1 failed, exit 1",
		"== the 2 slowest tests\n      42.0s  TestSlow ",
		"       3.0s  TestBad ",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary has no %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "TestFast") {
		t.Errorf("the summary lists more than the 2 slowest top-level tests:\n%s", summary)
	}
}

// TestHelperStep is the inner step of TestRunAndSummary, run as a command
// of the outer one: it records a step that prints the events of a file
// and exits 1.
func TestHelperStep(t *testing.T) {
	args := os.Args
	for len(args) > 0 && args[0] != "--" {
		args = args[1:]
	}
	if len(args) != 3 {
		t.Skip("a helper of TestRunAndSummary, run as its command")
	}
	code, err := Run(t.Context(), RunOptions{Dir: args[1], Name: "e2e local", Tests: true, Stdout: os.Stdout, Stderr: os.Stderr},
		[]string{"sh", "-c", "cat " + args[2] + "; exit 1"})
	if err != nil || code != 1 {
		t.Fatalf("Run: %d, %v", code, err)
	}
}

func TestReadAStepCutOff(t *testing.T) {
	dir := t.TempDir()
	step := Step{Name: "e2e gce", Start: time.Now(), Exit: -1}
	if err := writeStep(filepath.Join(dir, fileName(step.Name)), step); err != nil {
		t.Fatal(err)
	}
	rep, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Summary(&b, 15)
	if !strings.Contains(b.String(), "e2e gce") || !strings.Contains(b.String(), "unfinished") {
		t.Errorf("a step without an end is not shown unfinished:\n%s", b.String())
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		4200 * time.Millisecond:                   "4.2s",
		12*time.Minute + 3*time.Second:            "12m03s",
		time.Hour + 2*time.Minute + 3*time.Second: "1h02m03s",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	w := newPrefixWriter(&b, "[aws] ")
	for _, s := range []string{"one\ntw", "o\n", "\nthree"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	flush(w)
	if want := "[aws] one\n[aws] two\n[aws] \n[aws] three\n"; b.String() != want {
		t.Errorf("prefixed output %q, want %q", b.String(), want)
	}
	if w := newPrefixWriter(&b, ""); w != &b {
		t.Error("an empty prefix wraps the writer")
	}
}
