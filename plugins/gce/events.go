package gce

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// WatchEvents polls the cluster's instances through the shared view and
// sends what changed:
//
//   - EventStateChange for every instance whose state changed since the
//     last poll (including new instances, and instances gone, as
//     terminated), never for the first poll;
//   - EventInterruption when Compute Engine preempts a Spot instance: its
//     status turns STOPPING or TERMINATED, or it disappears, without this
//     plugin having deleted it (the compute.instances.preempted operation
//     is the same news; the instance's status costs no extra call). The
//     deadline is now: Compute Engine's 30-second notice reaches only the
//     instance's metadata server;
//   - EventMaintenance for an instance whose resourceStatus.upcomingMaintenance
//     announces host maintenance, with the window's start as the deadline,
//     once per window.
//
// It polls through the view (snapshot.View.Poll, as the aws and azure
// plugins do): every pollSlow, every pollFast while an instance it did not
// delete is terminating, faster while one boots (snapshot.Timings.Next:
// every pollFast until it has timed a boot, then every pollBoot from
// shortly before the quickest of the last boots may have ended), so that
// a 20-second boot costs a few aggregatedList calls instead of twenty, and
// at once after a Launch of this plugin process.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.config()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send, sentMaintenance: map[string]bool{}}
	return cfg.view.Poll(ctx, p.timings(), p.sleep, p.log, func(snap map[string]gceInstance) (time.Duration, error) {
		if err := w.diff(snap); err != nil {
			return 0, err
		}
		return w.next(snap), nil
	})
}

// timings are the event watcher's poll intervals.
func (p *provider) timings() snapshot.Timings {
	return snapshot.Timings{Slow: p.pollSlow, Fast: p.pollFast, Boot: p.pollBoot, SnapshotAge: p.snapshotAge}
}

// watcher is one WatchEvents stream's memory of what it reported.
type watcher struct {
	p    *provider
	cfg  *config
	send func(*pluginapi.Event) error

	prev            map[string]gceInstance // nil before the first poll
	sentMaintenance map[string]bool        // instance/window start
}

// diff sends the events between the last poll and snap.
func (w *watcher) diff(snap map[string]gceInstance) error {
	first := w.prev == nil
	prev := w.prev
	w.prev = snap
	now := w.p.now()
	for _, id := range slices.Sorted(maps.Keys(snap)) {
		gi := snap[id]
		if err := w.maintenance(gi, now); err != nil {
			return err
		}
		if first {
			continue
		}
		old, seen := prev[id]
		if seen && old.State == gi.State {
			continue
		}
		if seen && old.State == pluginapi.StatePending && gi.State == pluginapi.StateRunning && gi.LaunchedAt.Before(now) {
			w.p.boots.Add(now.Sub(gi.LaunchedAt))
		}
		if err := w.send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: gi.CellID,
			State: gi.State, Reason: gi.StateReason, Time: now}); err != nil {
			return err
		}
		if gi.spot && gi.State == pluginapi.StateTerminating && (!seen || old.State != pluginapi.StateTerminating) && !w.cfg.deleting.Has(id) {
			if err := w.preempted(gi, now); err != nil {
				return err
			}
		}
	}
	if first {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		old := prev[id]
		if _, ok := snap[id]; ok || old.State == pluginapi.StateTerminated {
			continue
		}
		// Gone: deleted (by the plugin, or by Compute Engine after a
		// preemption with instanceTerminationAction DELETE).
		gone := old
		gone.State, gone.StateReason = pluginapi.StateTerminated, "instance deleted"
		if err := w.send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: old.CellID,
			State: gone.State, Reason: gone.StateReason, Time: now}); err != nil {
			return err
		}
		if old.spot && old.State != pluginapi.StateTerminating && !w.cfg.deleting.Has(id) {
			if err := w.preempted(gone, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// preempted sends the interruption of a Spot instance.
func (w *watcher) preempted(gi gceInstance, now time.Time) error {
	return w.send(&pluginapi.Event{Type: pluginapi.EventInterruption, InstanceID: gi.ID, CellID: gi.CellID,
		State: gi.State, Reason: preemptionReason, Time: now, Deadline: now})
}

// maintenance sends an EventMaintenance for an instance's announced host
// maintenance window it has not sent yet.
func (w *watcher) maintenance(gi gceInstance, now time.Time) error {
	m := gi.maintenance
	if m == nil || gi.State == pluginapi.StateTerminating || gi.State == pluginapi.StateTerminated {
		return nil
	}
	start := m.GetWindowStartTime()
	key := gi.ID + "/" + start
	if w.sentMaintenance[key] {
		return nil
	}
	w.sentMaintenance[key] = true
	deadline, err := time.Parse(time.RFC3339, start)
	if err != nil {
		deadline = now
	}
	reason := "host maintenance " + m.GetType()
	if st := m.GetMaintenanceStatus(); st != "" {
		reason += " (" + st + ")"
	}
	if start != "" {
		reason += ": window " + start + " to " + m.GetWindowEndTime()
	}
	return w.send(&pluginapi.Event{Type: pluginapi.EventMaintenance, InstanceID: gi.ID, CellID: gi.CellID,
		State: gi.State, Reason: reason, Time: now, Deadline: deadline})
}

// next returns the wait before the next poll: pollFast while an instance
// the plugin did not delete is terminating (a preemption shows there; the
// plugin's own deletions need no watching, the host has ended those
// cells), else snapshot.Timings.Next of the instances booting.
func (w *watcher) next(snap map[string]gceInstance) time.Duration {
	var booting []time.Time
	for _, gi := range snap {
		switch {
		case gi.State == pluginapi.StateTerminating && !w.cfg.deleting.Has(gi.ID):
			return w.p.pollFast
		case gi.State == pluginapi.StatePending:
			booting = append(booting, gi.LaunchedAt)
		}
	}
	boot, known := w.p.boots.Quickest()
	return w.p.timings().Next(w.p.now(), boot, known, booting)
}
