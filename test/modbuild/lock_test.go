package modbuild

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLock: a second Lock of the same directory waits until the first is
// released, and gives up when its ctx ends.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*lockPoll)
	defer cancel()
	if _, err := Lock(ctx, dir); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Lock while the first is held: %v, want the ctx's deadline", err)
	}

	got := make(chan error, 1)
	go func() {
		unlock2, err := Lock(t.Context(), dir)
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a second Lock returned (%v) while the first was held", err)
	case <-time.After(2 * lockPoll):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second Lock still waits after the first was released")
	}
}
