package plugintest

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kipcell/kip/pluginapi"
)

// Serve serves p on a real in-process gRPC server (an in-memory listener,
// the server options pluginapi.Serve uses) and returns a pluginapi.Client
// connected to it with the host's dial options, so every call crosses the
// wire: protobuf encoding, error-kind mapping and answer validation. stop
// closes the connection and the server; it does not touch p.
func Serve(p pluginapi.Provider) (client pluginapi.Client, stop func()) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(pluginapi.GRPCServerOptions()...)
	pluginapi.RegisterGRPCServer(srv, p)
	go srv.Serve(lis) //nolint:errcheck // Serve returns when stop closes the server.

	opts := append(pluginapi.GRPCDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
	)
	cc, err := grpc.NewClient("passthrough:///plugintest", opts...)
	if err != nil {
		// NewClient fails only on a malformed target or options, fixed here.
		srv.Stop()
		panic(fmt.Sprintf("plugintest: creating the gRPC client: %v", err))
	}
	return pluginapi.NewGRPCClient(cc), func() {
		cc.Close()
		srv.Stop()
		lis.Close()
	}
}

// Client is Serve for a test: it stops the server when tb ends.
func Client(tb testing.TB, p pluginapi.Provider) pluginapi.Client {
	tb.Helper()
	c, stop := Serve(p)
	tb.Cleanup(stop)
	return c
}
