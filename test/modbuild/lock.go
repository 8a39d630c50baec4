package modbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPoll is how often Lock tries again while another process holds the
// lock.
const lockPoll = 200 * time.Millisecond

// Lock takes the build lock of dir (dir/.lock, an flock), waiting while
// another process holds it, until ctx ends; it returns the function that
// releases it. Two test binaries that build the same cached program at
// once (go test runs packages in parallel: test/e2e and test/kubeletnode
// both build the control plane) would otherwise share one scratch module
// ("go: updating go.mod: existing contents have changed since last read").
// Call Current again once locked: the other process may have built it.
// The lock goes with the process, whatever way it ends.
func Lock(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("locking the build in %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the build in %s: %w", dir, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking the build in %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another process's build in %s: %w", dir, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
