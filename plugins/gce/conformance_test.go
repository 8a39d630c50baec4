package gce

import (
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
	good := testConfig(f)
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
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, in := range f.instances {
		if !in.deleting {
			t.Errorf("the suite left instance %s %s", id, in.status)
		}
	}
}
