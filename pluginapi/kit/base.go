package kit

import (
	"context"
	"log/slog"
	"time"

	"github.com/kipcell/kip/pluginapi/boottime"
	"github.com/kipcell/kip/pluginapi/ratelimit"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// The default timings of a cloud plugin (Base).
const (
	// DefaultSnapshotAge is how old a snapshot of the cluster's instances
	// Describe and List accept: many cells polling share one listing of
	// the cloud per second.
	DefaultSnapshotAge = time.Second
	// DefaultPollFast and DefaultPollSlow are WatchEvents' polling
	// intervals while some instance is changing state, and while none is.
	DefaultPollFast = time.Second
	DefaultPollSlow = 10 * time.Second
	// DefaultPollBoot is the interval around the moment a booting instance
	// may be running, once WatchEvents has timed a boot
	// (pluginapi/boottime).
	DefaultPollBoot = time.Second / 2
	// DefaultConsistencyWindow is how long after a launch the cloud's
	// listing may not show the new instance yet: Describe reports it as
	// launched for that long (snapshot.New's window).
	DefaultConsistencyWindow = 30 * time.Second
)

// Base is the part of a cloud plugin's provider every cloud shares. Each
// timing is a field so that tests can shorten it; Now and Sleep are seams
// for tests. A provider embeds *Base, made by NewBase, and adds its
// cloud's own seams and timings.
type Base struct {
	// Log is the plugin's log (never nil after NewBase).
	Log *slog.Logger
	// Now is the plugin's clock.
	Now func() time.Time
	// Sleep sleeps d, or returns ctx's error when ctx ends first
	// (ratelimit.Sleep).
	Sleep func(ctx context.Context, d time.Duration) error

	// SnapshotAge is the oldest snapshot Describe, List and a poll of
	// WatchEvents accept.
	SnapshotAge time.Duration
	// PollFast, PollSlow and PollBoot are WatchEvents' intervals
	// (snapshot.Timings).
	PollFast time.Duration
	PollSlow time.Duration
	PollBoot time.Duration
	// ConsistencyWindow is how long a launched instance the cloud does
	// not list yet is reported as launched.
	ConsistencyWindow time.Duration

	// Boots are the last boot times WatchEvents saw; they outlive a
	// stream, so a re-subscribed host does not cost a relearning.
	Boots boottime.Times
}

// NewBase returns a Base with the default timings, the real clock and
// sleep, and log (a discarding log when nil).
func NewBase(log *slog.Logger) *Base {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Base{
		Log:               log,
		Now:               time.Now,
		Sleep:             ratelimit.Sleep,
		SnapshotAge:       DefaultSnapshotAge,
		PollFast:          DefaultPollFast,
		PollSlow:          DefaultPollSlow,
		PollBoot:          DefaultPollBoot,
		ConsistencyWindow: DefaultConsistencyWindow,
	}
}

// Timings are the event watcher's poll intervals (snapshot.View.Poll).
func (b *Base) Timings() snapshot.Timings {
	return snapshot.Timings{Slow: b.PollSlow, Fast: b.PollFast, Boot: b.PollBoot, SnapshotAge: b.SnapshotAge}
}

// NextPoll is the wait before the event watcher's next poll while the
// instances launched at booting boot (snapshot.Timings.Next, with the
// quickest of the boots remembered).
func (b *Base) NextPoll(booting []time.Time) time.Duration {
	boot, known := b.Boots.Quickest()
	return b.Timings().Next(b.Now(), boot, known, booting)
}
