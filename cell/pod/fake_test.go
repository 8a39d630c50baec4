package pod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kipcell/kip/cell/runtime"
)

// fakeRuntime is a hand-written runtime.Runtime: tests script what each
// started container does through onStart.
type fakeRuntime struct {
	mu      sync.Mutex
	pullErr map[string]error // by image ref
	pulls   []string
	present map[string]bool // pulled images
	started []runtime.ContainerSpec
	tasks   []*fakeTask
	// reattached are the Reattach calls.
	reattached []runtime.ReattachSpec
	cleanups   int
	// onStart decides what a started container does; nil: it runs until
	// signalled.
	onStart func(spec runtime.ContainerSpec, t *fakeTask)
	// onExec answers an exec in a container (its output and exit code);
	// nil: exec fails. It may block until ctx ends (a timeout).
	onExec func(ctx context.Context, container string, args []string) (string, int32)
	// log records what happened in order: "exec <container> <args>",
	// "signal <container> <sig>", "mount-image <ref> <target>",
	// "unmount-image <target>".
	log []string
	// mountErr fails MountImage.
	mountErr error
}

// MountImage makes target a directory holding the file "ref" (the
// image's reference) and a directory "bin" holding "sh".
func (f *fakeRuntime) MountImage(_ context.Context, img runtime.Image, target string) error {
	f.mu.Lock()
	err := f.mountErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	f.record("mount-image " + img.Ref + " " + target)
	if err := os.MkdirAll(filepath.Join(target, "bin"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(target, "bin", "sh"), nil, 0o755); err != nil { //nolint:gosec // G306: a program of the image
		return err
	}
	return os.WriteFile(filepath.Join(target, "ref"), []byte(img.Ref), 0o644) //nolint:gosec // G306: an image's file
}

func (f *fakeRuntime) UnmountImage(_ context.Context, target string) error {
	f.record("unmount-image " + target)
	return nil
}

func (f *fakeRuntime) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakeRuntime) history() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{pullErr: map[string]error{}, present: map[string]bool{}}
}

func (f *fakeRuntime) EnsureImage(_ context.Context, ref string, policy runtime.PullPolicy, _ []runtime.Credential) (runtime.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if policy == runtime.PullNever && !f.present[ref] {
		return runtime.Image{}, fmt.Errorf("image %s: %w", ref, runtime.ErrImageNeverPull)
	}
	if policy == runtime.PullAlways || !f.present[ref] {
		f.pulls = append(f.pulls, ref)
		if err := f.pullErr[ref]; err != nil {
			return runtime.Image{}, fmt.Errorf("%w: %w", runtime.ErrImagePull, err)
		}
		f.present[ref] = true
	}
	return runtime.Image{Ref: ref, ID: ref + "@sha256:0000", Config: runtime.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"cmd"}}}, nil
}

func (f *fakeRuntime) setPullErr(ref string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pullErr[ref] = err
}

func (f *fakeRuntime) Start(_ context.Context, spec runtime.ContainerSpec) (runtime.Task, error) {
	t := &fakeTask{id: spec.ID, name: spec.Name, rt: f, started: time.Now(), exited: make(chan struct{})}
	f.mu.Lock()
	t.pid = uint32(100 + len(f.tasks)) // each its own, as a process's
	f.started = append(f.started, spec)
	f.tasks = append(f.tasks, t)
	onStart := f.onStart
	f.mu.Unlock()
	if onStart != nil {
		onStart(spec, t)
	}
	return t, nil
}

// Reattach takes over a task this fake started and did not delete, as
// a new agent does: the returned task is a new object (the earlier
// agent's goroutines keep the old one), with the same ID and start, and
// already exited when the old one had (its exit status kept, as by
// containerd's shim until the task is deleted). Exiting the returned task
// ends the container for the new agent only.
func (f *fakeRuntime) Reattach(_ context.Context, spec runtime.ReattachSpec) (runtime.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reattached = append(f.reattached, spec)
	for _, old := range f.tasks {
		old.mu.Lock()
		deleted, status, unseen := old.deleted, old.status, old.endedUnseen
		if old.id == spec.ID && !deleted {
			old.takenOver = true
		}
		old.mu.Unlock()
		if old.id != spec.ID || deleted {
			continue
		}
		t := &fakeTask{id: old.id, name: old.name, rt: f, started: spec.StartedAt, exited: make(chan struct{})}
		switch {
		case unseen != nil:
			t.status = *unseen
			close(t.exited)
		case old.isExited():
			t.status = status
			close(t.exited)
		}
		f.tasks = append(f.tasks, t)
		return t, nil
	}
	return nil, fmt.Errorf("container %s: %w", spec.ID, runtime.ErrNotFound)
}

func (f *fakeRuntime) reattachedSpecs() []runtime.ReattachSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.ReattachSpec(nil), f.reattached...)
}

