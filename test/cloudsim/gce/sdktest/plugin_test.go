package sdktest

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/plugins/gce"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// TestGCEPluginConformance runs the plugin conformance suite on the gce
// plugin against the simulator: the real compute v1.74.0 clients over
// HTTP, GCE's states, operations, idempotency and validation.
func TestGCEPluginConformance(t *testing.T) {
	sim := gcesim.New(gcesim.Options{Project: project, BootDelay: 200 * time.Millisecond, OperationDelay: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	config := func(edit func(map[string]any)) []byte {
		c := map[string]any{
			"project": project, "region": "us-central1", "subnetwork": "default",
			"image":    map[string]any{"project": "debian-cloud", "family": "debian-12"},
			"endpoint": url, "withoutAuthentication": true,
		}
		if edit != nil {
			edit(c)
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	plugintest.Run(t, gce.New, plugintest.Config{
		Plugin: config(nil),
		Invalid: []plugintest.InvalidConfig{
			{Config: config(func(c map[string]any) { delete(c, "project") }), Key: "project"},
			{Config: config(func(c map[string]any) { c["subnetwork"] = "nowhere" }), Key: "subnetwork"},
			{Config: config(func(c map[string]any) {
				c["image"] = map[string]any{"project": "debian-cloud", "family": "debian-99"}
			}), Key: "image.family"},
			{Config: config(func(c map[string]any) { c["zones"] = []string{"us-central1-a", "europe-west1-b"} }), Key: "zones[1]"},
		},
		InstanceType:      "e2-small",
		ReadyTimeout:      30 * time.Second,
		UnknownInstanceID: "us-central1-a/kip-never-launched",
	})
	for _, in := range sim.Instances() {
		if in.Status != "STOPPING" && in.Status != "TERMINATED" && !in.Gone {
			t.Errorf("the suite left instance %s/%s %s", in.Zone, in.Name, in.Status)
		}
		// Every instance that got an address has the pod's alias IP.
		if in.Address != "" && in.AliasIP == "" {
			t.Errorf("instance %s/%s at %s has no alias IP (the pod's)", in.Zone, in.Name, in.Address)
		}
	}
	t.Logf("Compute calls: %v", sim.Calls())
}
