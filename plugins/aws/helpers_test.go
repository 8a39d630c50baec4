package aws

import (
	"encoding/json"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

const testCluster = "test-cluster"

// testConfig is a valid configuration for f: static credentials, f's
// endpoint for EC2 and ECR, both subnets and the amd64 image.
func testConfig(f *fakeEC2) map[string]any {
	return map[string]any{
		"region":         "us-east-1",
		"endpointURL":    f.URL(),
		"ecrEndpointURL": f.URL(),
		"credentials":    map[string]any{"accessKeyID": "AKIDTEST", "secretAccessKey": "secret"},
		"subnets":        []string{"subnet-0a", "subnet-0b"},
		"image":          map[string]any{"id": fakeAMI},
	}
}

// with returns a copy of cfg with key set to value (deleted for nil).
func with(cfg map[string]any, key string, value any) map[string]any {
	out := maps.Clone(cfg)
	if value == nil {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// newProvider returns an unconfigured provider with test timings: the SDK
// retries connection errors only (injected errors are seen once, a closed
// keep-alive connection does not fail a test), fast polling.
func newProvider() *provider {
	p := New(slog.New(slog.DiscardHandler)).(*provider)
	p.connectionRetriesOnly = true
	p.PollFast = 5 * time.Millisecond
	p.PollSlow = 20 * time.Millisecond
	p.PollBoot = 5 * time.Millisecond
	p.statusEvery = 10 * time.Millisecond
	return p
}

// configured returns a provider configured with cfg for testCluster.
func configured(t testing.TB, cfg map[string]any, tweak ...func(*provider)) *provider {
	t.Helper()
	p := newProvider()
	for _, f := range tweak {
		f(p)
	}
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, NodeName: "kip", Config: mustJSON(t, cfg)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return p
}

// launchRequest is a request for cell in the first zone.
func launchRequest(cell string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{
		CellID: cell, NodeName: "kip", PodUID: "uid-" + cell, PodNamespace: "default", PodName: cell,
		InstanceType: "m5.large", CapacityType: pluginapi.CapacityOnDemand, Zones: []string{"us-east-1a"},
		Bootstrap: []byte(`{"version":1,"cellID":"` + cell + `"}`),
	}
}
