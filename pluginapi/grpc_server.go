package pluginapi

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"

	"google.golang.org/grpc"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// grpcServer serves a Provider as the kip.plugin.v1.Provider service. It
// enforces the rules of the contract the SDK can check for every plugin,
// before the provider sees the call:
//   - every call but GetInfo and Configure answers NotConfigured until a
//     Configure has succeeded;
//   - Configure with an empty cluster ID answers InvalidConfig key
//     "clusterID"; an empty or null Config reaches the provider as "{}",
//     and one that is not a JSON object answers InvalidConfig key
//     ConfigKey;
//   - Launch asking for a feature whose capability the plugin's GetInfo
//     does not report answers Unsupported naming the field
//     (GetInfoResponse.CheckLaunch);
//   - the volume calls of a plugin whose GetInfo does not report
//     CapabilityVolumes answer Unsupported, and AttachVolume and
//     DetachVolume for a driver not in its VolumeDrivers answer
//     Unsupported with Field FieldVolumeDriver
//     (GetInfoResponse.CheckVolumeDriver).
type grpcServer struct {
	pb.UnimplementedProviderServer
	impl Provider

	configured atomic.Bool
	// info is the provider's first successful GetInfo answer, whose
	// capabilities Launch checks requests against.
	info atomic.Pointer[GetInfoResponse]
}

// RegisterGRPCServer registers impl on s as the kip.plugin.v1.Provider
// service. Serve does this for plugins; tests and harnesses that run a
// provider on their own gRPC server use it directly.
func RegisterGRPCServer(s grpc.ServiceRegistrar, impl Provider) {
	pb.RegisterProviderServer(s, &grpcServer{impl: impl})
}

// ready refuses a call that needs the configuration until a Configure has
// succeeded.
func (s *grpcServer) ready(call string) error {
	if s.configured.Load() {
		return nil
	}
	return toStatus(NewNotConfigured("%s called before a successful Configure; the host configures every plugin process first", call))
}

