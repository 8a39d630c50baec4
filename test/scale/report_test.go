package scale

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/test/bench"
)

func TestMarkdown(t *testing.T) {
	results := []Result{
		{
			Node: "mock-100", Pods: 100, AllCreated: 1500 * time.Millisecond, AllRunning: 20 * time.Second,
			Start:   bench.Stats{N: 100, P50: 10 * time.Second, P90: 18 * time.Second, P99: 19900 * time.Millisecond},
			AllGone: 21 * time.Second, PeakRSS: 60 << 20, CPU: 2 * time.Second, IdleCPU: 300 * time.Millisecond, Idle: 30 * time.Second,
			Requests:     Requests{Total: 250, ByKind: map[string]int{"patch pods/status": 200, "delete pods": 50}},
			IdleRequests: Requests{Total: 3, ByKind: map[string]int{"update leases": 3}},
			Settle:       12500 * time.Millisecond, Settled: true,
		},
		{Node: "kip-100", Pods: 100, Idle: 30 * time.Second, Counters: map[string]float64{"kip_plugin_calls_total": 200, "kip_api_requests_total": 300}},
	}
	want := "| node | pods | all created | all Running | start p50 | start p90 | start p99 | all gone | peak RSS | CPU per pod | idle CPU | API requests per pod | idle API requests |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n" +
		"| mock-100 | 100 | 1.50 s | 20.00 s | 10.00 s | 18.00 s | 19.90 s | 21.00 s | 60 MiB | 20.00 ms | 1.00 % of a core | 2.50 | 3 in 30.00 s |\n" +
		"| kip-100 | 100 | 0.00 s | 0.00 s | 0.00 s | 0.00 s | 0.00 s | 0.00 s | 0 MiB | 0.00 ms | 0.00 % of a core | 0.00 | 0 in 30.00 s |\n" +
		"\n" +
		"- mock-100, 100 pods: patch pods/status 200, delete pods 50; idle (from 12.50 s after all Running, once its event creates had stopped): update leases 3\n" +
		"- kip-100, 100 pods: no API requests; idle (from 0.00 s after all Running, events still being created): no API requests; its own counters: kip_api_requests_total 300, kip_plugin_calls_total 200\n"
	if diff := cmp.Diff(want, Markdown(results)); diff != "" {
		t.Errorf("Markdown (-want +got):\n%s", diff)
	}
}

func TestResultRates(t *testing.T) {
	tests := []struct {
		name                  string
		r                     Result
		cpuPerPod             time.Duration
		idleCores, reqsPerPod float64
	}{
		{"a burst", Result{Pods: 300, CPU: 3 * time.Second, IdleCPU: 600 * time.Millisecond, Idle: 30 * time.Second, Requests: Requests{Total: 900}},
			10 * time.Millisecond, 0.02, 3},
		{"nothing measured", Result{}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.CPUPerPod(); got != tt.cpuPerPod {
				t.Errorf("CPUPerPod = %v, want %v", got, tt.cpuPerPod)
			}
			if got := tt.r.IdleCores(); got != tt.idleCores {
				t.Errorf("IdleCores = %v, want %v", got, tt.idleCores)
			}
			if got := tt.r.RequestsPerPod(); got != tt.reqsPerPod {
				t.Errorf("RequestsPerPod = %v, want %v", got, tt.reqsPerPod)
			}
		})
	}
}

func TestRatios(t *testing.T) {
	results := []Result{
		{Node: "mock-100", Pods: 100, AllRunning: 20 * time.Second, Start: bench.Stats{P50: 10 * time.Second, P99: 19 * time.Second},
			PeakRSS: 50 << 20, CPU: 2 * time.Second, Requests: Requests{Total: 300}},
		{Node: "kip-local-100", Pods: 100, AllRunning: 10 * time.Second, Start: bench.Stats{P50: 5 * time.Second, P99: 9500 * time.Millisecond},
			PeakRSS: 100 << 20, CPU: 4 * time.Second, Requests: Requests{Total: 450}, Counters: map[string]float64{PluginCalls: 250}},
		{Node: "kip-aws-100", Pods: 100, AllRunning: 30 * time.Second, Counters: map[string]float64{PluginCalls: 300, CloudCalls: 420}},
		{Node: "kip-local-300", Pods: 300, AllRunning: 30 * time.Second},
	}
	want := "| node | pods | all Running | start p50 | start p99 | peak RSS | CPU per pod | API requests per pod | plugin calls per pod | cloud calls per pod |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n" +
		"| kip-local-100 | 100 | 10.00 s (0.50×) | 5.00 s (0.50×) | 9.50 s (0.50×) | 100 MiB (2.00×) | 40.00 ms (2.00×) | 4.50 (1.50×) | 2.50 | – |\n" +
		"| kip-aws-100 | 100 | 30.00 s (1.50×) | 0.00 s (0.00×) | 0.00 s (0.00×) | 0 MiB (0.00×) | 0.00 ms (0.00×) | 0.00 (0.00×) | 3.00 | 4.20 |\n" +
		"| kip-local-300 | 300 | 30.00 s | 0.00 s | 0.00 s | 0 MiB | 0.00 ms | 0.00 | – | – |\n"
	got := Ratios(results, func(r Result) bool { return strings.HasPrefix(r.Node, "mock-") })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ratios (-want +got):\n%s", diff)
	}
}
