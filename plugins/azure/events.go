package azure

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
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
// It polls every pollSlow, every pollFast while a VM is terminating, and
// faster while one boots: every pollFast until it has seen a boot, then
// every pollBoot from shortly before the time the quickest of the last
// boots took (pluginapi/boottime), as the gce plugin does.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.config()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send}
	interval := p.pollFast
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		snap, err := cfg.view.Get(ctx, min(interval, p.snapshotAge))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			p.log.Warn("watching instances: polling failed; retrying", "error", err, "retry_in", p.pollFast)
			interval = p.pollFast
		default:
			if err := w.diff(snap); err != nil {
				return err
			}
			interval = w.next(snap)
		}
		if err := p.sleep(ctx, interval); err != nil {
			return err
		}
	}
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
// terminating (an eviction shows there), pollSlow otherwise, or less while
// a VM boots (pollFast while no boot has been seen, else until shortly
// before the VM may be running, then pollBoot).
func (w *watcher) next(snap map[string]azVM) time.Duration {
	interval := w.p.pollSlow
	boot, known := w.p.boots.Quickest()
	now := w.p.now()
	for _, vm := range snap {
		switch {
		case vm.State == pluginapi.StateTerminating:
			return w.p.pollFast
		case vm.State != pluginapi.StatePending:
			continue
		case !known || vm.LaunchedAt.IsZero():
			return w.p.pollFast
		}
		// Early enough for the poll that saw the quickest boot, which was
		// late by up to a pollBoot, and a second of clock skew between
		// Azure's timeCreated and this machine.
		wake := vm.LaunchedAt.Add(boot - w.p.pollBoot - time.Second)
		interval = min(interval, max(wake.Sub(now), w.p.pollBoot))
	}
	return interval
}