func (s *grpcServer) GetInfo(ctx context.Context, _ *pb.GetInfoRequest) (*pb.GetInfoResponse, error) {
	resp, err := s.impl.GetInfo(ctx, &GetInfoRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	s.info.CompareAndSwap(nil, resp)
	return getInfoToProto(resp), nil
}

func (s *grpcServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	r := configureFromProto(req)
	if r.ClusterID == "" {
		return nil, toStatus(NewInvalidConfig("clusterID", "is required: every instance is tagged with it, and List returns only the cluster's instances"))
	}
	config, err := normalizeConfig(r.Config)
	if err != nil {
		return nil, toStatus(err)
	}
	r.Config = config
	resp, err := s.impl.Configure(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	s.configured.Store(true)
	return &pb.ConfigureResponse{Warnings: resp.Warnings}, nil
}

// normalizeConfig returns the configuration a provider's Configure gets:
// "{}" for no configuration (empty, blank or null), config itself for a
// JSON object, and InvalidConfig key ConfigKey for anything else.
func normalizeConfig(config []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return []byte("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil || obj == nil {
		return nil, NewInvalidConfig(ConfigKey, "must be a JSON object (a mapping of the plugin's settings)")
	}
	return config, nil
}

func (s *grpcServer) ListInstanceTypes(ctx context.Context, _ *pb.ListInstanceTypesRequest) (*pb.ListInstanceTypesResponse, error) {
	if err := s.ready("ListInstanceTypes"); err != nil {
		return nil, err
	}
	resp, err := s.impl.ListInstanceTypes(ctx, &ListInstanceTypesRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListInstanceTypesResponse{InstanceTypes: make([]*pb.InstanceType, len(resp.InstanceTypes))}
	for i := range resp.InstanceTypes {
		out.InstanceTypes[i] = instanceTypeToProto(&resp.InstanceTypes[i])
	}
	return out, nil
}

func (s *grpcServer) Launch(ctx context.Context, req *pb.LaunchRequest) (*pb.LaunchResponse, error) {
	if err := s.ready("Launch"); err != nil {
		return nil, err
	}
	r := launchFromProto(req)
	if err := s.checkLaunch(ctx, r); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.impl.Launch(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.LaunchResponse{Instance: instanceToProto(&resp.Instance)}, nil
}

// checkLaunch refuses a request for a feature the plugin does not report.
// Without a GetInfo answer it leaves the decision to the provider.
func (s *grpcServer) checkLaunch(ctx context.Context, r *LaunchRequest) error {
	info := s.getInfo(ctx)
	if info == nil {
		return nil // without the capabilities, the provider decides.
	}
	return info.CheckLaunch(r)
}

// getInfo returns the provider's GetInfo answer, asking for it the first
// time; nil when the provider cannot answer.
func (s *grpcServer) getInfo(ctx context.Context) *GetInfoResponse {
	if info := s.info.Load(); info != nil {
		return info
	}
	resp, err := s.impl.GetInfo(ctx, &GetInfoRequest{})
	if err != nil || resp == nil {
		return nil
	}
	s.info.CompareAndSwap(nil, resp)
	return s.info.Load()
}

// volumeAttacher returns the provider as a VolumeAttacher, or the
// Unsupported error call answers: the provider does not implement it, its
// GetInfo does not report CapabilityVolumes, or (for a call naming one) it
// does not list driver among its VolumeDrivers. Without a GetInfo answer
// the provider decides.
func (s *grpcServer) volumeAttacher(ctx context.Context, call string, driver *string) (VolumeAttacher, error) {
	v, ok := s.impl.(VolumeAttacher)
	if !ok {
		return nil, NewUnsupported("plugin does not implement %s", call)
	}
	info := s.getInfo(ctx)
	switch {
	case info == nil:
		return v, nil
	case driver != nil:
		if err := info.CheckVolumeDriver(*driver); err != nil {
			return nil, err
		}
	case !info.Has(CapabilityVolumes):
		return nil, NewUnsupported("plugin %s does not implement %s (capability %q)", info.Name, call, CapabilityVolumes)
	}
	return v, nil
}

func (s *grpcServer) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if err := s.ready("Describe"); err != nil {
		return nil, err
	}
	resp, err := s.impl.Describe(ctx, &DescribeRequest{IDs: req.GetIds()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeResponse{Instances: instancesToProto(resp.Instances)}, nil
}

func (s *grpcServer) List(ctx context.Context, _ *pb.ListRequest) (*pb.ListResponse, error) {
	if err := s.ready("List"); err != nil {
		return nil, err
	}
	resp, err := s.impl.List(ctx, &ListRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ListResponse{Instances: instancesToProto(resp.Instances)}, nil
}

func (s *grpcServer) Terminate(ctx context.Context, req *pb.TerminateRequest) (*pb.TerminateResponse, error) {
	if err := s.ready("Terminate"); err != nil {
		return nil, err
	}
	resp, err := s.impl.Terminate(ctx, &TerminateRequest{ID: req.GetId()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.TerminateResponse{Instance: instanceToProto(&resp.Instance)}, nil
}

func (s *grpcServer) WatchEvents(_ *pb.WatchEventsRequest, stream grpc.ServerStreamingServer[pb.Event]) error {
	if err := s.ready("WatchEvents"); err != nil {
		return err
	}
	w, ok := s.impl.(EventWatcher)
	if !ok {
		return toStatus(NewUnsupported("plugin does not implement WatchEvents"))
	}
	err := w.WatchEvents(stream.Context(), &WatchEventsRequest{}, func(e *Event) error {
		return stream.Send(eventToProto(e))
	})
	return toStatus(err)
}

func (s *grpcServer) VerifyInstanceIdentity(ctx context.Context, req *pb.VerifyInstanceIdentityRequest) (*pb.VerifyInstanceIdentityResponse, error) {
	if err := s.ready("VerifyInstanceIdentity"); err != nil {
		return nil, err
	}
	v, ok := s.impl.(InstanceIdentityVerifier)
	if !ok {
		return nil, toStatus(NewUnsupported("plugin does not implement VerifyInstanceIdentity"))
	}
	resp, err := v.VerifyInstanceIdentity(ctx, &VerifyInstanceIdentityRequest{
		InstanceID: req.GetInstanceId(), Document: req.GetDocument(), Signature: req.GetSignature(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.VerifyInstanceIdentityResponse{NotChecked: resp.NotChecked}, nil
}

func (s *grpcServer) RegistryAuth(ctx context.Context, req *pb.RegistryAuthRequest) (*pb.RegistryAuthResponse, error) {
	if err := s.ready("RegistryAuth"); err != nil {
		return nil, err
	}
	a, ok := s.impl.(RegistryAuthenticator)
	if !ok {
		return nil, toStatus(NewUnsupported("plugin does not implement RegistryAuth"))
	}
	resp, err := a.RegistryAuth(ctx, &RegistryAuthRequest{Image: req.GetImage()})
	if err != nil {
		return nil, toStatus(err)
	}
	return registryAuthToProto(resp), nil
}

func (s *grpcServer) ConsoleOutput(ctx context.Context, req *pb.ConsoleOutputRequest) (*pb.ConsoleOutputResponse, error) {
	if err := s.ready("ConsoleOutput"); err != nil {
		return nil, err
	}
	r, ok := s.impl.(ConsoleOutputReader)
	if !ok {
		return nil, toStatus(NewUnsupported("plugin does not implement ConsoleOutput"))
	}
	resp, err := r.ConsoleOutput(ctx, &ConsoleOutputRequest{InstanceID: req.GetInstanceId()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ConsoleOutputResponse{Output: resp.Output, Timestamp: toTimestamp(resp.Timestamp)}, nil
}

func (s *grpcServer) AttachVolume(ctx context.Context, req *pb.AttachVolumeRequest) (*pb.AttachVolumeResponse, error) {
	if err := s.ready("AttachVolume"); err != nil {
		return nil, err
	}
	r := attachVolumeFromProto(req)
	v, err := s.volumeAttacher(ctx, "AttachVolume", &r.Driver)
	if err != nil {
		return nil, toStatus(err)
	}
	resp, err := v.AttachVolume(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AttachVolumeResponse{Attachment: volumeAttachmentToProto(&resp.Attachment)}, nil
}

func (s *grpcServer) DetachVolume(ctx context.Context, req *pb.DetachVolumeRequest) (*pb.DetachVolumeResponse, error) {
	if err := s.ready("DetachVolume"); err != nil {
		return nil, err
	}
	r := detachVolumeFromProto(req)
	v, err := s.volumeAttacher(ctx, "DetachVolume", &r.Driver)
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := v.DetachVolume(ctx, r); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DetachVolumeResponse{}, nil
}

func (s *grpcServer) DescribeVolumeAttachments(ctx context.Context, req *pb.DescribeVolumeAttachmentsRequest) (*pb.DescribeVolumeAttachmentsResponse, error) {
	if err := s.ready("DescribeVolumeAttachments"); err != nil {
		return nil, err
	}
	v, err := s.volumeAttacher(ctx, "DescribeVolumeAttachments", nil)
	if err != nil {
		return nil, toStatus(err)
	}
	resp, err := v.DescribeVolumeAttachments(ctx, &DescribeVolumeAttachmentsRequest{InstanceIDs: req.GetInstanceIds()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeVolumeAttachmentsResponse{Attachments: volumeAttachmentsToProto(resp.Attachments)}, nil
}
