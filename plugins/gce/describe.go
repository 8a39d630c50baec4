package gce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// gceInstance is an instance as the plugin's view keeps it: the contract's
// instance, and what WatchEvents needs beside it.
type gceInstance struct {
	pluginapi.Instance
	spot        bool
	maintenance *computepb.UpcomingMaintenance
}

// Describe returns the named instances that exist. Instances of the
// cluster come from the shared snapshot (at most SnapshotAge old, refreshed
// once for all the cells asking); others, which the host rarely asks for,
// from instances.get. An ID that is not zone/name names nothing. An
// instance without the cell label is not a cell and is left out.
func (p *provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.Describe(ctx, cfg.view, p.SnapshotAge, req.IDs, cfg.reported, kit.LookupEach(cfg.reported, func(ctx context.Context, id string) (gceInstance, bool, error) {
		zone, name, ok := parseID(id)
		if !ok {
			return gceInstance{}, false, nil
		}
		got, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: zone, Instance: name})
		if isNotFound(err) {
			return gceInstance{}, false, nil
		}
		if err != nil {
			return gceInstance{}, false, mapError("instances.get", err)
		}
		return instanceFromGCE(got), true, nil
	}))
}

// List returns the cluster's instances from the shared snapshot, at most
// SnapshotAge old, and never older than a Launch whose outcome was not seen.
func (p *provider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.List(ctx, cfg.view, p.SnapshotAge, cfg.reported)
}

// preemptionReason is why a Spot instance stops that this plugin did not
// delete: Compute Engine is preempting it. Compute Engine puts no reason
// on the instance itself (the compute.instances.preempted operation is
// the same news, for another call).
const preemptionReason = "spot preemption: Compute Engine is reclaiming the instance"

// reported is an instance as Describe and List return it: a Spot instance
// that is terminating though this plugin did not delete it says it is
// preempted, as WatchEvents infers it, so that the host that finds the
// cell gone before the interruption event arrives still tells why.
func (cfg *config) reported(gi gceInstance) pluginapi.Instance {
	in := gi.Instance
	if gi.spot && in.State == pluginapi.StateTerminating && !cfg.deleting.Has(in.ID) {
		in.StateReason = preemptionReason + " (" + in.StateReason + ")"
	}
	return in
}

// aggregatedPage is how many instances one aggregatedList page holds
// (Compute Engine's maximum).
const aggregatedPage = 500

// fetchCluster returns the view's source: every instance labelled with the
// cluster, in every zone, in any state, from one paginated
// instances.aggregatedList filtered by the cluster label. An instance whose
// exact tags (kip-tags) name another cluster (an encoded label collision)
// is left out, as is one without the cell label.
func (p *provider) fetchCluster(cfg *config) func(context.Context) (map[string]gceInstance, error) {
	return func(ctx context.Context) (map[string]gceInstance, error) {
		it := cfg.clients.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{
			Project:    cfg.project,
			Filter:     proto.String(fmt.Sprintf("labels.%s = %q", labelCluster, cfg.clusterLabel)),
			MaxResults: proto.Uint32(aggregatedPage),
		})
		out := map[string]gceInstance{}
		for {
			pair, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				return nil, mapError("instances.aggregatedList", err)
			}
			for _, in := range scoped(pair) {
				gi := instanceFromGCE(in)
				if gi.CellID == "" || gi.Tags[pluginapi.TagCluster] != cfg.clusterID {
					continue
				}
				out[gi.ID] = gi
			}
		}
		return out, nil
	}
}

// scoped returns a zone's instances of an aggregatedList page.
func scoped(pair compute.InstancesScopedListPair) []*computepb.Instance {
	if pair.Value == nil {
		return nil
	}
	return pair.Value.GetInstances()
}

// instanceFromGCE converts a Compute Engine instance. Its states map to
// the contract's: PROVISIONING, STAGING and REPAIRING are pending;
// STOPPING, SUSPENDING, SUSPENDED and TERMINATED (Compute Engine's
// stopped) are terminating, since a stopped cell's pod is gone and the
// host terminates it (deleting it). A deleted instance is absent.
func instanceFromGCE(in *computepb.Instance) gceInstance {
	var meta string
	for _, it := range in.GetMetadata().GetItems() {
		if it.GetKey() == metadataTags {
			meta = it.GetValue()
		}
	}
	tags := decodeTags(meta, in.GetLabels())
	zone := last(in.GetZone())
	gi := gceInstance{
		Instance: pluginapi.Instance{
			ID:           instanceID(zone, in.GetName()),
			InstanceType: last(in.GetMachineType()),
			Zone:         zone,
			CapacityType: pluginapi.CapacityOnDemand,
			Tags:         tags,
			State:        stateFromGCE(in.GetStatus()),
		},
		spot:        in.GetScheduling().GetProvisioningModel() == "SPOT" || in.GetScheduling().GetPreemptible(),
		maintenance: in.GetResourceStatus().GetUpcomingMaintenance(),
	}
	if _, ok := in.GetLabels()[labelCell]; ok {
		gi.CellID = in.GetName()
	}
	if gi.spot {
		gi.CapacityType = pluginapi.CapacitySpot
	}
	if t, err := time.Parse(time.RFC3339, in.GetCreationTimestamp()); err == nil {
		gi.LaunchedAt = t
	}
	switch st := in.GetStatus(); st {
	case "STOPPING", "SUSPENDING", "SUSPENDED", "TERMINATED":
		gi.StateReason = "instance " + st
		if m := in.GetStatusMessage(); m != "" {
			gi.StateReason += ": " + m
		}
	default:
		gi.StateReason = in.GetStatusMessage()
	}
	if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
		if ip := nics[0].GetNetworkIP(); ip != "" {
			gi.Addresses = append(gi.Addresses, pluginapi.Address{Type: pluginapi.AddressPrivate, Address: ip})
		}
		for _, ac := range nics[0].GetAccessConfigs() {
			if ip := ac.GetNatIP(); ip != "" {
				gi.Addresses = append(gi.Addresses, pluginapi.Address{Type: pluginapi.AddressPublic, Address: ip})
				break
			}
		}
		if ip := podAddress(nics[0]); ip != "" {
			gi.Addresses = append(gi.Addresses, pluginapi.Address{Type: pluginapi.AddressPod, Address: ip})
		}
	}
	return gi
}

// podAddress is the pod's own address: nic0's first alias IP range of one
// address (a.b.c.d/32), which Launch asks for. An instance launched
// without one (by an earlier version) has none, and its pod shares the
// instance's network.
func podAddress(nic *computepb.NetworkInterface) string {
	for _, r := range nic.GetAliasIpRanges() {
		if p, err := netip.ParsePrefix(r.GetIpCidrRange()); err == nil && p.Addr().Is4() && p.Bits() == 32 {
			return p.Addr().String()
		}
	}
	return ""
}

// stateFromGCE maps a Compute Engine instance status.
func stateFromGCE(status string) pluginapi.InstanceState {
	switch status {
	case "PROVISIONING", "STAGING", "REPAIRING":
		return pluginapi.StatePending
	case "RUNNING":
		return pluginapi.StateRunning
	case "STOPPING", "SUSPENDING", "SUSPENDED", "TERMINATED":
		return pluginapi.StateTerminating
	}
	return pluginapi.StateUnknown
}
