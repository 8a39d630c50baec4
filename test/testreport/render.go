package testreport

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Event is one line of `go test -json` (cmd/test2json's TestEvent, and
// the build events cmd/go adds).
type Event struct {
	Time       time.Time `json:",omitempty"`
	Action     string
	Package    string  `json:",omitempty"`
	ImportPath string  `json:",omitempty"`
	Test       string  `json:",omitempty"`
	Elapsed    float64 `json:",omitempty"`
	Output     string  `json:",omitempty"`
}

// top is the top-level test of a test or subtest name.
func top(test string) string {
	name, _, _ := strings.Cut(test, "/")
	return name
}

// Renderer turns go test -json events back into what go test prints
// without -v: package lines and results as they come, a failed test's
// whole output (its subtests' too) when it fails, nothing of a test that
// passed; with Tests, one line for each top-level test as it ends; with
// Verbose, every line, as go test -v.
type Renderer struct {
	W       io.Writer
	Tests   bool
	Verbose bool
	// held is the output of each running top-level test, by package and
	// test, until it ends.
	held map[[2]string]*strings.Builder
	// order is the order the held tests started in.
	order [][2]string
}

// Line renders one line of the command's output: an event if it is one,
// else the line itself (go's own messages, a build's errors).
func (r *Renderer) Line(line []byte) (Event, bool) {
	var e Event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		r.print(string(line) + "\n")
		return Event{}, false
	}
	r.Event(e)
	return e, true
}

// Event renders e.
func (r *Renderer) Event(e Event) {
	if r.held == nil {
		r.held = map[[2]string]*strings.Builder{}
	}
	switch {
	case e.Action == "build-output":
		r.print(e.Output)
	case r.Verbose:
		if e.Action == "output" {
			r.print(e.Output)
		}
	case e.Test == "":
		r.packageEvent(e)
	default:
		r.testEvent(e)
	}
}

// packageEvent renders an event of a package, not of a test.
func (r *Renderer) packageEvent(e Event) {
	switch e.Action {
	case "output":
		if e.Output == "PASS\n" {
			return // go test without -v says ok alone
		}
		r.print(e.Output)
	case "pass", "fail", "skip":
		// A package that failed with tests still running (a timeout, a
		// panic): their output says where they were.
		kept := r.order[:0]
		for _, key := range r.order {
			switch {
			case key[0] != e.Package:
				kept = append(kept, key)
			case r.held[key] != nil:
				r.print(fmt.Sprintf("--- UNFINISHED: %s (the package ended while it ran)\n", key[1]))
				r.print(r.held[key].String())
				delete(r.held, key)
			}
		}
		r.order = kept
	}
}

// testEvent renders an event of a test or subtest.
func (r *Renderer) testEvent(e Event) {
	key := [2]string{e.Package, top(e.Test)}
	b := r.held[key]
	if b == nil {
		if e.Action != "run" && e.Action != "output" {
			return
		}
		b = &strings.Builder{}
		r.held[key] = b
		r.order = append(r.order, key)
	}
	if e.Action == "output" {
		b.WriteString(e.Output)
		return
	}
	if e.Test != key[1] {
		return // a subtest ended; its top-level test says how it went
	}
	switch e.Action {
	case "fail":
		r.print(b.String())
		delete(r.held, key)
	case "pass", "skip":
		if r.Tests {
			r.print(fmt.Sprintf("--- %s: %s (%.2fs)\n", strings.ToUpper(e.Action), e.Test, e.Elapsed))
		}
		delete(r.held, key)
	}
}

func (r *Renderer) print(s string) { _, _ = io.WriteString(r.W, s) }
