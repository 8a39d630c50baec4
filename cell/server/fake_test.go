package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/runtime"
)

// fakeRuntime runs containers that live until signalled.
type fakeRuntime struct{}

func (fakeRuntime) EnsureImage(_ context.Context, ref string, _ runtime.PullPolicy, _ []runtime.Credential) (runtime.Image, error) {
	return runtime.Image{Ref: ref, ID: ref + "@sha256:0"}, nil
}

func (fakeRuntime) Start(_ context.Context, spec runtime.ContainerSpec) (runtime.Task, error) {
	return &fakeTask{id: spec.ID, exited: make(chan struct{})}, nil
}

func (fakeRuntime) Reattach(_ context.Context, spec runtime.ReattachSpec) (runtime.Task, error) {
	return nil, fmt.Errorf("container %s: %w", spec.ID, runtime.ErrNotFound)
}

func (fakeRuntime) MountImage(context.Context, runtime.Image, string) error { return nil }

func (fakeRuntime) UnmountImage(context.Context, string) error { return nil }

func (fakeRuntime) Cleanup(context.Context) error { return nil }

type fakeTask struct {
	id     string
	once   sync.Once
	exited chan struct{}
}

func (t *fakeTask) ID() string              { return t.id }
func (t *fakeTask) Pid() uint32             { return 1 }
func (t *fakeTask) StartedAt() time.Time    { return time.Now() }
func (t *fakeTask) Exited() <-chan struct{} { return t.exited }
func (t *fakeTask) Status() runtime.ExitStatus {
	return runtime.ExitStatus{Code: 0, ExitedAt: time.Now()}
}
func (t *fakeTask) Delete(context.Context) error                 { t.once.Do(func() { close(t.exited) }); return nil }
func (t *fakeTask) Resize(context.Context, uint32, uint32) error { return nil }
func (t *fakeTask) CloseStdin(context.Context) error             { return nil }
func (t *fakeTask) Metrics(context.Context) (runtime.Metrics, error) {
	return runtime.Metrics{}, nil
}

func (t *fakeTask) Signal(context.Context, syscall.Signal, bool) error {
	t.once.Do(func() { close(t.exited) })
	return nil
}

func (t *fakeTask) Exec(context.Context, runtime.ExecSpec) (runtime.Process, error) {
	return nil, errors.New("fake: no exec")
}

// watchStream is the sending end of a WatchStatus subscription (its Send
// is WatchStatus's send), recording what is sent; fail, when set, decides
// whether a send fails.
type watchStream struct {
	mu   sync.Mutex
	sent []*api.StatusUpdate
	fail func(*api.StatusUpdate) bool
	got  chan *api.StatusUpdate
}

func newWatchStream() *watchStream {
	return &watchStream{got: make(chan *api.StatusUpdate, 1000)}
}

func (w *watchStream) Send(u *api.StatusUpdate) error {
	if w.fail != nil && w.fail(u) {
		return errors.New("stream broken")
	}
	w.mu.Lock()
	w.sent = append(w.sent, u)
	w.mu.Unlock()
	w.got <- u
	return nil
}
