package pluginapi_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

// BenchmarkInProcessRoundTrip is the floor under the host's plugin round
// trip: the same gRPC service, client validation and fake provider, but
// server and client in one process over a Unix socket, without TLS. The
// subprocess figure is host/plugin's BenchmarkRoundTrip.
func BenchmarkInProcessRoundTrip(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "plugin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(pluginapi.GRPCServerOptions()...)
	p := fake.New()
	pluginapi.RegisterGRPCServer(srv, p)
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("unix://"+sock,
		append(pluginapi.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	c := pluginapi.NewGRPCClient(cc)
	ctx := context.Background()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "bench"}); err != nil {
		b.Fatal(err)
	}

	ops := []struct {
		name string
		call func(i int) error
	}{
		{"GetInfo", func(int) error {
			_, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
			return err
		}},
		{"Launch", func(i int) error {
			_, err := c.Launch(ctx, &pluginapi.LaunchRequest{
				CellID: fmt.Sprintf("bench-%d", i), InstanceType: "fake.small",
				CapacityType: pluginapi.CapacityOnDemand, NodeName: "kip", PodUID: "uid",
			})
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
			slices.Sort(durs)
			for _, pct := range []int{50, 90, 99} {
				b.ReportMetric(float64(durs[(len(durs)-1)*pct/100].Nanoseconds())/1e3, fmt.Sprintf("p%d-µs", pct))
			}
		})
	}
}
