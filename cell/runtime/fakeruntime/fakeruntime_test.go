package fakeruntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/test/syncbuf"
)

func waitExit(t *testing.T, task runtime.Task) runtime.ExitStatus {
	t.Helper()
	select {
	case <-task.Exited():
		return task.Status()
	case <-time.After(10 * time.Second):
		t.Fatalf("container %s never exited", task.ID())
		return runtime.ExitStatus{}
	}
}

func running(task runtime.Task) bool {
	select {
	case <-task.Exited():
		return false
	default:
		return true
	}
}

// TestContainersEndByTheirCommand: each command's rule, then a signal
// for those still running.
func TestContainersEndByTheirCommand(t *testing.T) {
	tests := map[string]struct {
		args []string
		// signal is sent when the container still runs after Start.
		signal   syscall.Signal
		wantCode int32
	}{
		"exit 3":                 {args: []string{"exit", "3"}, wantCode: 3},
		"exit alone":             {args: []string{"exit"}, wantCode: 0},
		"/bin/exit 1":            {args: []string{"/bin/exit", "1"}, wantCode: 1},
		"sleep a moment":         {args: []string{"/bin/sleep", "0.05"}, wantCode: 0},
		"a server, SIGTERM":      {args: []string{"/app", "-serve"}, signal: syscall.SIGTERM, wantCode: 143},
		"a server, SIGKILL":      {args: []string{"nginx"}, signal: syscall.SIGKILL, wantCode: 137},
		"no command, SIGINT":     {signal: syscall.SIGINT, wantCode: 130},
		"sleep forever, SIGTERM": {args: []string{"sleep", "infinity"}, signal: syscall.SIGTERM, wantCode: 143},
		"exit bad code, SIGTERM": {args: []string{"exit", "x"}, signal: syscall.SIGTERM, wantCode: 143},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rt := New(Config{})
			var out syncbuf.Buffer
			task, err := rt.Start(t.Context(), runtime.ContainerSpec{ID: "c1", Name: "app", Args: tt.args, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if tt.signal != 0 {
				if err := task.Signal(t.Context(), 0, false); err != nil || !running(task) {
					t.Fatalf("signal 0: %v, running %v; want a running container", err, running(task))
				}
				if err := task.Signal(t.Context(), tt.signal, false); err != nil {
					t.Fatal(err)
				}
			}
			if got := waitExit(t, task).Code; got != tt.wantCode {
				t.Errorf("exit code %d, want %d", got, tt.wantCode)
			}
			if got, want := out.String(), strings.Join(tt.args, " ")+"\n"; got != want {
				t.Errorf("output %q, want %q", got, want)
			}
		})
	}
}

func TestEnsureImage(t *testing.T) {
	rt := New(Config{})
	ctx := t.Context()
	if _, err := rt.EnsureImage(ctx, "busybox:1.36", runtime.PullNever, nil); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("policy Never for an absent image: %v, want ErrImageNeverPull", err)
	}
	img, err := rt.EnsureImage(ctx, "registry:5000/busybox:1.36", runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "registry:5000/busybox:1.36" || !strings.HasPrefix(img.ID, "registry:5000/busybox@sha256:") {
		t.Errorf("image %+v, want the reference and a digested ID of its repository", img)
	}
	again, err := rt.EnsureImage(ctx, "registry:5000/busybox:1.36", runtime.PullNever, nil)
	if err != nil || again.ID != img.ID {
		t.Errorf("policy Never for an image ensured before: %+v, %v; want %s", again, err, img.ID)
	}
	if err := rt.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.EnsureImage(ctx, "registry:5000/busybox:1.36", runtime.PullNever, nil); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("policy Never after Cleanup: %v, want ErrImageNeverPull", err)
	}
}

