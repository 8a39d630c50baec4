package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// grpcClient is the host's side of the wire: it implements Client over a
// gRPC connection, maps statuses back to error kinds, and rejects answers
// that fail validation with an InvalidAnswerError.
type grpcClient struct {
	c pb.ProviderClient
}

var _ Client = (*grpcClient)(nil)

// NewGRPCClient returns a Client speaking kip.plugin.v1 over cc. The host
// gets one from go-plugin; harnesses that dial a provider themselves use
// this directly.
func NewGRPCClient(cc grpc.ClientConnInterface) Client {
	return &grpcClient{c: pb.NewProviderClient(cc)}
}

func (c *grpcClient) GetInfo(ctx context.Context, _ *GetInfoRequest) (*GetInfoResponse, error) {
	resp, err := c.c.GetInfo(ctx, &pb.GetInfoRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	info := getInfoFromProto(resp)
	if err := ValidateInfo(info); err != nil {
		return nil, invalidAnswer("GetInfo", err)
	}
	return info, nil
}

func (c *grpcClient) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	resp, err := c.c.Configure(ctx, configureToProto(req))
	if err != nil {
		return nil, fromStatus(err)
	}
	return &ConfigureResponse{Warnings: resp.GetWarnings()}, nil
}

func (c *grpcClient) ListInstanceTypes(ctx context.Context, _ *ListInstanceTypesRequest) (*ListInstanceTypesResponse, error) {
	resp, err := c.c.ListInstanceTypes(ctx, &pb.ListInstanceTypesRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := &ListInstanceTypesResponse{InstanceTypes: make([]InstanceType, len(resp.GetInstanceTypes()))}
	for i, t := range resp.GetInstanceTypes() {
		out.InstanceTypes[i] = instanceTypeFromProto(t)
	}
	if err := ValidateInstanceTypes(out.InstanceTypes); err != nil {
		return nil, invalidAnswer("ListInstanceTypes", err)
	}
	return out, nil
}

func (c *grpcClient) Launch(ctx context.Context, req *LaunchRequest) (*LaunchResponse, error) {
	resp, err := c.c.Launch(ctx, launchToProto(req))
	if err != nil {
		return nil, fromStatus(err)
	}
	inst := instanceFromProto(resp.GetInstance())
	if err := ValidateInstance(&inst); err != nil {
		return nil, invalidAnswer("Launch", err)
	}
	if inst.CellID != req.CellID {
		return nil, invalidAnswer("Launch", fmt.Errorf("instance %q is for cell %q, not the requested %q", inst.ID, inst.CellID, req.CellID))
	}
	return &LaunchResponse{Instance: inst}, nil
}

func (c *grpcClient) Describe(ctx context.Context, req *DescribeRequest) (*DescribeResponse, error) {
	resp, err := c.c.Describe(ctx, &pb.DescribeRequest{Ids: req.IDs})
	if err != nil {
		return nil, fromStatus(err)
	}
	insts := instancesFromProto(resp.GetInstances())
	if err := validateInstances(insts); err != nil {
		return nil, invalidAnswer("Describe", err)
	}
	asked := make(map[string]bool, len(req.IDs))
	for _, id := range req.IDs {
		asked[id] = true
	}
	for _, inst := range insts {
		if !asked[inst.ID] {
			return nil, invalidAnswer("Describe", fmt.Errorf("instance %q was not asked for", inst.ID))
		}
	}
	return &DescribeResponse{Instances: insts}, nil
}

func (c *grpcClient) List(ctx context.Context, _ *ListRequest) (*ListResponse, error) {
	resp, err := c.c.List(ctx, &pb.ListRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	insts := instancesFromProto(resp.GetInstances())
	if err := validateInstances(insts); err != nil {
		return nil, invalidAnswer("List", err)
	}
	return &ListResponse{Instances: insts}, nil
}

func (c *grpcClient) Terminate(ctx context.Context, req *TerminateRequest) (*TerminateResponse, error) {
	resp, err := c.c.Terminate(ctx, &pb.TerminateRequest{Id: req.ID})
	if err != nil {
		return nil, fromStatus(err)
	}
	inst := instanceFromProto(resp.GetInstance())
	if inst.ID == "" {
		// A plugin may answer an accepted Terminate without the instance.
		inst.ID = req.ID
	}
	if inst.ID != req.ID {
		return nil, invalidAnswer("Terminate", fmt.Errorf("answered for instance %q, not the requested %q", inst.ID, req.ID))
	}
	return &TerminateResponse{Instance: inst}, nil
}

func (c *grpcClient) WatchEvents(ctx context.Context, _ *WatchEventsRequest, send func(*Event) error) error {
	stream, err := c.c.WatchEvents(ctx, &pb.WatchEventsRequest{})
	if err != nil {
		return fromStatus(err)
	}
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fromStatus(err)
		}
		if err := send(eventFromProto(e)); err != nil {
			return err
		}
	}
}

