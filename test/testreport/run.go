package testreport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Step is one recorded step of a run: a command and how long it took.
type Step struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Dir     string   `json:"dir,omitempty"`
	// Parent is the step whose command ran this one (ParentEnv), empty
	// for a step of its own: make check's make e2e runs the passes, and
	// the cloud passes run at once, side by side, not inside each other.
	Parent string    `json:"parent,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Exit is the command's exit code; -1 when it did not start or was
	// killed by a signal.
	Exit int `json:"exit"`
}

// ParentEnv is the environment variable through which Run tells the steps
// its command runs that they run inside it: its value is the step's name.
const ParentEnv = "KIP_TESTREPORT_STEP"

// Seconds is how long the step took.
func (s Step) Seconds() float64 { return s.End.Sub(s.Start).Seconds() }

// fileName is name as a file name: spaces and slashes become dashes.
func fileName(name string) string {
	return strings.NewReplacer(" ", "-", "/", "-", ":", "-").Replace(name)
}

// RunOptions say how Run runs a step.
type RunOptions struct {
	// Dir is the report directory; Name the step's name in it.
	Dir, Name string
	// Chdir is the directory the command runs in; empty: this one.
	Chdir string
	// Tests prints a line for each top-level test as it ends; Verbose
	// prints everything (Renderer).
	Tests, Verbose bool
	// Prefix starts every line of the step's output, its stderr's too:
	// "[aws] " for steps whose output interleaves.
	Prefix string
	// Stdout and Stderr receive the rendered output and the command's
	// stderr.
	Stdout, Stderr io.Writer
}

// Run runs argv as the step opts.Name, renders what it prints (go test
// -json events as go test prints them, any other line as it is), records
// the events and the step in opts.Dir, and returns the command's exit
// code. An error is Run's own (the report could not be written, the
// command could not start).
func Run(ctx context.Context, opts RunOptions, argv []string) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("running a step: no command")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil { //nolint:gosec // a report for whoever ran the tests
		return -1, fmt.Errorf("creating the report directory: %w", err)
	}
	base := filepath.Join(opts.Dir, fileName(opts.Name))
	events, err := os.Create(base + ".events.json")
	if err != nil {
		return -1, fmt.Errorf("recording step %s: %w", opts.Name, err)
	}
	defer events.Close()

	stdout, stderr := newPrefixWriter(opts.Stdout, opts.Prefix), newPrefixWriter(opts.Stderr, opts.Prefix)
	defer flush(stdout)
	defer flush(stderr)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // the Makefile's own commands
	cmd.Dir = opts.Chdir
	cmd.Env = append(os.Environ(), ParentEnv+"="+opts.Name)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return -1, fmt.Errorf("running step %s: %w", opts.Name, err)
	}
	step := Step{Name: opts.Name, Command: argv, Dir: opts.Chdir, Parent: os.Getenv(ParentEnv), Start: time.Now(), Exit: -1}
	// Recorded at once, without an end: a run cut off (CI's time limit)
	// still shows which step it was in.
	if err := writeStep(base, step); err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		step.End = time.Now()
		_ = writeStep(base, step)
		return -1, fmt.Errorf("running step %s: %w", opts.Name, err)
	}
	r := &Renderer{W: stdout, Tests: opts.Tests, Verbose: opts.Verbose}
	w := bufio.NewWriter(events)
	lines := bufio.NewReader(out)
	var readErr error
	for {
		// ReadBytes, not a Scanner: a line of output has no upper bound.
		line, err := lines.ReadBytes('\n')
		if len(line) > 0 {
			line = []byte(strings.TrimSuffix(string(line), "\n"))
			if _, ok := r.Line(line); ok {
				_, _ = w.Write(line)
				_ = w.WriteByte('\n')
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
	}
	waitErr := cmd.Wait()
	step.End = time.Now()
	step.Exit = cmd.ProcessState.ExitCode()
	if err := w.Flush(); err != nil {
		return step.Exit, fmt.Errorf("recording step %s: %w", opts.Name, err)
	}
	if err := writeStep(base, step); err != nil {
		return step.Exit, err
	}
	if readErr != nil {
		return step.Exit, fmt.Errorf("reading step %s's output: %w", opts.Name, readErr)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return step.Exit, fmt.Errorf("running step %s: %w", opts.Name, waitErr)
	}
	return step.Exit, nil
}

// writeStep records step at base.step.json.
func writeStep(base string, step Step) error {
	data, err := json.MarshalIndent(step, "", "  ")
	if err != nil {
		return fmt.Errorf("recording step %s: %w", step.Name, err)
	}
	if err := os.WriteFile(base+".step.json", append(data, '\n'), 0o644); err != nil { //nolint:gosec // as the directory
		return fmt.Errorf("recording step %s: %w", step.Name, err)
	}
	return nil
}
