package snapshot

import (
	"context"
	"maps"
	"sync"
	"time"
)

// FetchTimeout bounds one refresh of the view (all its pages).
const FetchTimeout = 30 * time.Second

// View is a plugin's picture of the cluster's instances, of type T by ID:
// a snapshot from one listing of the cloud, shared by every caller. A caller
// says how old a snapshot it accepts; when the snapshot is older, one
// refresh starts and every caller waiting meanwhile shares it, so a
// thousand cells polling cost one call.
//
// The plugin's own changes overlay the snapshot: an instance Launch or
// Terminate answered for after the snapshot was taken shows as they
// answered, and a launched instance the cloud does not show yet (eventual
// consistency) shows as launched for the consistency window. A launch whose
// outcome is unknown (an error, a lost answer) makes the snapshot stale
// (Uncertain), so that the next caller sees the cloud's truth. The view is
// a cache: a restarted plugin rebuilds it with one refresh.
type View[T any] struct {
	fetch  func(context.Context) (map[string]T, error)
	now    func() time.Time
	window time.Duration

	mu      sync.Mutex
	snap    map[string]T // nil: never fetched
	at      time.Time    // when the fetch of snap started
	snapGen uint64       // gen when that fetch started
	gen     uint64       // counts launches of unknown outcome
	flight  *flight      // the refresh under way, or nil
	overlay map[string]change[T]
	// launch is closed by the next Launched or Uncertain (NextLaunch);
	// nil until someone asks.
	launch chan struct{}
}

// change is what the plugin itself did to an instance.
type change[T any] struct {
	inst   T
	at     time.Time
	launch bool
}

// flight is one refresh; done closes when it ends.
type flight struct {
	started time.Time
	gen     uint64
	done    chan struct{}
	err     error
}

// New returns a view whose snapshots come from fetch (every instance of
// the cluster, by ID; it runs with its own context, bounded by
// FetchTimeout, since it serves every waiter), with now as its clock and
// window as the time a launched instance may stay invisible to fetch.
func New[T any](fetch func(context.Context) (map[string]T, error), now func() time.Time, window time.Duration) *View[T] {
	return &View[T]{fetch: fetch, now: now, window: window, overlay: map[string]change[T]{}}
}

// SetClock replaces the view's clock (tests).
func (v *View[T]) SetClock(now func() time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = now
}

// Get returns the cluster's instances by ID as of a moment no earlier than
// maxAge before the call.
func (v *View[T]) Get(ctx context.Context, maxAge time.Duration) (map[string]T, error) {
	oldest := v.clock().Add(-maxAge)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v.mu.Lock()
		if v.snap != nil && v.snapGen == v.gen && !v.at.Before(oldest) {
			out := v.merged()
			v.mu.Unlock()
			return out, nil
		}
		f := v.flight
		if f == nil {
			f = v.start()
		}
		v.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil && !f.started.Before(oldest) {
			return nil, f.err
		}
		// A fresh enough refresh succeeded (the loop returns it), or an
		// older one ended either way (the loop starts a new one).
	}
}

func (v *View[T]) clock() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now()
}

// start starts a refresh; v.mu is held.
func (v *View[T]) start() *flight {
	f := &flight{started: v.now(), gen: v.gen, done: make(chan struct{})}
	v.flight = f
	go func() {
		// The refresh serves every waiter, so no one waiter's context
		// may cancel it.
		ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
		insts, err := v.fetch(ctx)
		cancel()
		v.mu.Lock()
		if err == nil {
			v.snap, v.at, v.snapGen = insts, f.started, f.gen
		}
		f.err = err
		v.flight = nil
		v.mu.Unlock()
		close(f.done)
	}()
	return f
}

// merged returns the snapshot with the overlay applied and forgets the
// changes the snapshot has caught up with; v.mu is held.
func (v *View[T]) merged() map[string]T {
	out := maps.Clone(v.snap)
	now := v.now()
	for id, c := range v.overlay {
		_, seen := v.snap[id]
		switch {
		case c.at.After(v.at):
			out[id] = c.inst // newer than the snapshot
		case c.launch && !seen && now.Sub(c.at) < v.window:
			out[id] = c.inst // launched, not visible yet
		default:
			delete(v.overlay, id)
		}
	}
	return out
}

// Lookup returns what the view knows of one instance without refreshing.
func (v *View[T]) Lookup(id string) (T, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.overlay[id]; ok {
		return c.inst, true
	}
	inst, ok := v.snap[id]
	return inst, ok
}

// RecentlyLaunched reports whether this process launched id within the
// consistency window.
func (v *View[T]) RecentlyLaunched(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.overlay[id]
	return ok && c.launch && v.now().Sub(c.at) < v.window
}

// Launched records an instance Launch answered with, and closes
// NextLaunch's channel.
func (v *View[T]) Launched(id string, inst T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.overlay[id] = change[T]{inst: inst, at: v.now(), launch: true}
	v.launched()
}

// NextLaunch returns a channel closed at the plugin's next launch
// (Launched, or Uncertain: a launch that may have created an instance):
// an event watcher that polls slowly while nothing boots waits on it too,
// so that it looks at a new instance at once rather than at its next slow
// poll. Take it before the poll whose sleep it cuts short, so that a
// launch during the poll is not missed.
func (v *View[T]) NextLaunch() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.launch == nil {
		v.launch = make(chan struct{})
	}
	return v.launch
}

// launched closes NextLaunch's channel; v.mu is held.
func (v *View[T]) launched() {
	if v.launch != nil {
		close(v.launch)
		v.launch = nil
	}
}

// Changed records an instance's state as Terminate answered.
func (v *View[T]) Changed(id string, inst T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	prev, ok := v.overlay[id]
	v.overlay[id] = change[T]{inst: inst, at: v.now(), launch: ok && prev.launch}
}

// Uncertain says a launch may have created an instance the view does not
// know: the snapshot is stale from now on.
func (v *View[T]) Uncertain() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	v.launched()
}
