package aws

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
)

// maintenanceCodes are the scheduled events that stop, reboot or retire an
// instance (DescribeInstanceStatus, events[].code).
var maintenanceCodes = []string{
	string(types.EventCodeInstanceReboot), string(types.EventCodeSystemReboot),
	string(types.EventCodeSystemMaintenance), string(types.EventCodeInstanceRetirement),
	string(types.EventCodeInstanceStop),
}

// WatchEvents polls the cluster's instances through the shared view and
// sends what changed:
//
//   - EventStateChange for every instance whose state changed since the
//     last poll (including new instances), never for the first poll;
//   - EventInterruption when EC2 reclaims a spot instance (state reason
//     Server.SpotInstanceTermination): EC2's API shows this once the
//     instance is shutting down, so the deadline is now; the two-minute
//     warning exists only in instance metadata and EventBridge, which a
//     plugin polling the API cannot see;
//   - EventMaintenance for a scheduled event that will reboot, stop or
//     retire an instance (DescribeInstanceStatus, once a minute while the
//     cluster has instances), with the event's start as the deadline.
//
// EC2's API has no rebalance recommendation (instance metadata and
// EventBridge only), so EventRebalance is never sent.
//
// It polls every pollSlow, and faster while an instance boots: every
// pollFast until it has seen a boot, then every pollBoot from shortly
// before the time the quickest of the last boots took (pluginapi/boottime), so
// that a 20-second boot costs a few calls instead of twenty and is seen
// sooner. A Launch of this plugin process ends the wait at once (the
// view's NextLaunch): the next poll shows the new instance (the view's
// overlay has it pending when EC2 does not show it yet), and from there
// the polls are fast while it boots; without that, an instance launched
// while the watcher knew of none booting would wait up to pollSlow to be
// seen running, however quick its boot. A poll within snapshotAge of a
// Describe costs no call, so a burst of launches costs at most one
// DescribeInstances per snapshotAge. Failed polls are logged and retried;
// the stream ends only with ctx or a failed send.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.config()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send, sentMaintenance: map[string]bool{}}
	interval := p.pollFast
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		launch := cfg.view.NextLaunch() // before the poll: a launch during it ends the sleep after it
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
			if err := w.maintenance(ctx, snap); err != nil {
				return err
			}
			interval = w.next(snap)
		}
		if err := p.sleepUntilLaunch(ctx, interval, launch); err != nil {
			return err
		}
	}
}

// sleepUntilLaunch sleeps for d (p.sleep), or until launch closes: it
// returns nil either way, and ctx's error when ctx ended.
func (p *provider) sleepUntilLaunch(ctx context.Context, d time.Duration, launch <-chan struct{}) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-launch:
			cancel()
		case <-sctx.Done():
		}
	}()
	err := p.sleep(sctx, d)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && sctx.Err() == nil {
		return err
	}
	return nil
}

// watcher is one WatchEvents stream's memory of what it reported.
type watcher struct {
	p    *provider
	cfg  *config
	send func(*pluginapi.Event) error

	prev            map[string]pluginapi.Instance // nil before the first poll
	lastStatus      time.Time
	sentMaintenance map[string]bool // instance/event ID
}

// diff sends the events between the last poll and snap.
func (w *watcher) diff(snap map[string]pluginapi.Instance) error {
	first := w.prev == nil
	prev := w.prev
	w.prev = snap
	if first {
		return nil
	}
	now := w.p.now()
	for _, id := range sortedKeys(snap) {
		inst := snap[id]
		old, seen := prev[id]
		if seen && old.State == inst.State {
			continue
		}
		if seen && old.State == pluginapi.StatePending && inst.State == pluginapi.StateRunning && inst.LaunchedAt.Before(now) {
			w.p.boots.Add(now.Sub(inst.LaunchedAt))
		}
		if err := w.send(&pluginapi.Event{Type: pluginapi.EventStateChange, InstanceID: id, CellID: inst.CellID,
			State: inst.State, Reason: inst.StateReason, Time: now}); err != nil {
			return err
		}
		if spotReclaimed(inst) && (!seen || !spotReclaimed(old)) {
			if err := w.send(&pluginapi.Event{Type: pluginapi.EventInterruption, InstanceID: id, CellID: inst.CellID,
				State: inst.State, Reason: "spot interruption: EC2 is reclaiming the instance", Time: now, Deadline: now}); err != nil {
				return err
			}
		}
	}
	return nil
}

// next returns the wait before the next poll: pollSlow, or less while an
// instance boots (pollFast while no boot has been seen, else until shortly
// before the instance may be running, then pollBoot). An instance shutting
// down is not waited on: the host ended it, or the change was seen
// already.
func (w *watcher) next(snap map[string]pluginapi.Instance) time.Duration {
	interval := w.p.pollSlow
	boot, known := w.p.boots.Quickest()
	now := w.p.now()
	for _, inst := range snap {
		if inst.State != pluginapi.StatePending {
			continue
		}
		if !known || inst.LaunchedAt.IsZero() {
			return w.p.pollFast
		}
		// EC2 gives launch times to the second: start polling early
		// enough for both that and the poll that saw the quickest boot.
		wake := inst.LaunchedAt.Add(boot - w.p.pollBoot - time.Second)
		interval = min(interval, max(wake.Sub(now), w.p.pollBoot))
	}
	return interval
}

// spotReclaimed reports whether EC2 is taking a spot instance back.
func spotReclaimed(inst pluginapi.Instance) bool {
	return (inst.State == pluginapi.StateTerminating || inst.State == pluginapi.StateTerminated) &&
		strings.Contains(inst.StateReason, reasonSpotTermination)
}

// maintenance sends an EventMaintenance for each scheduled event of the
// cluster's running instances it has not sent yet, at most once per
// statusEvery.
func (w *watcher) maintenance(ctx context.Context, snap map[string]pluginapi.Instance) error {
	now := w.p.now()
	if !w.lastStatus.IsZero() && now.Sub(w.lastStatus) < w.p.statusEvery {
		return nil
	}
	running := false
	for _, inst := range snap {
		running = running || inst.State == pluginapi.StateRunning
	}
	if !running {
		return nil
	}
	w.lastStatus = now
	in := &ec2.DescribeInstanceStatusInput{
		Filters:    []types.Filter{{Name: aws.String("event.code"), Values: maintenanceCodes}},
		MaxResults: aws.Int32(1000),
	}
	for pages := ec2.NewDescribeInstanceStatusPaginator(w.cfg.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.p.log.Warn("watching instances: looking for scheduled events failed", "error", mapError("DescribeInstanceStatus", err))
			return nil
		}
		for _, st := range page.InstanceStatuses {
			inst, ours := snap[aws.ToString(st.InstanceId)]
			if !ours {
				continue
			}
			for _, ev := range st.Events {
				desc := aws.ToString(ev.Description)
				if !slices.Contains(maintenanceCodes, string(ev.Code)) || strings.HasPrefix(desc, "[Completed]") || strings.HasPrefix(desc, "[Canceled]") {
					continue
				}
				key := inst.ID + "/" + cmp.Or(aws.ToString(ev.InstanceEventId), string(ev.Code)+aws.ToTime(ev.NotBefore).String())
				if w.sentMaintenance[key] {
					continue
				}
				w.sentMaintenance[key] = true
				if err := w.send(&pluginapi.Event{Type: pluginapi.EventMaintenance, InstanceID: inst.ID, CellID: inst.CellID,
					State: inst.State, Reason: string(ev.Code) + ": " + desc, Time: now, Deadline: aws.ToTime(ev.NotBefore)}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
