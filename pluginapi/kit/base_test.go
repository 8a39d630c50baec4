package kit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

func TestNewBase(t *testing.T) {
	b := NewBase(nil)
	if b.Log == nil || b.Now == nil || b.Sleep == nil {
		t.Fatalf("NewBase(nil) left a seam nil: %+v", b)
	}
	want := snapshot.Timings{Slow: DefaultPollSlow, Fast: DefaultPollFast, Boot: DefaultPollBoot, SnapshotAge: DefaultSnapshotAge}
	if got := b.Timings(); got != want {
		t.Errorf("Timings() = %+v, want %+v", got, want)
	}
	if b.ConsistencyWindow != DefaultConsistencyWindow {
		t.Errorf("ConsistencyWindow = %v, want %v", b.ConsistencyWindow, DefaultConsistencyWindow)
	}
}

func TestNextPoll(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		boots   []time.Duration
		booting []time.Time
		want    time.Duration
	}{
		{"nothing boots", nil, nil, time.Minute},
		{"a boot, none timed", nil, []time.Time{now}, time.Second},
		{"a boot, 20 s timed", []time.Duration{30 * time.Second, 20 * time.Second}, []time.Time{now}, 20*time.Second - time.Second/2 - time.Second},
		{"a boot nearly over", []time.Duration{20 * time.Second}, []time.Time{now.Add(-time.Minute)}, time.Second / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Base{Now: func() time.Time { return now }, PollFast: time.Second, PollSlow: time.Minute, PollBoot: time.Second / 2}
			for _, d := range tt.boots {
				b.Boots.Add(d)
			}
			if got := b.NextPoll(tt.booting); got != tt.want {
				t.Errorf("NextPoll() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigured(t *testing.T) {
	type config struct{ region string }
	c := NewConfigured[config]("toy")
	tests := []struct {
		name    string
		store   *config
		want    *config
		wantErr bool
	}{
		{name: "before Configure", wantErr: true},
		{name: "configured", store: &config{region: "r1"}, want: &config{region: "r1"}},
		{name: "configured again", store: &config{region: "r2"}, want: &config{region: "r2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.store != nil {
				c.Store(tt.store)
			}
			got, err := c.Get()
			if tt.wantErr {
				if !errors.Is(err, c.ErrNotConfigured()) || !pluginapi.IsNotConfigured(err) || !strings.Contains(err.Error(), "the toy plugin is not configured") {
					t.Fatalf("Get() = %v, %v; want the toy's NotConfigured error", got, err)
				}
				if _, err := c.Ready(t.Context()); !errors.Is(err, c.ErrNotConfigured()) {
					t.Errorf("Ready() = %v, want the NotConfigured error", err)
				}
				if c.Load() != nil {
					t.Errorf("Load() = %v, want nil", c.Load())
				}
				return
			}
			if err != nil || *got != *tt.want || c.Load() != got {
				t.Fatalf("Get() = %v, %v; Load() = %v; want %v", got, err, c.Load(), tt.want)
			}
			if ready, err := c.Ready(t.Context()); ready != got || err != nil {
				t.Errorf("Ready() = %v, %v; want %v", ready, err, got)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := c.Ready(ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("Ready(cancelled) = %v, want context.Canceled", err)
			}
		})
	}
}
