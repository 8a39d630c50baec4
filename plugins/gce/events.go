package gce

import (
	"context"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
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
// plugins do): every PollSlow, every PollFast while an instance it did not
// delete is terminating, faster while one boots (snapshot.Timings.Next:
// every PollFast until it has timed a boot, then every PollBoot from
// shortly before the quickest of the last boots may have ended), so that
// a 20-second boot costs a few aggregatedList calls instead of twenty, and
// at once after a Launch of this plugin process.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.cfg.Get()
	if err != nil {
		return err
	}
	w := newWatcher(p, cfg, send)
	return cfg.view.Poll(ctx, p.Timings(), p.Sleep, p.Log, func(snap map[string]gceInstance) (time.Duration, error) {
		if err := w.changes.Diff(snap); err != nil {
			return 0, err
		}
		return w.next(snap), nil
	})
}

// watcher is one WatchEvents stream's memory of what it reported.
type watcher struct {
	p    *provider
	cfg  *config
	send func(*pluginapi.Event) error

	// changes sends the state changes, instances gone as terminated
	// (deleted: by the plugin, or by Compute Engine after a preemption
	// with instanceTerminationAction DELETE), each instance's maintenance
	// (every poll, the first too) and the preemptions.
	changes         kit.Changes[gceInstance]
	sentMaintenance map[string]bool // instance/window start
}

func newWatcher(p *provider, cfg *config, send func(*pluginapi.Event) error) *watcher {
	w := &watcher{p: p, cfg: cfg, send: send, sentMaintenance: map[string]bool{}}
	w.changes = kit.Changes[gceInstance]{
		Base: p.Base, Send: send, GoneReason: "instance deleted",
		Instance: func(gi *gceInstance) *pluginapi.Instance { return &gi.Instance },
		Each:     w.maintenance,
		Changed: func(old gceInstance, seen bool, gi gceInstance, now time.Time) error {
			if gi.spot && gi.State == pluginapi.StateTerminating && (!seen || old.State != pluginapi.StateTerminating) && !w.cfg.deleting.Has(gi.ID) {
				return w.preempted(gi, now)
			}
			return nil
		},
		Gone: func(old, gone gceInstance, now time.Time) error {
			if old.spot && old.State != pluginapi.StateTerminating && !w.cfg.deleting.Has(old.ID) {
				return w.preempted(gone, now)
			}
			return nil
		},
	}
	return w
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

// next returns the wait before the next poll: PollFast while an instance
// the plugin did not delete is terminating (a preemption shows there; the
// plugin's own deletions need no watching, the host has ended those
// cells), else snapshot.Timings.Next of the instances booting.
func (w *watcher) next(snap map[string]gceInstance) time.Duration {
	var booting []time.Time
	for _, gi := range snap {
		switch {
		case gi.State == pluginapi.StateTerminating && !w.cfg.deleting.Has(gi.ID):
			return w.p.PollFast
		case gi.State == pluginapi.StatePending:
			booting = append(booting, gi.LaunchedAt)
		}
	}
	return w.p.NextPoll(booting)
}
