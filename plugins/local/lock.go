package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// A state directory may be used by several plugin processes at once (an
// old one still finishing a call while its replacement starts) and by many
// goroutines in each. Two kinds of lock keep them apart:
//
//   - an in-process lock per name, so goroutines of one process queue on a
//     channel (and give up when their ctx ends) instead of on the kernel;
//   - an flock(2) on a lock file, for other processes. flock locks belong
//     to an open file description, so it would also exclude goroutines of
//     this process, but only by polling; the in-process lock makes that
//     rare.
//
// Lock files live beside the directories they guard, never inside: the
// holder of a cell's lock may remove the cell directory.

// locker hands out named locks of one process.
type locker struct {
	mu    sync.Mutex
	slots map[string]chan struct{}
}

// unlock releases a lock taken by lock.
type unlock func()

// lock takes the lock called name, stored in the file path: first the
// in-process lock, then the flock. It gives up with ctx.Err() when ctx ends.
func (l *locker) lock(ctx context.Context, name, path string) (unlock, error) {
	slot := l.slot(name)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f, err := flockFile(ctx, path)
	if err != nil {
		<-slot
		return nil, err
	}
	return func() {
		f.Close() // releases the flock
		<-slot
	}, nil
}

func (l *locker) slot(name string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = map[string]chan struct{}{}
	}
	s, ok := l.slots[name]
	if !ok {
		s = make(chan struct{}, 1)
		l.slots[name] = s
	}
	return s
}

// flockFile opens (creating) path and takes an exclusive flock on it,
// polling so that ctx is honoured. Because a holder may remove the lock
// file (Terminate does, with the cell), a lock taken on a file that is no
// longer at path is worthless: flockFile checks that the locked file is
// still the one at path and otherwise starts again.
func flockFile(ctx context.Context, path string) (*os.File, error) {
	delay := time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening lock %s: %w", path, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if samePath(f, path) {
				return f, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// samePath reports whether the open file f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// lockHeld reports whether some process holds the lock in path without
// waiting for it. A missing lock file is a free lock.
func lockHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	return false // we got it; Close releases it
}