func TestPullDelayEndsWithTheContext(t *testing.T) {
	rt := New(Config{PullDelay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := rt.EnsureImage(ctx, "busybox", runtime.PullAlways, nil); !errors.Is(err, runtime.ErrImagePull) || !errors.Is(err, context.Canceled) {
		t.Errorf("a pull cut short: %v, want ErrImagePull and context.Canceled", err)
	}
}

func TestExec(t *testing.T) {
	tests := map[string]struct {
		args     []string
		stdin    string
		wantOut  string
		wantCode int32
	}{
		"echo":       {args: []string{"echo", "hi"}, wantOut: "echo hi\n"},
		"stdin":      {args: []string{"cat"}, stdin: "a\nb\n", wantOut: "cat\na\nb\n"},
		"exit 2":     {args: []string{"exit", "2"}, wantOut: "exit 2\n", wantCode: 2},
		"sh -c exit": {args: []string{"sh", "-c", "exit 4"}, wantOut: "sh -c exit 4\n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := New(Config{}).Start(t.Context(), runtime.ContainerSpec{ID: "c1", Args: []string{"/app"}})
			if err != nil {
				t.Fatal(err)
			}
			var out syncbuf.Buffer
			spec := runtime.ExecSpec{Args: tt.args, Stdout: &out}
			if tt.stdin != "" {
				spec.Stdin = strings.NewReader(tt.stdin)
			}
			p, err := task.Exec(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			code, err := p.Wait(t.Context())
			if err != nil || code != tt.wantCode {
				t.Errorf("Wait = %d, %v; want %d", code, err, tt.wantCode)
			}
			if out.String() != tt.wantOut {
				t.Errorf("output %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}

// blockingReader never ends.
type blockingReader struct{ done chan struct{} }

func (r blockingReader) Read([]byte) (int, error) { <-r.done; return 0, errors.New("closed") }

func TestExecEndsBySignalOrContext(t *testing.T) {
	task, err := New(Config{}).Start(t.Context(), runtime.ContainerSpec{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	stdin := blockingReader{done: make(chan struct{})}
	defer close(stdin.done)
	p, err := task.Exec(t.Context(), runtime.ExecSpec{Args: []string{"sh"}, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Wait(t.Context()); code != 143 {
		t.Errorf("a signalled exec exited %d, want 143", code)
	}
	p, err = task.Exec(t.Context(), runtime.ExecSpec{Args: []string{"sh"}, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if code, _ := p.Wait(ctx); code != 137 {
		t.Errorf("an exec whose context ended exited %d, want 137", code)
	}
	if err := task.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Exec(t.Context(), runtime.ExecSpec{Args: []string{"sh"}}); err == nil {
		t.Error("exec in a deleted container succeeded")
	}
}

func TestMetrics(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start
	rt := New(Config{Now: func() time.Time { return now }})
	task, err := rt.Start(t.Context(), runtime.ContainerSpec{ID: "c1", Resources: runtime.Resources{MemoryLimitBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	now = start.Add(10 * time.Second)
	got, err := task.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Metrics{Time: now, CPUUsageNanos: uint64(10 * time.Millisecond), MemoryUsageBytes: MemoryUsage,
		MemoryWorkingSet: MemoryUsage, MemoryRSSBytes: MemoryUsage / 2, MemoryLimitBytes: 64 << 20, ProcessesCurrent: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestReattachAndCleanup(t *testing.T) {
	rt := New(Config{})
	ctx := t.Context()
	if _, err := rt.Reattach(ctx, runtime.ReattachSpec{ID: "c1"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Reattach of an unknown container: %v, want ErrNotFound", err)
	}
	var first, second syncbuf.Buffer
	task, err := rt.Start(ctx, runtime.ContainerSpec{ID: "c1", Args: []string{"/app"}, Stdout: &first})
	if err != nil {
		t.Fatal(err)
	}
	again, err := rt.Reattach(ctx, runtime.ReattachSpec{ID: "c1", Stdout: &second})
	if err != nil || again.ID() != "c1" || !running(again) {
		t.Fatalf("Reattach = %v, %v; want the running container c1", again, err)
	}
	if _, err := rt.Start(ctx, runtime.ContainerSpec{ID: "c2", Args: []string{"/app"}}); err != nil {
		t.Fatal(err)
	}
	if n := rt.Running(); n != 2 {
		t.Errorf("%d running, want 2", n)
	}
	if err := rt.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := waitExit(t, task).Code; got != 137 || rt.Running() != 0 {
		t.Errorf("after Cleanup: c1 exited %d, %d running; want 137 and none", got, rt.Running())
	}
	if _, err := rt.Reattach(ctx, runtime.ReattachSpec{ID: "c1"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Reattach after Cleanup: %v, want ErrNotFound", err)
	}
}

// MountImage makes a directory naming the image; UnmountImage empties it,
// and again is no error.
func TestMountImage(t *testing.T) {
	r := New(Config{})
	target := filepath.Join(t.TempDir(), "vol")
	img, err := r.EnsureImage(t.Context(), "reg/data:v1", runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MountImage(t.Context(), img, target); err != nil {
		t.Fatalf("MountImage: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(target, ImageFile)); err != nil || string(got) != "reg/data:v1\n" {
		t.Errorf("%s = %q, %v", ImageFile, got, err)
	}
	for range 2 {
		if err := r.UnmountImage(t.Context(), target); err != nil {
			t.Fatalf("UnmountImage: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(target, ImageFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after UnmountImage: %v", ImageFile, err)
	}
}
