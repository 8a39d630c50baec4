package azure

import (
	"context"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
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
// plugins do): every PollSlow, every PollFast while a VM is terminating,
// faster while one boots (snapshot.Timings.Next: every PollFast until it
// has timed a boot, then every PollBoot from shortly before the quickest
// of the last boots may have ended), and at once after a Launch of this
// plugin process.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.cfg.Get()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send}
	// The state changes, VMs gone as terminated (deleted: by the plugin,
	// or by Azure after an eviction with evictionPolicy Delete), and the
	// evictions.
	changes := kit.Changes[azVM]{
		Base: p.Base, Send: send, GoneReason: "VM deleted",
		Instance: func(vm *azVM) *pluginapi.Instance { return &vm.Instance },
		Changed: func(old azVM, seen bool, vm azVM, now time.Time) error {
			if ending(vm.State) && (!seen || !ending(old.State)) && w.evicted(vm) {
				return w.interrupted(vm, now)
			}
			return nil
		},
		Gone: func(old, gone azVM, now time.Time) error {
			if !ending(old.State) && w.evicted(old) {
				return w.interrupted(gone, now)
			}
			return nil
		},
	}
	return cfg.view.Poll(ctx, p.Timings(), p.Sleep, p.Log, func(snap map[string]azVM) (time.Duration, error) {
		if err := changes.Diff(snap); err != nil {
			return 0, err
		}
		return w.next(snap), nil
	})
}

// watcher is one WatchEvents stream's view of its cluster's VMs.
type watcher struct {
	p    *provider
	cfg  *config
	send func(*pluginapi.Event) error
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

// interrupted sends the eviction of a Spot VM.
func (w *watcher) interrupted(vm azVM, now time.Time) error {
	return w.send(&pluginapi.Event{Type: pluginapi.EventInterruption, InstanceID: vm.ID, CellID: vm.CellID,
		State: vm.State, Reason: evictionReason, Time: now, Deadline: now})
}

// next returns the wait before the next poll: PollFast while a VM is
// terminating (an eviction shows there), else snapshot.Timings.Next of
// the VMs booting.
func (w *watcher) next(snap map[string]azVM) time.Duration {
	var booting []time.Time
	for _, vm := range snap {
		switch vm.State {
		case pluginapi.StateTerminating:
			return w.p.PollFast
		case pluginapi.StatePending:
			booting = append(booting, vm.LaunchedAt)
		}
	}
	return w.p.NextPoll(booting)
}
