package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// BenchmarkRoundTrip measures one call from the host through the
// Supervisor's Client to the test plugin subprocess (gRPC over a Unix
// socket with mTLS) and back, and reports the p50/p90/p99 latency.
func BenchmarkRoundTrip(b *testing.B) {
	_, path := installPlugin(b, pluginV1)
	cfg := testConfig(b, path)
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := open(b, cfg)
	c := s.Client()
	ctx := context.Background()

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
			reportPercentiles(b, durs)
		})
	}
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	for _, p := range []int{50, 90, 99} {
		d := durs[(len(durs)-1)*p/100]
		b.ReportMetric(float64(d.Nanoseconds())/1e3, fmt.Sprintf("p%d-µs", p))
	}
}
