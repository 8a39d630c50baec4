package azure

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// WatchEvents polls the cluster's VMs through the shared view and sends
// what changed:
//
//   - EventStateChange for every VM whose state changed since the last
//     poll (including new VMs, and VMs gone, as terminated), never for the
//     first poll;
//   - EventInterruption when Azure evicts a Spot VM: it turns Deleting (or
//     stopped), or disappears, without this plugin having deleted it
//     (evictionPolicy Delete; ARM shows no eviction notice of its own:
//     the 30-second Preempt scheduled event reaches only the VM's
//     metadata service). The deadline is now.
//
// ARM shows no scheduled maintenance of a VM either (Scheduled Events are
// the VM's IMDS only), so the plugin sends no EventMaintenance.
//
// It polls through the view (snapshot.View.Poll, as the aws and gce
// plugins do): every pollSlow, every pollFast while a VM is terminating,
// faster while one boots (snapshot.Timings.Next: every pollFast until it
// has timed a boot, then every pollBoot from shortly before the quickest
// of the last boots may have ended), and at once after a Launch of this
// plugin process.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.config()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send}
	return cfg.view.Poll(ctx, p.timings(), p.sleep, p.log, func(snap map[string]azVM) (time.Duration, error) {
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

	prev map[string]azVM // nil before the first poll
}

// evicted reports whether a Spot VM's end is an eviction: it was not
// deleted by this plugin, nor a launch that failed.
func (w *watcher) evicted(vm azVM) bool {
	return vm.spot && vm.failure == "" && !w.cfg.deleting.Has(vm.ID)
}

// ending reports whether a state is the end of a VM.
func ending(s pluginapi.InstanceState) bool {
	return s == pluginapi.StateTerminating || s == pluginapi.StateTerminated
}

// diff sends the events between the last poll and snap.
func (w *watcher) diff(snap map[string]azVM) error {
	first := w.prev == nil
	prev := w.prev
	w.prev = snap
	if first {
		return nil
	}
	now := w.p.now()
	for _, id := range slices.Sorted(maps.Keys(snap)) {
		vm := snap[id]
		old, seen := prev[id]
		if seen && old.State == vm.State {
			continue
		}
		if seen && old.State == pluginapi.StatePending && vm.State == pluginapi.StateRunning && vm.LaunchedAt.Before(now) {
			w.p.boots.Add(now.Sub(vm.LaunchedAt))
		}
		if err := w.send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: vm.CellID,
			State: vm.State, Reason: vm.StateReason, Time: now}); err != nil {
			return err
		}
		if ending(vm.State) && (!seen || !ending(old.State)) && w.evicted(vm) {
			if err := w.interrupted(vm, now); err != nil {
				return err
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		old := prev[id]
		if _, ok := snap[id]; ok || old.State == pluginapi.StateTerminated {
			continue
		}
		// Gone: deleted (by the plugin, or by Azure after an eviction with
		// evictionPolicy Delete).
		gone := old
		gone.State, gone.StateReason = pluginapi.StateTerminated, "VM deleted"
		if err := w.send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: old.CellID,
			State: gone.State, Reason: gone.StateReason, Time: now}); err != nil {
			return err
		}
		if !ending(old.State) && w.evicted(old) {
			if err := w.interrupted(gone, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// interrupted sends the eviction of a Spot VM.
func (w *watcher) interrupted(vm azVM, now time.Time) error {
	return w.send(&pluginapi.Event{Type: pluginapi.EventInterruption, InstanceID: vm.ID, CellID: vm.CellID,
		State: vm.State, Reason: evictionReason, Time: now, Deadline: now})
}

// next returns the wait before the next poll: pollFast while a VM is
// terminating (an eviction shows there), else snapshot.Timings.Next of
// the VMs booting.
func (w *watcher) next(snap map[string]azVM) time.Duration {
	var booting []time.Time
	for _, vm := range snap {
		switch vm.State {
		case pluginapi.StateTerminating:
			return w.p.pollFast
		case pluginapi.StatePending:
			booting = append(booting, vm.LaunchedAt)
		}
	}
	boot, known := w.p.boots.Quickest()
	return w.p.timings().Next(w.p.now(), boot, known, booting)
}
