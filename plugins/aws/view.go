package aws

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// fetchTimeout bounds one refresh of the view (all its pages).
const fetchTimeout = 30 * time.Second

// view is the plugin's picture of the cluster's instances: a snapshot from
// one paginated DescribeInstances (by the cluster tag), shared by every
// Describe, List and WatchEvents. A caller says how old a snapshot it
// accepts; when the snapshot is older, one refresh starts and every caller
// waiting meanwhile shares it, so a thousand cells polling cost one call.
//
// The plugin's own changes overlay the snapshot: an instance Launch or
// Terminate answered for after the snapshot was taken shows as they
// answered, and a launched instance EC2 does not show yet (eventual
// consistency) shows as launched for the consistency window. A launch whose
// outcome is unknown (an error, a lost answer) makes the snapshot stale, so
// that the next caller sees EC2's truth. The view is a cache: a restarted
// plugin rebuilds it with one refresh.
type view struct {
	fetch  func(context.Context) (map[string]pluginapi.Instance, error)
	now    func() time.Time
	window time.Duration

	mu      sync.Mutex
	snap    map[string]pluginapi.Instance // nil: never fetched
	at      time.Time                     // when the fetch of snap started
	snapGen uint64                        // gen when that fetch started
	gen     uint64                        // counts launches of unknown outcome
	flight  *flight                       // the refresh under way, or nil
	overlay map[string]change
}

// change is what the plugin itself did to an instance.
type change struct {
	inst   pluginapi.Instance
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

func newView(fetch func(context.Context) (map[string]pluginapi.Instance, error), now func() time.Time, window time.Duration) *view {
	return &view{fetch: fetch, now: now, window: window, overlay: map[string]change{}}
}

// get returns the cluster's instances by ID as of a moment no earlier than
// maxAge before the call.
func (v *view) get(ctx context.Context, maxAge time.Duration) (map[string]pluginapi.Instance, error) {
	oldest := v.now().Add(-maxAge)
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

// start starts a refresh; v.mu is held.
func (v *view) start() *flight {
	f := &flight{started: v.now(), gen: v.gen, done: make(chan struct{})}
	v.flight = f
	go func() {
		// The refresh serves every waiter, so no one waiter's context
		// may cancel it.
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
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
func (v *view) merged() map[string]pluginapi.Instance {
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

// lookup returns what the view knows of one instance without refreshing.
func (v *view) lookup(id string) (pluginapi.Instance, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.overlay[id]; ok {
		return c.inst, true
	}
	inst, ok := v.snap[id]
	return inst, ok
}

// recentlyLaunched reports whether this process launched id within the
// consistency window.
func (v *view) recentlyLaunched(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.overlay[id]
	return ok && c.launch && v.now().Sub(c.at) < v.window
}

// launched records an instance Launch answered with.
func (v *view) launched(inst pluginapi.Instance) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.overlay[inst.ID] = change{inst: inst, at: v.now(), launch: true}
}

// changed records an instance's state as Terminate answered.
func (v *view) changed(inst pluginapi.Instance) {
	v.mu.Lock()
	defer v.mu.Unlock()
	prev, ok := v.overlay[inst.ID]
	v.overlay[inst.ID] = change{inst: inst, at: v.now(), launch: ok && prev.launch}
}

// uncertain says a launch may have created an instance the view does not
// know: the snapshot is stale from now on.
func (v *view) uncertain() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
}
