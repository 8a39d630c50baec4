package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kipcell/kip/pluginapi"
)

// Terminate ends an instance of the cluster with TerminateInstances, which
// also deletes its root volume (DeleteOnTermination). Terminating an
// instance that is already terminating or terminated succeeds; one EC2 no
// longer shows, or never did, is NotFound. The plugin refuses an instance
// that is not tagged with its cluster: a host bug must not end a stranger's
// machine (the IAM policy also limits TerminateInstances to tagged
// instances).
func (p *provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	inst, known := cfg.view.Lookup(req.ID)
	if !known {
		found, err := cfg.describe(ctx, []types.Filter{{Name: aws.String("instance-id"), Values: []string{req.ID}}})
		if err != nil {
			return nil, fmt.Errorf("terminating instance %s: %w", req.ID, err)
		}
		if len(found) == 0 {
			return nil, pluginapi.NewNotFound("instance %s does not exist", req.ID)
		}
		inst = found[0]
		if c := inst.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
			return nil, fmt.Errorf("terminating instance %s: it is tagged %s=%q, not this cluster's %q; refusing", req.ID, pluginapi.TagCluster, c, cfg.clusterID)
		}
	}
	out, err := p.terminate(ctx, cfg, req.ID)
	if err != nil {
		return nil, fmt.Errorf("terminating instance %s: %w", req.ID, err)
	}
	for _, ch := range out.TerminatingInstances {
		if aws.ToString(ch.InstanceId) == req.ID && ch.CurrentState != nil {
			inst.State = stateFromEC2(ch.CurrentState.Name)
		}
	}
	if inst.ID == "" {
		inst.ID = req.ID
	}
	if inst.CellID != "" {
		cfg.view.Changed(inst.ID, inst)
	}
	p.Log.Info("instance terminating", "instance", req.ID, "cell", inst.CellID, "state", inst.State)
	return &pluginapi.TerminateResponse{Instance: inst}, nil
}

// terminate calls TerminateInstances, retrying InvalidInstanceID.NotFound
// for an instance this process launched moments ago (EC2 is eventually
// consistent) until the consistency window closes.
func (p *provider) terminate(ctx context.Context, cfg *config, id string) (*ec2.TerminateInstancesOutput, error) {
	delay := 250 * time.Millisecond
	for {
		out, err := cfg.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		if errorCode(err) != codeInstanceNotFound || !cfg.view.RecentlyLaunched(id) {
			return out, mapError("TerminateInstances", err)
		}
		if err := p.Sleep(ctx, delay); err != nil {
			return nil, err
		}
		delay = min(2*delay, 2*time.Second)
	}
}
