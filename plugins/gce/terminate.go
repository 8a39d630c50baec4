package gce

import (
	"context"
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
)

// Terminate ends an instance of the cluster with instances.delete, which
// also deletes its boot disk (autoDelete), and returns once Compute Engine
// has accepted the deletion: the instance is then terminating. An instance
// Compute Engine does not know (never did, or deleted already) is
// NotFound, which the host takes as done; a second Terminate of an
// instance being deleted succeeds (its requestId is the first's). The
// plugin refuses an instance that is not labelled with its cluster: a host
// bug must not end a stranger's machine.
func (p *provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	zone, name, ok := parseID(req.ID)
	if !ok {
		return nil, pluginapi.NewNotFound("instance %q is not an instance ID of this plugin (zone/name)", req.ID)
	}
	gi, known := cfg.view.Lookup(req.ID)
	if !known {
		got, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: zone, Instance: name})
		if err != nil {
			return nil, fmt.Errorf("terminating instance %s: %w", req.ID, mapError("instances.get", err))
		}
		gi = instanceFromGCE(got)
		if c := gi.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
			return nil, fmt.Errorf("terminating instance %s: it is labelled for cluster %q, not this cluster's %q; refusing", req.ID, c, cfg.clusterID)
		}
	}
	cfg.deleting.Add(req.ID)
	op, err := cfg.clients.instances.Delete(ctx, &computepb.DeleteInstanceRequest{
		Project: cfg.project, Zone: zone, Instance: name,
		RequestId: proto.String(requestID("instances.delete", cfg.project, zone, name)),
	})
	if err == nil {
		err = opError("instances.delete", op.Proto())
	}
	if err != nil {
		return nil, fmt.Errorf("terminating instance %s: %w", req.ID, mapError("instances.delete", err))
	}
	if gi.State != pluginapi.StateTerminated {
		gi.State = pluginapi.StateTerminating
	}
	if gi.ID == "" {
		gi.ID = req.ID
	}
	if gi.CellID != "" {
		cfg.view.Changed(gi.ID, gi)
	}
	p.Log.Info("instance terminating", "instance", req.ID, "cell", gi.CellID)
	return &pluginapi.TerminateResponse{Instance: gi.Instance}, nil
}