func (f *fakeRuntime) Cleanup(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tasks {
		t.mu.Lock()
		takenOver := t.takenOver
		t.mu.Unlock()
		if !t.isExited() && !takenOver {
			return errors.New("cleanup with a running task")
		}
	}
	f.cleanups++
	return nil
}

// startedNames returns the container names in start order.
func (f *fakeRuntime) startedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.started {
		out = append(out, s.Name)
	}
	return out
}

func (f *fakeRuntime) startedSpecs() []runtime.ContainerSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.ContainerSpec(nil), f.started...)
}

type fakeTask struct {
	id      string
	name    string
	rt      *fakeRuntime
	started time.Time
	pid     uint32

	mu         sync.Mutex
	exited     chan struct{}
	status     runtime.ExitStatus
	signals    []syscall.Signal
	ignoreTerm bool
	deleted    bool
	// takenOver: a later agent reattached to it (the earlier agent's view
	// of the container, which never ends).
	takenOver bool
	// endedUnseen is how the container ended while no agent ran
	// (endUnseen): the earlier agent's view does not end.
	endedUnseen *runtime.ExitStatus
}

// endUnseen ends the container for a later agent only: it exited after
// the agent that started it died.
func (t *fakeTask) endUnseen(code int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endedUnseen = &runtime.ExitStatus{Code: code, ExitedAt: time.Now()}
	t.takenOver = true
}

// removeUnseen makes the container vanish for a later agent (the
// machine's runtime lost it).
func (t *fakeTask) removeUnseen() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleted, t.takenOver = true, true
}

func (t *fakeTask) ID() string              { return t.id }
func (t *fakeTask) Pid() uint32             { return max(t.pid, 1) }
func (t *fakeTask) StartedAt() time.Time    { return t.started }
func (t *fakeTask) Exited() <-chan struct{} { return t.exited }

func (t *fakeTask) Status() runtime.ExitStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

func (t *fakeTask) isExited() bool {
	select {
	case <-t.exited:
		return true
	default:
		return false
	}
}

// exit ends the task with code (once).
func (t *fakeTask) exit(code int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.exited:
		return
	default:
	}
	t.status = runtime.ExitStatus{Code: code, ExitedAt: time.Now()}
	close(t.exited)
}

// exitAfter ends the task with code after d.
func (t *fakeTask) exitAfter(d time.Duration, code int32) {
	go func() { time.Sleep(d); t.exit(code) }()
}

func (t *fakeTask) Signal(_ context.Context, sig syscall.Signal, _ bool) error {
	t.rt.record(fmt.Sprintf("signal %s %d", t.name, sig))
	t.mu.Lock()
	t.signals = append(t.signals, sig)
	ignore := t.ignoreTerm
	t.mu.Unlock()
	switch {
	case sig == syscall.SIGKILL:
		t.exit(137)
	case !ignore:
		t.exit(128 + int32(sig))
	}
	return nil
}

func (t *fakeTask) gotSignals() []syscall.Signal {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]syscall.Signal(nil), t.signals...)
}

func (t *fakeTask) Delete(context.Context) error {
	t.exit(137)
	t.mu.Lock()
	t.deleted = true
	t.mu.Unlock()
	return nil
}

func (t *fakeTask) Exec(_ context.Context, spec runtime.ExecSpec) (runtime.Process, error) {
	t.rt.mu.Lock()
	onExec := t.rt.onExec
	t.rt.mu.Unlock()
	if onExec == nil {
		return nil, errors.New("fake: no exec")
	}
	t.rt.record(fmt.Sprintf("exec %s %s", t.name, strings.Join(spec.Args, " ")))
	return &fakeProcess{run: func(ctx context.Context) int32 {
		out, code := onExec(ctx, t.name, spec.Args)
		if spec.Stdout != nil {
			_, _ = io.WriteString(spec.Stdout, out)
		}
		return code
	}}, nil
}

// fakeProcess runs its function on Wait; a ctx that ends first kills it
// (exit 137), as the containerd runtime does.
type fakeProcess struct {
	run func(ctx context.Context) int32
}

func (p *fakeProcess) Resize(context.Context, uint32, uint32) error { return nil }
func (p *fakeProcess) CloseStdin(context.Context) error             { return nil }
func (p *fakeProcess) Signal(context.Context, syscall.Signal) error { return nil }

func (p *fakeProcess) Wait(ctx context.Context) (int32, error) {
	code := p.run(ctx)
	select {
	case <-ctx.Done():
		return 137, nil
	default:
		return code, nil
	}
}

func (t *fakeTask) Resize(context.Context, uint32, uint32) error { return nil }

func (t *fakeTask) CloseStdin(context.Context) error { return nil }

func (t *fakeTask) Metrics(context.Context) (runtime.Metrics, error) {
	return runtime.Metrics{Time: time.Now()}, nil
}
