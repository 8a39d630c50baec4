package gce

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi/plugintest"
)

// The conformance suite over real gRPC, against the in-package fake: every
// provider the factory returns is a "process" of the plugin talking to the
// same fake Compute Engine. The lead runs the same suite against the
// Compute simulator (test/cloudsim/gce).
func TestConformance(t *testing.T) {
	f := newFakeCompute(t)
	var disks atomic.Int64
	// One zone: the volume cases attach a disk of one instance's zone to
	// another instance, and the plugin spreads cells without a zone over
	// its zones (by cell ID). OtherZone is where the wrong-zone case makes
	// its disk.
	good := with(testConfig(f), "zones", []string{"us-central1-a"})
	plugintest.Run(t, New, plugintest.Config{
		Plugin: mustJSON(t, good),
		Invalid: []plugintest.InvalidConfig{
			{Config: mustJSON(t, with(good, "project", nil)), Key: "project"},
			{Config: mustJSON(t, with(good, "zone", "us-central1-a")), Key: "zone"},
			{Config: mustJSON(t, with(good, "zones", []string{"us-central1-a", "europe-west1-b"})), Key: "zones[1]"},
			{Config: mustJSON(t, with(good, "subnetwork", "nowhere")), Key: "subnetwork"},
			{Config: mustJSON(t, with(good, "image", map[string]any{"family": "none"})), Key: "image.family"},
			{Config: mustJSON(t, with(good, "rateLimit", map[string]any{"burst": -1})), Key: "rateLimit.burst"},
		},
		InstanceType:      "e2-small",
		ReadyTimeout:      20 * time.Second,
		UnknownInstanceID: "us-central1-a/kip-never-launched",
		OtherZone:         "us-central1-b",
		CreateVolume: func(_ context.Context, zone string) (string, error) {
			return f.addDisk(zone, fmt.Sprintf("kip-disk-%d", disks.Add(1))), nil
		},
		DeleteVolume: func(_ context.Context, handle string) error { return f.removeDisk(handle) },
		// This fake's disks have no type; the simulator's do, and
		// test/cloudsim/gce/sdktest runs the case against it.
		NoIncompatibleVolume: "the package's fake of Compute Engine models no disk types (test/cloudsim/gce/sdktest runs this case against the simulator)",
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, in := range f.instances {
		if !in.deleting {
			t.Errorf("the suite left instance %s %s", id, in.status)
		}
	}
}