func (c *grpcClient) VerifyInstanceIdentity(ctx context.Context, req *VerifyInstanceIdentityRequest) (*VerifyInstanceIdentityResponse, error) {
	resp, err := c.c.VerifyInstanceIdentity(ctx, &pb.VerifyInstanceIdentityRequest{
		InstanceId: req.InstanceID, Document: req.Document, Signature: req.Signature,
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &VerifyInstanceIdentityResponse{NotChecked: resp.GetNotChecked()}, nil
}

func (c *grpcClient) RegistryAuth(ctx context.Context, req *RegistryAuthRequest) (*RegistryAuthResponse, error) {
	resp, err := c.c.RegistryAuth(ctx, &pb.RegistryAuthRequest{Image: req.Image})
	if err != nil {
		return nil, fromStatus(err)
	}
	return registryAuthFromProto(resp), nil
}

func (c *grpcClient) ConsoleOutput(ctx context.Context, req *ConsoleOutputRequest) (*ConsoleOutputResponse, error) {
	resp, err := c.c.ConsoleOutput(ctx, &pb.ConsoleOutputRequest{InstanceId: req.InstanceID})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &ConsoleOutputResponse{Output: resp.GetOutput(), Timestamp: fromTimestamp(resp.GetTimestamp())}, nil
}

func (c *grpcClient) AttachVolume(ctx context.Context, req *AttachVolumeRequest) (*AttachVolumeResponse, error) {
	resp, err := c.c.AttachVolume(ctx, attachVolumeToProto(req))
	if err != nil {
		return nil, fromStatus(err)
	}
	a := volumeAttachmentFromProto(resp.GetAttachment())
	if err := validateAttachAnswer(req, &a); err != nil {
		return nil, invalidAnswer("AttachVolume", err)
	}
	return &AttachVolumeResponse{Attachment: a}, nil
}

func (c *grpcClient) DetachVolume(ctx context.Context, req *DetachVolumeRequest) (*DetachVolumeResponse, error) {
	if _, err := c.c.DetachVolume(ctx, detachVolumeToProto(req)); err != nil {
		return nil, fromStatus(err)
	}
	return &DetachVolumeResponse{}, nil
}

func (c *grpcClient) DescribeVolumeAttachments(ctx context.Context, req *DescribeVolumeAttachmentsRequest) (*DescribeVolumeAttachmentsResponse, error) {
	resp, err := c.c.DescribeVolumeAttachments(ctx, &pb.DescribeVolumeAttachmentsRequest{InstanceIds: req.InstanceIDs})
	if err != nil {
		return nil, fromStatus(err)
	}
	as := volumeAttachmentsFromProto(resp.GetAttachments())
	if err := validateAttachments(req.InstanceIDs, as); err != nil {
		return nil, invalidAnswer("DescribeVolumeAttachments", err)
	}
	return &DescribeVolumeAttachmentsResponse{Attachments: as}, nil
}
