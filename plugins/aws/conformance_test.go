package aws

import (
	"context"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
)

// The conformance suite over real gRPC, against the in-package fake: every
// provider the factory returns is a "process" of the plugin talking to the
// same fake EC2. test/e2e runs the same suite against the EC2 simulator.
func TestConformance(t *testing.T) {
	f := newFakeEC2(t)
	f.bootPolls = 2
	// New as it is: the SDK retries what fails on the way (a connection
	// that a cancelled call's transport closed under the next call).
	factory := New
	good := testConfig(f)
	plugintest.Run(t, factory, plugintest.Config{
		// One zone's subnet: the volume cases attach a disk of the
		// instances' zone to two of them, and one of OtherZone.
		Plugin: mustJSON(t, with(good, "subnets", []string{"subnet-0a"})),
		Invalid: []plugintest.InvalidConfig{
			{Config: mustJSON(t, with(good, "region", nil)), Key: "region"},
			{Config: mustJSON(t, with(good, "regions", "us-east-1")), Key: "regions"},
			{Config: mustJSON(t, with(good, "subnets", []string{"subnet-0a", "subnet-0dead"})), Key: "subnets[1]"},
			{Config: mustJSON(t, with(good, "image", map[string]any{"id": "ami-0dead"})), Key: "image.id"},
			{Config: mustJSON(t, with(good, "rateLimit", map[string]any{"burst": -1})), Key: "rateLimit.burst"},
		},
		InstanceType: "m5.large",
		ReadyTimeout: 20 * time.Second,
		CreateVolume: func(_ context.Context, zone string) (string, error) { return f.addVolume(zone), nil },
		DeleteVolume: func(_ context.Context, id string) error { return f.deleteVolume(id) },
		OtherZone:    "us-east-1b",
		// EC2 refuses no EBS volume type on the plugin's instance types:
		// every type attaches to every Nitro instance (the refusals
		// AttachVolume documents, an encrypted volume on a type without
		// EBS encryption and a Marketplace product code, concern no type
		// of the catalog).
		NoIncompatibleVolume: "EC2 attaches every EBS volume type to every instance type of the plugin's catalog",
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, v := range f.volumes {
		t.Errorf("the suite left volume %s (zone %s) attached to %q", id, v.zone, v.instance)
	}
	for id, i := range f.instances {
		if i.state != "shutting-down" && i.state != "terminated" {
			t.Errorf("the suite left instance %s (cell %s) %s", id, i.tags[pluginapi.TagCell], i.state)
		}
	}
}
