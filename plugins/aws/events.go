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
	"github.com/kipcell/kip/pluginapi/kit"
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
// It polls through the view (snapshot.View.Poll): every PollSlow, every
// PollFast until it has timed a boot while an instance boots, then every
// PollBoot from shortly before the quickest of the last boots may have
// ended (snapshot.Timings.Next, pluginapi/boottime), and at once after a
// Launch of this plugin process, whose instance the view's overlay shows
// pending when EC2 does not yet. A poll within SnapshotAge of a Describe
// costs no call, so a burst of launches costs at most one
// DescribeInstances per SnapshotAge. Failed polls are logged and retried;
// the stream ends only with ctx or a failed send.
func (p *provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cfg, err := p.cfg.Get()
	if err != nil {
		return err
	}
	w := &watcher{p: p, cfg: cfg, send: send, sentMaintenance: map[string]bool{}}
	w.changes = kit.Changes[pluginapi.Instance]{Base: p.Base, Send: send, Changed: w.interrupted}
	return cfg.view.Poll(ctx, p.Timings(), p.Sleep, p.Log, func(snap map[string]pluginapi.Instance) (time.Duration, error) {
		if err := w.changes.Diff(snap); err != nil {
			return 0, err
		}
		if err := w.maintenance(ctx, snap); err != nil {
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

	changes         kit.Changes[pluginapi.Instance] // the state changes
	lastStatus      time.Time
	sentMaintenance map[string]bool // instance/event ID
}

// interrupted sends the interruption of a spot instance EC2 is reclaiming,
// after its state change.
func (w *watcher) interrupted(old pluginapi.Instance, seen bool, inst pluginapi.Instance, now time.Time) error {
	if !spotReclaimed(inst) || (seen && spotReclaimed(old)) {
		return nil
	}
	return w.send(&pluginapi.Event{Type: pluginapi.EventInterruption, InstanceID: inst.ID, CellID: inst.CellID,
		State: inst.State, Reason: "spot interruption: EC2 is reclaiming the instance", Time: now, Deadline: now})
}

// next returns the wait before the next poll (snapshot.Timings.Next)
// while instances boot. An instance shutting down is not waited on: the
// host ended it, or the change was seen already.
func (w *watcher) next(snap map[string]pluginapi.Instance) time.Duration {
	var booting []time.Time
	for _, inst := range snap {
		if inst.State == pluginapi.StatePending {
			booting = append(booting, inst.LaunchedAt)
		}
	}
	return w.p.NextPoll(booting)
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
	now := w.p.Now()
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
			w.p.Log.Warn("watching instances: looking for scheduled events failed", "error", mapError("DescribeInstanceStatus", err))
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
