package pluginapi

import (
	"context"
	"runtime"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is the go-plugin handshake every Kip plugin and host share. The
// cookie only tells a plugin binary that kip started it; it is not a
// security measure (the host verifies plugins by SHA-256 pin and AutoMTLS).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "KIP_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "c3f1d0f6-kip-cell-plugin-8a2e5b7d",
}

// PluginName is the name under which the provider is dispensed.
const PluginName = "provider"

// MaxMessageBytes bounds one gRPC message each way; catalogs with many
// offerings and bootstrap documents are larger than gRPC's 4 MiB default.
const MaxMessageBytes = 64 << 20

// PluginSets returns the go-plugin plugin sets by protocol version. A plugin
// passes its Provider; the host passes nil.
func PluginSets(impl Provider) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &grpcPlugin{impl: impl}},
	}
}

// GRPCServerOptions are the gRPC server options Serve uses: the message
// size bound, and one stream worker per usable CPU, so that a call's handler
// runs on a goroutine whose stack has already grown instead of a new one
// (gRPC falls back to a new goroutine when every worker is busy, so a
// long-lived stream such as WatchEvents never holds a call up). The workers
// cut the in-process round trip by 10 to 15 % (docs/benchmarks.md, "Plugin
// round trip").
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
}

// GRPCDialOptions are the gRPC dial options a host uses with a plugin.
func GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
		),
	}
}

// grpcPlugin adapts a Provider to go-plugin's GRPCPlugin.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Provider
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterGRPCServer(s, p.impl)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return NewGRPCClient(cc), nil
}
