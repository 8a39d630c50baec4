package kit

import (
	"maps"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Changes is one WatchEvents stream's diff of the plugin's snapshots
// (snapshot.View.Poll), over the view's instances T: it sends the
// EventStateChange of every instance whose state changed since the last
// poll, and times the boots it sees. The cloud's own events
// (interruptions, maintenance) come from its hooks. Set its fields, then
// call Diff with each poll's snapshot.
type Changes[T any] struct {
	// Base is the plugin's: its clock, and the boot times Diff adds to.
	Base *Base
	// Send sends an event on the stream.
	Send func(*pluginapi.Event) error
	// Instance is the contract's instance of a T; nil when T is
	// pluginapi.Instance.
	Instance func(*T) *pluginapi.Instance
	// GoneReason is the reason of the EventStateChange, to terminated, of
	// an instance that was in the last poll and is in no longer (deleted),
	// unless it was terminated already. "": an instance gone is not
	// reported (a cloud that lists its ended instances for a while).
	GoneReason string

	// Each, if set, is called with every instance of every poll, the
	// first too, sorted by ID, before the instance's state change.
	Each func(cur T, now time.Time) error
	// Changed, if set, is called after the state change of an instance
	// that is new (seen false) or whose state changed.
	Changed func(old T, seen bool, cur T, now time.Time) error
	// Gone, if set, is called after the state change of an instance gone:
	// old as the last poll had it, gone as reported (terminated,
	// GoneReason).
	Gone func(old, gone T, now time.Time) error

	prev map[string]T // nil before the first poll
}

// Diff sends the events between the last poll and snap, in the order of
// the instances' IDs, the instances gone last. The first poll sends no
// state change: it is the stream's starting point. An instance seen
// pending and now running adds its boot (from its launch to now) to
// Base.Boots.
func (c *Changes[T]) Diff(snap map[string]T) error {
	first := c.prev == nil
	prev := c.prev
	c.prev = snap
	if first && c.Each == nil {
		return nil
	}
	now := c.Base.Now()
	for _, id := range slices.Sorted(maps.Keys(snap)) {
		cur := snap[id]
		if c.Each != nil {
			if err := c.Each(cur, now); err != nil {
				return err
			}
		}
		if first {
			continue
		}
		old, seen := prev[id]
		in, was := c.instance(&cur), c.instance(&old)
		if seen && was.State == in.State {
			continue
		}
		if seen && was.State == pluginapi.StatePending && in.State == pluginapi.StateRunning && in.LaunchedAt.Before(now) {
			c.Base.Boots.Add(now.Sub(in.LaunchedAt))
		}
		if err := c.Send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: in.CellID,
			State: in.State, Reason: in.StateReason, Time: now}); err != nil {
			return err
		}
		if c.Changed != nil {
			if err := c.Changed(old, seen, cur, now); err != nil {
				return err
			}
		}
	}
	if first || c.GoneReason == "" {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		old := prev[id]
		was := c.instance(&old)
		if _, ok := snap[id]; ok || was.State == pluginapi.StateTerminated {
			continue
		}
		gone := old
		g := c.instance(&gone)
		g.State, g.StateReason = pluginapi.StateTerminated, c.GoneReason
		if err := c.Send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: was.CellID,
			State: g.State, Reason: g.StateReason, Time: now}); err != nil {
			return err
		}
		if c.Gone != nil {
			if err := c.Gone(old, gone, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// instance is the contract's instance of t.
func (c *Changes[T]) instance(t *T) *pluginapi.Instance {
	if c.Instance == nil {
		return any(t).(*pluginapi.Instance)
	}
	return c.Instance(t)
}
