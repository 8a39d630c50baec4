package azure

import (
	"encoding/json"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/kipcell/kip/pluginapi"
)

const testCluster = "test-cluster"

// testConfig is a valid configuration for f: a static token, f's
// endpoint, two zones, the fake's subnet and a marketplace image.
func testConfig(f *fakeARM) map[string]any {
	return map[string]any{
		"subscriptionID":        fakeSub,
		"resourceGroup":         fakeRG,
		"location":              fakeLocation,
		"zones":                 []string{"1", "2"},
		"subnetID":              fakeSubnetID,
		"image":                 map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server"},
		"endpoint":              f.URL(),
		"withoutAuthentication": true,
		"sshPublicKey":          testSSHKey,
	}
}

// testSSHKey is an SSH public key line (the key itself is of no use).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKipKipKipKipKipKipKipKipKipKipKipKipKipKipKip kip-test"

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

// newProvider returns an unconfigured provider for f: f's TLS client,
// fast polling, and no SDK retries (a refusal reaches the plugin at once).
func newProvider(f *fakeARM) *provider {
	p := New(slog.New(slog.DiscardHandler)).(*provider)
	p.httpClient = f.srv.Client()
	p.retry = policy.RetryOptions{MaxRetries: -1}
	p.PollFast = 5 * time.Millisecond
	p.PollSlow = 20 * time.Millisecond
	p.PollBoot = 5 * time.Millisecond
	p.lroFrequency = 5 * time.Millisecond
	return p
}

// configured returns a provider configured with cfg for testCluster.
func configured(t testing.TB, f *fakeARM, cfg map[string]any, tweak ...func(*provider)) *provider {
	t.Helper()
	p := newProvider(f)
	for _, tw := range tweak {
		tw(p)
	}
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, NodeName: "kip", Config: mustJSON(t, cfg)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return p
}

// launchRequest is a request for cell in zone eastus-1.
func launchRequest(cell string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{
		CellID: cell, NodeName: "kip", PodUID: "uid-" + cell, PodNamespace: "default", PodName: cell,
		InstanceType: "Standard_B2s", CapacityType: pluginapi.CapacityOnDemand, Zones: []string{"eastus-1"},
		Bootstrap: []byte(`{"version":1,"cellID":"` + cell + `"}`),
	}
}
