package gce

import (
	"encoding/json"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

const testCluster = "test-cluster"

// testConfig is a valid configuration for f: no authentication, f's
// endpoint, two zones, the fake's subnetwork and image family.
func testConfig(f *fakeCompute) map[string]any {
	return map[string]any{
		"project":               fakeProject,
		"region":                fakeRegion,
		"zones":                 []string{"us-central1-a", "us-central1-b"},
		"subnetwork":            fakeSubnet,
		"image":                 map[string]any{"family": "kip-cell"},
		"endpoint":              f.URL(),
		"withoutAuthentication": true,
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

// newProvider returns an unconfigured provider with fast polling.
func newProvider() *provider {
	p := New(slog.New(slog.DiscardHandler)).(*provider)
	p.PollFast = 5 * time.Millisecond
	p.PollSlow = 20 * time.Millisecond
	p.PollBoot = 5 * time.Millisecond
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
		InstanceType: "e2-small", CapacityType: pluginapi.CapacityOnDemand, Zones: []string{"us-central1-a"},
		Bootstrap: []byte(`{"version":1,"cellID":"` + cell + `"}`),
	}
}
