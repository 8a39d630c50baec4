package simcells

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// record is a simulator's instance record for tests.
type record struct {
	cell    Cell
	readyAt time.Time
	failed  bool
	stopped int
}

// recordInstance is a record as the Lifecycle sees it.
type recordInstance struct{ r *record }

func (i recordInstance) Cell() *Cell           { return &i.r.cell }
func (i recordInstance) ReadyAt() time.Time    { return i.r.readyAt }
func (i recordInstance) StartFailed(time.Time) { i.r.failed = true }
func (i recordInstance) CellStopped(time.Time) { i.r.stopped++ }
func (i recordInstance) snapshot(mu *sync.Mutex) record {
	mu.Lock()
	defer mu.Unlock()
	return *i.r
}

// starter is a CellStarter that fails or blocks on demand.
type starter struct {
	gate  chan struct{}
	fail  error
	mu    sync.Mutex
	stops []string
}

func (s *starter) Start(ctx context.Context, id, _ string, _ []byte) (Addresses, error) {
	if s.gate != nil {
		<-s.gate
	}
	if s.fail != nil {
		return Addresses{}, s.fail
	}
	return Addresses{Private: "127.0.0.9", Pod: "127.0.0.10"}, nil
}

func (s *starter) Stop(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, id)
	return nil
}

func newLifecycle(st CellStarter, mu *sync.Mutex) *Lifecycle {
	return NewLifecycle(LifecycleConfig{Starter: st, StartTimeout: time.Minute, Lock: mu, Now: time.Now, Logger: slog.New(slog.DiscardHandler)})
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name        string
		starter     *starter
		stopEarly   bool // stop while Start runs
		wantStarted bool
		wantFailed  bool
		wantStops   int // CellStarter.Stop calls
	}{
		{name: "no starter", wantStarted: true},
		{name: "started then stopped", starter: &starter{}, wantStarted: true, wantStops: 1},
		{name: "start failed", starter: &starter{fail: errors.New("no")}, wantFailed: true, wantStops: 1},
		{name: "stopped while starting", starter: &starter{gate: make(chan struct{})}, stopEarly: true, wantStarted: true, wantStops: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var cs CellStarter
			if tt.starter != nil {
				cs = tt.starter
			}
			l := newLifecycle(cs, &mu)
			in := recordInstance{&record{cell: Cell{ID: "i-1", Type: "small"}}}
			mu.Lock()
			l.StartLocked(in)
			if tt.stopEarly {
				l.StopLocked(in)
			}
			mu.Unlock()
			if tt.starter != nil && tt.starter.gate != nil {
				close(tt.starter.gate)
			}
			l.Wait()
			if !tt.stopEarly {
				mu.Lock()
				l.StopLocked(in)
				l.StopLocked(in) // idempotent
				mu.Unlock()
				l.Wait()
			}
			got := in.snapshot(&mu)
			if got.cell.Started != tt.wantStarted || got.failed != tt.wantFailed || !got.cell.Stopped || got.stopped != 1 {
				t.Errorf("started %v failed %v stopped %v (CellStopped %d times); want %v %v true 1",
					got.cell.Started, got.failed, got.cell.Stopped, got.stopped, tt.wantStarted, tt.wantFailed)
			}
			if tt.starter != nil && len(tt.starter.stops) != tt.wantStops {
				t.Errorf("Stop called %d times, want %d", len(tt.starter.stops), tt.wantStops)
			}
		})
	}
}
