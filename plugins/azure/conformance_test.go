package azure

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
)

// The conformance suite over real gRPC, against the in-package fake ARM
// over TLS: every provider the factory returns is a "process" of the
// plugin talking to the same fake. The lead runs the same suite against
// the ARM simulator (test/cloudsim/azure/sdktest), where the volume cases
// also follow ARM's operations and refusals; the fake attaches and
// detaches at once.
func TestConformance(t *testing.T) {
	f := newFakeARM(t)
	var disks atomic.Int64
	// One zone: the plugin spreads cells without a zone over its zones by
	// cell ID, and the volume-in-use case needs two instances in one zone.
	// The wrong-zone case's disks go to zone 2 (OtherZone).
	good := with(testConfig(f), "zones", []string{"1"})
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
		OtherZone:         fakeLocation + "-2",
		CreateVolume: func(_ context.Context, zone string) (string, error) {
			return f.addDisk(fmt.Sprintf("pv-%d", disks.Add(1)), strings.TrimPrefix(zone, fakeLocation+"-")), nil
		},
		// This fake's disks have no SKU; the simulator's do, and
		// test/cloudsim/azure/sdktest runs the case against it.
		NoIncompatibleVolume: "the package's fake of ARM models no disk SKUs (test/cloudsim/azure/sdktest runs this case against the simulator)",
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, v := range f.vms {
		if v.provisioning != "Deleting" {
			t.Errorf("the suite left VM %s %s", name, v.provisioning)
		}
	}
}
