package snapshot

import (
	"context"
	"log/slog"
	"time"
)

// Timings are the poll intervals of an event watcher that polls a View
// (a plugin's WatchEvents).
type Timings struct {
	// Slow is the interval while nothing changes.
	Slow time.Duration
	// Fast is the interval while an instance boots and no boot has been
	// timed yet, while something the plugin watches closely goes on (an
	// instance it did not end is ending), and after a failed poll.
	Fast time.Duration
	// Boot is the interval once a booting instance may have booted.
	Boot time.Duration
	// SnapshotAge is the oldest snapshot a poll accepts (when its
	// interval is longer): polls of a burst of watchers share a snapshot.
	SnapshotAge time.Duration
}

// Poll is an event watcher's loop over v: it takes a snapshot (at most the
// interval or t.SnapshotAge old, whichever is less), hands it to step,
// which sends what changed and returns the wait before the next poll
// (Timings.Next), and waits that long, or until the plugin's next launch
// (NextLaunch), so that a new instance is looked at at once rather than
// at the end of a slow sleep. A failed poll is logged and tried again
// after t.Fast. It returns ctx's error when ctx ends, or step's, or
// sleep's (the plugin's clock, a seam for tests: it sleeps d or returns
// ctx's error).
func (v *View[T]) Poll(ctx context.Context, t Timings, sleep func(context.Context, time.Duration) error, log *slog.Logger,
	step func(map[string]T) (time.Duration, error),
) error {
	interval := t.Fast
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		launch := v.NextLaunch() // before the poll: a launch during it ends the sleep after it
		snap, err := v.Get(ctx, min(interval, t.SnapshotAge))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			log.Warn("watching instances: polling failed; retrying", "error", err, "retry_in", t.Fast)
			interval = t.Fast
		default:
			if interval, err = step(snap); err != nil {
				return err
			}
		}
		if err := sleepUntil(ctx, sleep, interval, launch); err != nil {
			return err
		}
	}
}

// sleepUntil sleeps for d, or until launch closes: it returns nil either
// way, and ctx's error when ctx ended.
func sleepUntil(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration, launch <-chan struct{}) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-launch:
			cancel()
		case <-sctx.Done():
		}
	}()
	err := sleep(sctx, d)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && sctx.Err() == nil {
		return err
	}
	return nil
}

// Next is the wait before the next poll while the instances launched at
// booting (a zero time: not known) boot, given the quickest boot the
// watcher has timed (known: it has timed one): t.Slow while none boots;
// t.Fast while one boots and no boot was timed, or its launch time is not
// known; else from shortly before the instance may have booted (its
// launch, plus the quickest boot, less a t.Boot, by which the poll that
// timed that boot may have been late, and a second of skew between the
// cloud's launch times, often whole seconds, and this clock) every
// t.Boot. So a 20-second boot costs a few listings instead of twenty.
func (t Timings) Next(now time.Time, quickest time.Duration, known bool, booting []time.Time) time.Duration {
	interval := t.Slow
	for _, launched := range booting {
		if !known || launched.IsZero() {
			return t.Fast
		}
		wake := launched.Add(quickest - t.Boot - time.Second)
		interval = min(interval, max(wake.Sub(now), t.Boot))
	}
	return interval
}
