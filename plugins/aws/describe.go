package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// describeBatch is how many instance IDs one DescribeInstances call names
// (EC2 takes at most 200 values per filter).
const describeBatch = 200

// Describe returns the named instances that exist. Instances of the
// cluster come from the shared snapshot (at most SnapshotAge old, refreshed
// once for all the cells asking); others, which the host rarely asks for,
// from DescribeInstances by ID. An instance without a cell tag is not a
// cell and is left out.
func (p *provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.Describe(ctx, cfg.view, p.SnapshotAge, req.IDs, same, func(ctx context.Context, missing []string) ([]pluginapi.Instance, error) {
		var out []pluginapi.Instance
		for batch := range slices.Chunk(missing, describeBatch) {
			found, err := cfg.describe(ctx, []types.Filter{{Name: aws.String("instance-id"), Values: batch}})
			if err != nil {
				return nil, fmt.Errorf("describing instances: %w", err)
			}
			out = append(out, cells(found)...)
		}
		return out, nil
	})
}

// List returns the cluster's instances from the shared snapshot, at most
// SnapshotAge old, and never older than a Launch whose outcome was not seen.
func (p *provider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.List(ctx, cfg.view, p.SnapshotAge, same)
}

// same reports an instance of the view as it is.
func same(inst pluginapi.Instance) pluginapi.Instance { return inst }

// fetchCluster returns the view's source: every instance tagged with the
// cluster, in any state, through paginated DescribeInstances calls.
func (p *provider) fetchCluster(cfg *config) func(context.Context) (map[string]pluginapi.Instance, error) {
	return func(ctx context.Context) (map[string]pluginapi.Instance, error) {
		insts, err := cfg.describe(ctx, []types.Filter{{Name: aws.String("tag:" + pluginapi.TagCluster), Values: []string{cfg.clusterID}}})
		if err != nil {
			return nil, err
		}
		out := make(map[string]pluginapi.Instance, len(insts))
		for _, inst := range cells(insts) {
			out[inst.ID] = inst
		}
		if n := len(insts) - len(out); n > 0 {
			p.Log.Debug("instances tagged with the cluster but no cell left out", "count", n)
		}
		return out, nil
	}
}

// describe returns every instance matching filters, page by page.
func (cfg *config) describe(ctx context.Context, filters []types.Filter) ([]pluginapi.Instance, error) {
	var out []pluginapi.Instance
	in := &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)}
	for pages := ec2.NewDescribeInstancesPaginator(cfg.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, mapError("DescribeInstances", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, instanceFromEC2(i))
			}
		}
	}
	return out, nil
}

// cells keeps the instances that are cells (they carry a cell tag).
func cells(insts []pluginapi.Instance) []pluginapi.Instance {
	return slices.DeleteFunc(insts, func(i pluginapi.Instance) bool { return i.CellID == "" })
}

// Spot interruption as EC2 reports it in an instance's state reason.
const reasonSpotTermination = "Server.SpotInstanceTermination"

// instanceFromEC2 converts an EC2 instance. EC2's states map to the
// contract's: shutting-down is terminating, and stopping and stopped are
// too, since a stopped cell's pod is gone (the host terminates it).
func instanceFromEC2(i types.Instance) pluginapi.Instance {
	tags := make(map[string]string, len(i.Tags))
	for _, t := range i.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	inst := pluginapi.Instance{
		ID:           aws.ToString(i.InstanceId),
		CellID:       tags[pluginapi.TagCell],
		InstanceType: string(i.InstanceType),
		CapacityType: pluginapi.CapacityOnDemand,
		Tags:         tags,
		LaunchedAt:   aws.ToTime(i.LaunchTime),
	}
	if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		inst.CapacityType = pluginapi.CapacitySpot
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	var name types.InstanceStateName
	if i.State != nil {
		name = i.State.Name
	}
	inst.State = stateFromEC2(name)
	if r := i.StateReason; r != nil {
		switch code := aws.ToString(r.Code); {
		case code == reasonSpotTermination:
			inst.StateReason = "spot interruption (" + code + ")"
		case aws.ToString(r.Message) != "":
			inst.StateReason = aws.ToString(r.Message)
		default:
			inst.StateReason = code
		}
	}
	if name == types.InstanceStateNameStopping || name == types.InstanceStateNameStopped {
		reason := "instance " + string(name)
		if inst.StateReason != "" {
			reason += ": " + inst.StateReason
		}
		inst.StateReason = reason
	}
	if ip := aws.ToString(i.PrivateIpAddress); ip != "" {
		inst.Addresses = append(inst.Addresses, pluginapi.Address{Type: pluginapi.AddressPrivate, Address: ip})
	}
	if ip := aws.ToString(i.PublicIpAddress); ip != "" {
		inst.Addresses = append(inst.Addresses, pluginapi.Address{Type: pluginapi.AddressPublic, Address: ip})
	}
	if ip := podAddress(i); ip != "" {
		inst.Addresses = append(inst.Addresses, pluginapi.Address{Type: pluginapi.AddressPod, Address: ip})
	}
	return inst
}

// podAddress is the pod's own address: the first secondary private
// address of the primary network interface (device index 0), which
// Launch asks for. An instance launched without one (by an earlier
// version) has none, and its pod shares the instance's network.
func podAddress(i types.Instance) string {
	for _, ni := range i.NetworkInterfaces {
		if ni.Attachment == nil || aws.ToInt32(ni.Attachment.DeviceIndex) != 0 {
			continue
		}
		for _, a := range ni.PrivateIpAddresses {
			if !aws.ToBool(a.Primary) && aws.ToString(a.PrivateIpAddress) != "" {
				return aws.ToString(a.PrivateIpAddress)
			}
		}
	}
	return ""
}

// stateFromEC2 maps an EC2 instance state.
func stateFromEC2(name types.InstanceStateName) pluginapi.InstanceState {
	switch name {
	case types.InstanceStateNamePending:
		return pluginapi.StatePending
	case types.InstanceStateNameRunning:
		return pluginapi.StateRunning
	case types.InstanceStateNameShuttingDown, types.InstanceStateNameStopping, types.InstanceStateNameStopped:
		return pluginapi.StateTerminating
	case types.InstanceStateNameTerminated:
		return pluginapi.StateTerminated
	}
	return pluginapi.StateUnknown
}
