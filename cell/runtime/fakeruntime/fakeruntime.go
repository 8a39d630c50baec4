package fakeruntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kipcell/kip/cell/runtime"
)

// Config configures a Runtime.
type Config struct {
	// PullDelay is how long EnsureImage takes to "pull" an image not
	// present (every time with pull policy Always); zero: no time.
	PullDelay time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Runtime is a runtime.Runtime whose containers run no process (see the
// package comment). It is safe for concurrent use.
type Runtime struct {
	cfg Config

	mu      sync.Mutex
	present map[string]bool  // images ensured, by reference
	tasks   map[string]*Task // containers started and not deleted, by ID
	nextPid uint32
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a Runtime with no image and no container.
func New(cfg Config) *Runtime {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runtime{cfg: cfg, present: map[string]bool{}, tasks: map[string]*Task{}, nextPid: 1000}
}

// MemoryUsage is what every container's Metrics say it uses.
const MemoryUsage = 4 << 20

// EnsureImage implements runtime.Runtime: nothing is pulled; the image is
// there after Config.PullDelay.
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, _ []runtime.Credential) (runtime.Image, error) {
	r.mu.Lock()
	present := r.present[ref]
	r.mu.Unlock()
	switch {
	case policy == runtime.PullNever && !present:
		return runtime.Image{}, fmt.Errorf("image %s: %w", ref, runtime.ErrImageNeverPull)
	case policy == runtime.PullAlways || !present:
		if r.cfg.PullDelay > 0 {
			t := time.NewTimer(r.cfg.PullDelay)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return runtime.Image{}, fmt.Errorf("%w: %s: %w", runtime.ErrImagePull, ref, ctx.Err())
			case <-t.C:
			}
		}
		r.mu.Lock()
		r.present[ref] = true
		r.mu.Unlock()
	}
	sum := sha256.Sum256([]byte(ref))
	repo, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return runtime.Image{Ref: ref, ID: repo + "@sha256:" + hex.EncodeToString(sum[:])}, nil
}

// Start implements runtime.Runtime: the container's argv goes to its
// stdout as a line, then it runs as its command says (package comment).
// A container of the same ID still there is removed first.
func (r *Runtime) Start(_ context.Context, spec runtime.ContainerSpec) (runtime.Task, error) {
	r.mu.Lock()
	if old := r.tasks[spec.ID]; old != nil {
		old.end(137)
		old.discard()
	}
	r.nextPid++
	t := &Task{id: spec.ID, pid: r.nextPid, rt: r, started: r.cfg.Now(), limit: spec.Resources.MemoryLimitBytes,
		exited: make(chan struct{}), stdout: spec.Stdout}
	r.tasks[spec.ID] = t
	r.mu.Unlock()
	t.say(strings.Join(spec.Args, " "))
	if code, after, ok := ends(spec.Args); ok {
		if after <= 0 {
			t.end(code)
		} else {
			t.mu.Lock()
			t.timer = time.AfterFunc(after, func() { t.end(code) })
			t.mu.Unlock()
		}
	}
	return t, nil
}

// ends reads the rule of a command: ["exit", "N"] ends at once with N,
// ["sleep", "S"] with 0 after S seconds; ok is false for a command that
// runs until it is stopped.
func ends(args []string) (code int32, after time.Duration, ok bool) {
	if len(args) == 0 {
		return 0, 0, false
	}
	switch path.Base(args[0]) {
	case "exit":
		code, ok := exits(args)
		return code, 0, ok
	case "sleep":
		if len(args) < 2 {
			return 0, 0, false
		}
		s, err := strconv.ParseFloat(args[1], 64)
		if err != nil || s < 0 || s*float64(time.Second) >= math.MaxInt64 {
			return 0, 0, false // sleep infinity runs until stopped
		}
		return 0, time.Duration(s * float64(time.Second)), true
	}
	return 0, 0, false
}

// exits reads ["exit"] (0) or ["exit", "N"]; ok is false for any other
// command.
func exits(args []string) (code int32, ok bool) {
	switch {
	case len(args) == 0 || path.Base(args[0]) != "exit":
		return 0, false
	case len(args) == 1:
		return 0, true
	}
	n, err := strconv.ParseInt(args[1], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// Reattach implements runtime.Runtime: only a container this Runtime
// started and did not delete is found; its output goes to spec.Stdout
// from now on.
func (r *Runtime) Reattach(_ context.Context, spec runtime.ReattachSpec) (runtime.Task, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tasks[spec.ID]
	if t == nil {
		return nil, fmt.Errorf("container %s: %w", spec.ID, runtime.ErrNotFound)
	}
	t.mu.Lock()
	t.stdout = spec.Stdout
	t.mu.Unlock()
	return t, nil
}

// ImageFile is the file MountImage writes in the directory it "mounts":
// it holds the image's reference.
const ImageFile = "fake-image"

// MountImage implements runtime.Runtime: target becomes a directory
// holding ImageFile, which names the image.
func (r *Runtime) MountImage(_ context.Context, img runtime.Image, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mounting image %s: %w", img.Ref, err)
	}
	if err := os.WriteFile(filepath.Join(target, ImageFile), []byte(img.Ref+"\n"), 0o444); err != nil { //nolint:gosec // G306: an image's files are readable
		return fmt.Errorf("mounting image %s: %w", img.Ref, err)
	}
	return nil
}

// UnmountImage implements runtime.Runtime: ImageFile goes.
func (r *Runtime) UnmountImage(_ context.Context, target string) error {
	if err := os.Remove(filepath.Join(target, ImageFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unmounting image at %s: %w", target, err)
	}
	return nil
}

// Cleanup implements runtime.Runtime: every container ends and is
// removed, every image forgotten.
func (r *Runtime) Cleanup(context.Context) error {
	r.mu.Lock()
	tasks := r.tasks
	r.tasks, r.present = map[string]*Task{}, map[string]bool{}
	r.mu.Unlock()
	for _, t := range tasks {
		t.end(137)
		t.discard()
	}
	return nil
}

// Running is the number of containers started and not yet ended.
func (r *Runtime) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.tasks {
		if !t.isExited() {
			n++
		}
	}
	return n
}

// Task is a started container of a Runtime.
type Task struct {
	id      string
	pid     uint32
	rt      *Runtime
	started time.Time
	limit   int64
	exited  chan struct{}

	mu     sync.Mutex
	status runtime.ExitStatus
	stdout io.Writer // nil once deleted
	timer  *time.Timer
}

var _ runtime.Task = (*Task)(nil)

// say writes line to the container's stdout.
func (t *Task) say(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stdout != nil {
		_, _ = io.WriteString(t.stdout, line+"\n")
	}
}

// end ends the container with code, once.
func (t *Task) end(code int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isExited() {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.status = runtime.ExitStatus{Code: code, ExitedAt: t.rt.cfg.Now()}
	close(t.exited)
}

// discard stops the container's output.
func (t *Task) discard() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stdout = nil
}

func (t *Task) isExited() bool {
	select {
	case <-t.exited:
		return true
	default:
		return false
	}
}

// ID implements runtime.Task.
func (t *Task) ID() string { return t.id }

// Pid implements runtime.Task: a number no process has.
func (t *Task) Pid() uint32 { return t.pid }

// StartedAt implements runtime.Task.
func (t *Task) StartedAt() time.Time { return t.started }

// Exited implements runtime.Task.
func (t *Task) Exited() <-chan struct{} { return t.exited }

// Status implements runtime.Task.
func (t *Task) Status() runtime.ExitStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Signal implements runtime.Task: any signal but 0 ends the container
// with 128 plus its number.
func (t *Task) Signal(_ context.Context, sig syscall.Signal, _ bool) error {
	if sig != 0 {
		t.end(128 + int32(sig))
	}
	return nil
}

// Delete implements runtime.Task: the container ends (137) if it runs,
// and its output stops.
func (t *Task) Delete(context.Context) error {
	t.end(137)
	t.discard()
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	if t.rt.tasks[t.id] == t {
		delete(t.rt.tasks, t.id)
	}
	return nil
}

// Exec implements runtime.Task (package comment).
func (t *Task) Exec(_ context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	if t.isExited() {
		return nil, fmt.Errorf("exec in container %s: %w", t.id, errExited)
	}
	code, _ := exits(spec.Args)
	return &process{spec: spec, code: code, killed: make(chan struct{})}, nil
}

var errExited = errors.New("the container has exited")

// Metrics implements runtime.Task: a millicore of CPU since the start,
// MemoryUsage bytes, one process.
func (t *Task) Metrics(context.Context) (runtime.Metrics, error) {
	now := t.rt.cfg.Now()
	cpu := max(now.Sub(t.started), 0) / 1000
	limit := uint64(max(t.limit, 0))
	return runtime.Metrics{
		Time: now, CPUUsageNanos: uint64(cpu), //nolint:gosec // G115: not negative
		MemoryUsageBytes: MemoryUsage, MemoryWorkingSet: MemoryUsage, MemoryRSSBytes: MemoryUsage / 2,
		MemoryLimitBytes: limit, ProcessesCurrent: 1,
	}, nil
}

// Resize implements runtime.Task: there is no terminal to size.
func (t *Task) Resize(context.Context, uint32, uint32) error { return nil }

// CloseStdin implements runtime.Task: the container reads no stdin.
func (t *Task) CloseStdin(context.Context) error { return nil }

// process is an exec'd process: its argv as a line, then its stdin.
type process struct {
	spec     runtime.ExecSpec
	code     int32 // the exit code of a process that ends by itself
	killOnce sync.Once
	killed   chan struct{}
	killCode int32 // set before killed closes
	waitOnce sync.Once
	waitCode int32
}

func (p *process) Resize(context.Context, uint32, uint32) error { return nil }

func (p *process) CloseStdin(context.Context) error { return nil }

// Signal ends the process (as Wait reports: 128 plus the number).
func (p *process) Signal(_ context.Context, sig syscall.Signal) error {
	if sig != 0 {
		p.killOnce.Do(func() { p.killCode = 128 + int32(sig); close(p.killed) })
	}
	return nil
}

// Wait writes the argv line, copies stdin to stdout until it ends, the
// process is signalled or ctx ends (137), and returns the exit code.
func (p *process) Wait(ctx context.Context) (int32, error) {
	p.waitOnce.Do(func() {
		out := p.spec.Stdout
		if out == nil {
			out = io.Discard
		}
		_, _ = io.WriteString(out, strings.Join(p.spec.Args, " ")+"\n")
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			if p.spec.Stdin != nil {
				_, _ = io.Copy(out, p.spec.Stdin)
			}
		}()
		select {
		case <-copied:
			p.waitCode = p.code
		case <-p.killed:
			p.waitCode = p.killCode
		case <-ctx.Done():
			p.waitCode = 137
		}
	})
	return p.waitCode, nil
}
