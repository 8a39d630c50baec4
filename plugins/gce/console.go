package gce

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
)

// ConsoleOutput returns an instance's serial port 1 output from
// instances.getSerialPortOutput: what Compute Engine keeps of it (the last
// 1 MB), as text. An instance that has written nothing yet has an empty
// Output, no error; one Compute Engine does not know is NotFound.
func (p *provider) ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	zone, name, ok := parseID(req.InstanceID)
	if !ok {
		return nil, pluginapi.NewNotFound("instance %q is not an instance ID of this plugin (zone/name)", req.InstanceID)
	}
	out, err := cfg.clients.instances.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{
		Project: cfg.project, Zone: zone, Instance: name, Port: proto.Int32(1),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the console output of instance %s: %w", req.InstanceID, mapError("instances.getSerialPortOutput", err))
	}
	return &pluginapi.ConsoleOutputResponse{Output: out.GetContents(), Timestamp: p.Now().UTC().Truncate(time.Second)}, nil
}
