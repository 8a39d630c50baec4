package snapshot

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestTimingsNext(t *testing.T) {
	tm := Timings{Slow: time.Minute, Fast: time.Second, Boot: time.Second / 2}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		quickest time.Duration
		known    bool
		booting  []time.Time
		want     time.Duration
	}{
		{name: "nothing boots", known: true, want: time.Minute},
		{name: "no boot timed yet", booting: []time.Time{now}, want: time.Second},
		{name: "launch time not known", quickest: 20 * time.Second, known: true, booting: []time.Time{{}}, want: time.Second},
		// 20 s boots: look at launch + 20 s − 0.5 s − 1 s.
		{name: "just launched", quickest: 20 * time.Second, known: true, booting: []time.Time{now}, want: 18*time.Second + time.Second/2},
		{name: "may have booted", quickest: 20 * time.Second, known: true, booting: []time.Time{now.Add(-30 * time.Second)}, want: time.Second / 2},
		{name: "the soonest of two", quickest: 20 * time.Second, known: true, booting: []time.Time{now, now.Add(-10 * time.Second)}, want: 8*time.Second + time.Second/2},
		{name: "a boot longer than the slow poll", quickest: time.Hour, known: true, booting: []time.Time{now}, want: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tm.Next(now, tt.quickest, tt.known, tt.booting); got != tt.want {
				t.Errorf("Next = %v, want %v", got, tt.want)
			}
		})
	}
}

// Poll hands each snapshot to step and sleeps what step says, but a
// launch ends the sleep at once; a failed poll is retried after Fast; it
// ends with ctx.
func TestPoll(t *testing.T) {
	var fetches atomic.Int32
	failNext := atomic.Bool{}
	v := New(func(context.Context) (map[string]string, error) {
		fetches.Add(1)
		if failNext.CompareAndSwap(true, false) {
			return nil, errors.New("throttled")
		}
		return map[string]string{}, nil
	}, time.Now, time.Minute)
	tm := Timings{Slow: time.Hour, Fast: 7 * time.Millisecond, SnapshotAge: 0}
	ctx, cancel := context.WithCancel(t.Context())
	slept := make(chan time.Duration, 10)
	sleep := func(ctx context.Context, d time.Duration) error {
		slept <- d
		if d == tm.Fast {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}
	steps := make(chan map[string]string, 10)
	done := make(chan error, 1)
	go func() {
		done <- v.Poll(ctx, tm, sleep, slog.New(slog.DiscardHandler), func(snap map[string]string) (time.Duration, error) {
			steps <- snap
			return tm.Slow, nil
		})
	}()
	next := func(what string) time.Duration {
		t.Helper()
		select {
		case d := <-slept:
			return d
		case <-time.After(5 * time.Second):
			t.Fatalf("no sleep %s", what)
			return 0
		}
	}
	if d := next("after the first poll"); d != time.Hour {
		t.Fatalf("slept %v after a poll whose step said an hour", d)
	}
	<-steps
	// A launch cuts the hour short: the next poll runs and its snapshot
	// has the launched instance.
	v.Launched("i-1", "pending")
	if d := next("after the launch"); d != time.Hour {
		t.Fatalf("slept %v, want the step's hour again", d)
	}
	if snap := <-steps; snap["i-1"] != "pending" {
		t.Errorf("the poll after the launch saw %v, want i-1 pending", snap)
	}
	// A failed poll waits Fast, then polls again.
	failNext.Store(true)
	v.Uncertain()
	if d := next("after a failed poll"); d != tm.Fast {
		t.Errorf("slept %v after a failed poll, want Fast %v", d, tm.Fast)
	}
	if d := next("after the poll that followed"); d != time.Hour {
		t.Errorf("slept %v, want the step's hour", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Poll = %v, want context.Canceled", err)
	}
}
