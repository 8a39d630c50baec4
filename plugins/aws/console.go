package aws

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/kipcell/kip/pluginapi"
)

// ConsoleOutput returns an instance's serial console output from
// GetConsoleOutput: what EC2 keeps of it (the last 64 KiB), base64 on the
// wire, decoded here. EC2 answers no output until the instance has written
// some (and updates it as it goes on), so an empty Output is no error.
// An instance EC2 does not know is NotFound. (Latest, the live buffer, is
// left out: only Nitro instances support it.)
func (p *provider) ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	out, err := cfg.ec2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(req.InstanceID)})
	if err != nil {
		return nil, fmt.Errorf("reading the console output of instance %s: %w", req.InstanceID, mapError("GetConsoleOutput", err))
	}
	text, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil {
		return nil, fmt.Errorf("reading the console output of instance %s: decoding it: %w", req.InstanceID, err)
	}
	return &pluginapi.ConsoleOutputResponse{Output: string(text), Timestamp: aws.ToTime(out.Timestamp)}, nil
}
