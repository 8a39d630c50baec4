package plugin

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/bench"
)

// BenchmarkRoundTrip measures one call from the host through the
// Supervisor's Client to the test plugin subprocess (gRPC over a Unix
// socket with mTLS) and back, and reports the p50/p90/p99 latency.
func BenchmarkRoundTrip(b *testing.B) {
	_, path := installPlugin(b, pluginV1)
	cfg := testConfig(b, path)
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := open(b, cfg)
	roundTrips(b, s.Client())
}

// BenchmarkInProcessRoundTrip is the floor under BenchmarkRoundTrip: the
// same gRPC service, client validation and fake provider, but server and
// client in one process over a Unix socket, without TLS.
func BenchmarkInProcessRoundTrip(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "plugin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(pluginapi.GRPCServerOptions()...)
	pluginapi.RegisterGRPCServer(srv, fake.New())
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("unix://"+sock,
		append(pluginapi.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	c := pluginapi.NewGRPCClient(cc)
	if _, err := c.Configure(b.Context(), &pluginapi.ConfigureRequest{ClusterID: "bench"}); err != nil {
		b.Fatal(err)
	}
	roundTrips(b, c)
}

// roundTrips times GetInfo and Launch (a new cell ID every iteration) on c,
// one sub-benchmark each, and reports their percentiles.
func roundTrips(b *testing.B, c pluginapi.Client) {
	ctx := b.Context()
	ops := []struct {
		name string
		call func(i int) error
	}{
		{"GetInfo", func(int) error {
			_, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
			return err
		}},
		{"Launch", func(i int) error {
			_, err := c.Launch(ctx, launchReq(fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)))
			return err
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				start := time.Now()
				if err := op.call(i); err != nil {
					b.Fatalf("%s: %v", op.name, err)
				}
				durs = append(durs, time.Since(start))
				i++
			}
			bench.Report(b, "", time.Microsecond, durs)
		})
	}
}
