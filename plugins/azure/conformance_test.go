package azure

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
)

// The conformance suite over real gRPC, against the in-package fake ARM
// over TLS: every provider the factory returns is a "process" of the
// plugin talking to the same fake. The lead runs the same suite against
// the ARM simulator (test/cloudsim/azure).
func TestConformance(t *testing.T) {
	f := newFakeARM(t)
	good := testConfig(f)
	factory := func(log *slog.Logger) pluginapi.Provider {
		p := newProvider(f)
		p.Log = log
		return p
	}
	plugintest.Run(t, factory, plugintest.Config{
		Plugin: mustJSON(t, good),
		Invalid: []plugintest.InvalidConfig{
			{Config: mustJSON(t, with(good, "subscriptionID", nil)), Key: "subscriptionID"},
			{Config: mustJSON(t, with(good, "region", "eastus")), Key: "region"},
			{Config: mustJSON(t, with(good, "zones", []string{"1", "x"})), Key: "zones[1]"},
			{Config: mustJSON(t, with(good, "subnetID", fakeSubnetID+"-nowhere")), Key: "subnetID"},
			{Config: mustJSON(t, with(good, "image", map[string]any{"publisher": "Canonical"})), Key: "image.offer"},
			{Config: mustJSON(t, with(good, "rateLimit", map[string]any{"burst": -1})), Key: "rateLimit.burst"},
		},
		InstanceType:      "Standard_B2s",
		ReadyTimeout:      20 * time.Second,
		UnknownInstanceID: "kip-never-launched",
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, v := range f.vms {
		if v.provisioning != "Deleting" {
			t.Errorf("the suite left VM %s %s", name, v.provisioning)
		}
	}
}
