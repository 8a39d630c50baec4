package scale

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCounterSums(t *testing.T) {
	text := `# HELP kip_plugin_calls_total Calls kip made to the cloud plugin.
# TYPE kip_plugin_calls_total counter
kip_plugin_calls_total{method="Launch",outcome="ok"} 100
kip_plugin_calls_total{method="Describe",outcome="ok"} 40
kip_plugin_calls_total{method="Launch",outcome="throttled"} 2
kip_api_requests_total{code="200",verb="PATCH"} 300
kip_api_requests_total{code="201",verb="POST"} 5
kip_api_request_seconds_bucket{verb="PATCH",le="0.001"} 7
go_goroutines 42
`
	tests := []struct {
		name string
		by   map[string]string
		want map[string]float64
	}{
		{"totals and plugin calls by method", map[string]string{"kip_plugin_calls_total": "method", "kip_api_requests_total": ""},
			map[string]float64{
				"kip_plugin_calls_total": 142, "kip_plugin_calls_total{method=Launch}": 102, "kip_plugin_calls_total{method=Describe}": 40,
				"kip_api_requests_total": 305,
			}},
		{"an unlabelled metric", map[string]string{"go_goroutines": ""}, map[string]float64{"go_goroutines": 42}},
		{"a metric not there counts zero", map[string]string{"kip_match_decisions_total": ""}, map[string]float64{"kip_match_decisions_total": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CounterSums(text, tt.by)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CounterSums (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := CounterSums("kip_plugin_calls_total{method=\"Launch\"} many\n", map[string]string{"kip_plugin_calls_total": ""}); err == nil {
		t.Error("CounterSums of a value that is no number: no error")
	}
}
