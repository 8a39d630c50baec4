package testreport

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Result is how one top-level test of a step ended.
type Result struct {
	Step, Package, Test string
	// Action is pass, fail or skip.
	Action  string
	Elapsed time.Duration
}

// Report is what a report directory holds.
type Report struct {
	// Steps in the order they started.
	Steps   []Step
	Results []Result
}

// Read reads the report directory dir.
func Read(dir string) (*Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.step.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	rep := &Report{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the report: %w", err)
		}
		var step Step
		if err := json.Unmarshal(data, &step); err != nil {
			return nil, fmt.Errorf("reading the report: %s: %w", file, err)
		}
		rep.Steps = append(rep.Steps, step)
		results, err := readResults(strings.TrimSuffix(file, ".step.json")+".events.json", step.Name)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, results...)
	}
	slices.SortStableFunc(rep.Steps, func(a, b Step) int { return a.Start.Compare(b.Start) })
	return rep, nil
}

// readResults reads the top-level tests' results from an events file.
func readResults(file, step string) ([]Result, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	defer f.Close()
	var results []Result
	lines := bufio.NewReader(f)
	for {
		line, err := lines.ReadBytes('\n')
		var e Event
		if len(line) > 0 && json.Unmarshal(line, &e) == nil && e.Test != "" && !strings.Contains(e.Test, "/") {
			switch e.Action {
			case "pass", "fail", "skip":
				results = append(results, Result{Step: step, Package: e.Package, Test: e.Test, Action: e.Action,
					Elapsed: time.Duration(e.Elapsed * float64(time.Second))})
			}
		}
		if errors.Is(err, io.EOF) {
			return results, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the report: %w", err)
		}
	}
}

// Summary prints rep: each step's time, indented under the step it ran
// in, with its tests' counts, the whole run's time, and the n slowest
// tests.
func (rep *Report) Summary(w io.Writer, n int) {
	if len(rep.Steps) == 0 {
		fmt.Fprintln(w, "== no step recorded")
		return
	}
	first, last := rep.Steps[0].Start, time.Time{}
	for _, s := range rep.Steps {
		if s.End.After(last) {
			last = s.End
		}
	}
	fmt.Fprintf(w, "== time per step (%s in all, from the first step's start to the last one's end)\n", clock(last.Sub(first)))
	for _, s := range rep.Steps {
		depth := rep.depth(s)
		name := strings.Repeat("  ", depth) + s.Name
		took := "unfinished"
		if !s.End.IsZero() {
			took = clock(s.End.Sub(s.Start))
		}
		fmt.Fprintf(w, "  %-40s %10s  %s\n", name, took, rep.counts(s))
	}
	slowest := slices.Clone(rep.Results)
	slices.SortStableFunc(slowest, func(a, b Result) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	if len(slowest) > n {
		slowest = slowest[:n]
	}
	if len(slowest) == 0 {
		return
	}
	fmt.Fprintf(w, "== the %d slowest tests\n", len(slowest))
	for _, r := range slowest {
		fmt.Fprintf(w, "  %8.1fs  %-52s %-16s %s\n", r.Elapsed.Seconds(), r.Test, r.Step, r.Package)
	}
}

// depth is how many steps s ran inside: its parent's, its parent's
// parent's and so on, as far as they are recorded.
func (rep *Report) depth(s Step) int {
	depth := 0
	for seen := map[string]bool{s.Name: true}; s.Parent != "" && !seen[s.Parent]; depth++ {
		seen[s.Parent] = true
		i := slices.IndexFunc(rep.Steps, func(p Step) bool { return p.Name == s.Parent })
		if i < 0 {
			return depth + 1
		}
		s = rep.Steps[i]
	}
	return depth
}

// counts says how step's top-level tests ended: "57 passed, 1 failed".
func (rep *Report) counts(step Step) string {
	n := map[string]int{}
	for _, r := range rep.Results {
		if r.Step == step.Name {
			n[r.Action]++
		}
	}
	var parts []string
	for _, a := range []struct{ action, word string }{{"pass", "passed"}, {"fail", "failed"}, {"skip", "skipped"}} {
		if n[a.action] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[a.action], a.word))
		}
	}
	if step.Exit > 0 {
		parts = append(parts, fmt.Sprintf("exit %d", step.Exit))
	}
	return strings.Join(parts, ", ")
}

// clock renders d as 1h02m03s, 12m03s or 4.2s.
func clock(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}
