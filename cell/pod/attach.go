package pod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kipcell/kip/cell/runtime"
)

// attachBuffer is how many output chunks an attach session may lag behind
// before it is cut off (the container never waits for an attach).
const attachBuffer = 1024

// ErrAttachTooSlow ends an attach session that did not keep up with the
// container's output.
var ErrAttachTooSlow = errors.New("attach session did not keep up with the output")

// attachIO is the stdio of one attempt of a container's main process: the
// output goes to the log and to the attach sessions, and with stdin: true
// the sessions write to the process's stdin through a pipe that lives as
// long as the attempt (so several sessions may come one after the other).
type attachIO struct {
	tty       bool
	stdinOnce bool
	stdout    *broadcaster
	stderr    *broadcaster
	stdinR    *io.PipeReader // nil without stdin
	stdinW    *io.PipeWriter

	mu          sync.Mutex
	task        runtime.Task
	stdinClosed bool
}

func newAttachIO(stdin, tty, stdinOnce bool) *attachIO {
	a := &attachIO{tty: tty, stdinOnce: stdinOnce, stdout: newBroadcaster(), stderr: newBroadcaster()}
	if stdin {
		a.stdinR, a.stdinW = io.Pipe()
	}
	return a
}

// stdinReader is what the runtime copies to the process's stdin.
func (a *attachIO) stdinReader() io.Reader {
	if a.stdinR == nil {
		return nil
	}
	return a.stdinR
}

func (a *attachIO) setTask(t runtime.Task) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.task = t
}

// closeStdin ends the process's stdin for good (stdinOnce).
func (a *attachIO) closeStdin(ctx context.Context) error {
	a.mu.Lock()
	if a.stdinW == nil || a.stdinClosed {
		a.mu.Unlock()
		return nil
	}
	a.stdinClosed = true
	task := a.task
	a.mu.Unlock()
	// EOF makes the copier close the FIFO; CloseIO tells the shim too.
	_ = a.stdinW.Close()
	if task != nil {
		if err := task.CloseStdin(ctx); err != nil {
			return fmt.Errorf("closing container stdin: %w", err)
		}
	}
	return nil
}

// close ends the attempt's sessions and unblocks stdin writers.
func (a *attachIO) close() {
	a.stdout.close()
	a.stderr.close()
	if a.stdinR != nil {
		_ = a.stdinR.CloseWithError(io.ErrClosedPipe)
	}
}

// Attachment is one attach session to a container's running main
// process: its output from now on, its stdin (with stdin: true) and its
// terminal (with tty: true).
type Attachment struct {
	// TTY: the process has a terminal; all output comes on Stdout.
	TTY bool
	// Stdin: the process has a stdin the session may write to.
	Stdin bool
	// Stdout and Stderr carry the output; nil when not asked for. They are
	// closed when the attempt ends, on Detach, or when the session fell
	// too far behind (Err then says so).
	Stdout, Stderr <-chan []byte

	aio        *attachIO
	task       runtime.Task
	subs       []*subscription
	usedStdin  bool
	detachOnce sync.Once
	mu         sync.Mutex
}

// Attach starts an attach session to a container's running process,
// subscribing to the streams asked for.
func (m *Manager) Attach(container string, stdout, stderr bool) (*Attachment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.findLocked(container)
	if cs == nil {
		return nil, fmt.Errorf("container %q: %w", container, ErrNoContainer)
	}
	if cs.task == nil || cs.aio == nil {
		return nil, fmt.Errorf("container %q is not running", container)
	}
	aio := cs.aio
	at := &Attachment{TTY: aio.tty, Stdin: aio.stdinW != nil, aio: aio, task: cs.task}
	if stdout || aio.tty {
		s := aio.stdout.subscribe()
		at.subs = append(at.subs, s)
		at.Stdout = s.ch
	}
	if stderr && !aio.tty {
		s := aio.stderr.subscribe()
		at.subs = append(at.subs, s)
		at.Stderr = s.ch
	}
	return at, nil
}

// Exited is closed once the process has exited; ExitCode is valid then.
func (a *Attachment) Exited() <-chan struct{} { return a.task.Exited() }

// ExitCode is the process's exit code, once it exited.
func (a *Attachment) ExitCode() int32 { return a.task.Status().Code }

// Err reports why the output channels closed early, if they did.
func (a *Attachment) Err() error {
	for _, s := range a.subs {
		if s.overflowed() {
			return ErrAttachTooSlow
		}
	}
	return nil
}

// WriteStdin writes to the process's stdin; it blocks while the process
// does not read.
func (a *Attachment) WriteStdin(p []byte) error {
	if !a.Stdin {
		return errors.New("writing stdin: the container has no stdin (stdin: false)")
	}
	a.mu.Lock()
	a.usedStdin = true
	a.mu.Unlock()
	a.aio.mu.Lock()
	closed := a.aio.stdinClosed
	a.aio.mu.Unlock()
	if closed {
		return errors.New("writing stdin: stdin was closed (stdinOnce)")
	}
	if _, err := a.aio.stdinW.Write(p); err != nil {
		return fmt.Errorf("writing stdin: %w", err)
	}
	return nil
}

// EndStdin ends this session's stdin (the client closed it). With
// stdinOnce the process's stdin is closed; otherwise it stays open for
// the next session.
func (a *Attachment) EndStdin(ctx context.Context) error {
	if !a.Stdin || !a.aio.stdinOnce {
		return nil
	}
	return a.aio.closeStdin(ctx)
}

// Resize sets the terminal size (TTY only).
func (a *Attachment) Resize(ctx context.Context, width, height uint32) error {
	if !a.TTY {
		return nil
	}
	if err := a.task.Resize(ctx, width, height); err != nil {
		return fmt.Errorf("resizing attached terminal: %w", err)
	}
	return nil
}

// Detach ends the session: the output stops, and with stdinOnce the
// process's stdin is closed once the first session that could write to
// it went away, as on a kubelet.
func (a *Attachment) Detach(ctx context.Context) error {
	var err error
	a.detachOnce.Do(func() {
		for _, s := range a.subs {
			s.cancel()
		}
		if a.Stdin && a.aio.stdinOnce {
			err = a.aio.closeStdin(ctx)
		}
	})
	return err
}
