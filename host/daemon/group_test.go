package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// untilDone is a component that runs until its context ends, counting its
// returns in stopped.
func untilDone(stopped *atomic.Int32) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Add(1)
		return nil
	}
}

func TestGroup(t *testing.T) {
	failed := errors.New("plugin exited")
	tests := []struct {
		name string
		// run starts the group's components and returns how many
		// untilDone components it started and what Wait must return.
		run     func(g *group, stopped *atomic.Int32, cancel context.CancelFunc) (int32, error)
		drained bool // every untilDone component returned when Wait did
	}{
		{name: "the first to return ends the group and its error is the group's", drained: true,
			run: func(g *group, stopped *atomic.Int32, _ context.CancelFunc) (int32, error) {
				g.Go("cells", untilDone(stopped))
				g.Go("node", untilDone(stopped))
				g.Go("plugin", func(context.Context) error { return failed })
				return 2, failed
			}},
		{name: "the context's end ends the group without an error", drained: true,
			run: func(g *group, stopped *atomic.Int32, cancel context.CancelFunc) (int32, error) {
				g.Go("cells", untilDone(stopped))
				cancel()
				return 1, nil
			}},
		{name: "a background component's failure does not end the group", drained: true,
			run: func(g *group, stopped *atomic.Int32, _ context.CancelFunc) (int32, error) {
				g.Background("clusterip", func(context.Context) error { return errors.New("watch failed") })
				g.Go("cells", untilDone(stopped))
				time.Sleep(50 * time.Millisecond) // the background component has failed (not an assertion)
				g.Go("plugin", func(context.Context) error { return failed })
				return 1, failed
			}},
		{name: "a component ending before another is ready ends the group",
			run: func(g *group, stopped *atomic.Int32, _ context.CancelFunc) (int32, error) {
				g.Go("cells", untilDone(stopped))
				g.Go("plugin", func(context.Context) error { return failed })
				if g.Ready(make(chan struct{})) { // never ready
					g.Go("node", untilDone(stopped))
				}
				return 1, failed
			}, drained: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			g := newGroup(ctx, slog.New(slog.DiscardHandler))
			var stopped atomic.Int32
			started, want := tt.run(g, &stopped, cancel)
			if err := g.Wait(true); !errors.Is(err, want) {
				t.Errorf("Wait = %v, want %v", err, want)
			}
			if n := stopped.Load(); tt.drained && n != started {
				t.Errorf("%d of %d components had returned when the drained group's Wait did", n, started)
			}
		})
	}
}

// A drain gives up on a component that does not return, after the
// group's drain timeout, and Wait still returns.
func TestGroupDrainGivesUp(t *testing.T) {
	g := newGroup(t.Context(), slog.New(slog.DiscardHandler))
	g.drainTimeout = 50 * time.Millisecond
	stuck := make(chan struct{})
	defer close(stuck)
	g.Go("stuck", func(context.Context) error { <-stuck; return nil })
	g.Go("plugin", func(context.Context) error { return errors.New("plugin exited") })
	done := make(chan error, 1)
	go func() { done <- g.Wait(true) }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "plugin exited" {
			t.Errorf("Wait = %v, want the plugin's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not give up on a component that never returns")
	}
}
