package pluginapi

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/kipcell/kip/pluginapi/internal/pluginv1"
)

// grpcServer serves a Provider as the kip.plugin.v1.Provider service.
type grpcServer struct {
	pb.UnimplementedProviderServer
	impl Provider
}

// RegisterGRPCServer registers impl on s as the kip.plugin.v1.Provider
// service. Serve does this for plugins; tests and harnesses that run a
// provider on their own gRPC server use it directly.
func RegisterGRPCServer(s grpc.ServiceRegistrar, impl Provider) {
	pb.RegisterProviderServer(s, &grpcServer{impl: impl})
}

func (s *grpcServer) GetInfo(ctx context.Context, _ *pb.GetInfoRequest) (*pb.GetInfoResponse, error) {
	resp, err := s.impl.GetInfo(ctx, &GetInfoRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	return getInfoToProto(resp), nil
}

func (s *grpcServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	resp, err := s.impl.Configure(ctx, configureFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ConfigureResponse{Warnings: resp.Warnings}, nil
}

func (s *grpcServer) ListInstanceTypes(ctx context.Context, _ *pb.ListInstanceTypesRequest) (*pb.ListInstanceTypesResponse, error) {
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
	resp, err := s.impl.Launch(ctx, launchFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.LaunchResponse{Instance: instanceToProto(&resp.Instance)}, nil
}

func (s *grpcServer) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	resp, err := s.impl.Describe(ctx, &DescribeRequest{IDs: req.GetIds()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeResponse{Instances: instancesToProto(resp.Instances)}, nil
}

func (s *grpcServer) List(ctx context.Context, _ *pb.ListRequest) (*pb.ListResponse, error) {
	resp, err := s.impl.List(ctx, &ListRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ListResponse{Instances: instancesToProto(resp.Instances)}, nil
}

func (s *grpcServer) Terminate(ctx context.Context, req *pb.TerminateRequest) (*pb.TerminateResponse, error) {
	resp, err := s.impl.Terminate(ctx, &TerminateRequest{ID: req.GetId()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.TerminateResponse{Instance: instanceToProto(&resp.Instance)}, nil
}

func (s *grpcServer) WatchEvents(_ *pb.WatchEventsRequest, stream grpc.ServerStreamingServer[pb.Event]) error {
	w, ok := s.impl.(EventWatcher)
	if !ok {
		return toStatus(NewUnsupported("plugin does not implement WatchEvents"))
	}
	err := w.WatchEvents(stream.Context(), &WatchEventsRequest{}, func(e *Event) error {
		return stream.Send(eventToProto(e))
	})
	return toStatus(err)
}

func (s *grpcServer) RegistryAuth(ctx context.Context, req *pb.RegistryAuthRequest) (*pb.RegistryAuthResponse, error) {
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
