package ec2sim_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/plugins/aws"
	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
)

// TestAWSPluginConformance runs the plugin conformance suite on the aws
// plugin against the simulator: the real SDK over HTTP, EC2's states,
// idempotency and validation.
func TestAWSPluginConformance(t *testing.T) {
	sim := ec2sim.New(ec2sim.Options{BootDelay: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	config := func(edit func(map[string]any)) []byte {
		c := map[string]any{
			"region": "us-east-1", "endpointURL": url, "ecrEndpointURL": url,
			"credentials": map[string]any{"accessKeyID": "AKIDSIM", "secretAccessKey": "secret"},
			"vpcID":       ec2sim.DefaultVPCID,
			"image":       map[string]any{"owner": ec2sim.DebianOwnerID, "name": "debian-12-amd64-*"},
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
	plugintest.Run(t, aws.New, plugintest.Config{
		Plugin: config(nil),
		Invalid: []plugintest.InvalidConfig{
			{Config: config(func(c map[string]any) { delete(c, "region") }), Key: "region"},
			{Config: config(func(c map[string]any) { c["subnets"] = []string{"subnet-0dead0dead0dead0de"} }), Key: "subnets[0]"},
			{Config: config(func(c map[string]any) {
				c["image"] = map[string]any{"owner": ec2sim.DebianOwnerID, "name": "nothing-*"}
			}), Key: "image.name"},
		},
		InstanceType: "t3.small",
		ReadyTimeout: 30 * time.Second,
	})
	for _, in := range sim.Instances() {
		if in.State != "shutting-down" && in.State != "terminated" {
			t.Errorf("the suite left instance %s %s", in.ID, in.State)
		}
		// Every instance has a secondary private address, its pod's.
		if len(in.SecondaryIPs) != 1 {
			t.Errorf("instance %s: secondary private addresses %v, want one (the pod's)", in.ID, in.SecondaryIPs)
		}
		// The launch settings a real account needs, as EC2 recorded them.
		got := []any{in.MetadataHTTPTokens, in.MetadataHopLimit, in.MetadataTags, in.ShutdownBehavior, len(in.BlockDevices)}
		want := []any{"required", 1, "disabled", "terminate", 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("instance %s: HttpTokens, hop limit, metadata tags, shutdown behaviour, block devices (-want +got):\n%s", in.ID, diff)
		} else if bd := in.BlockDevices[0]; bd.DeviceName != "/dev/xvda" || bd.Encrypted == nil || !*bd.Encrypted || bd.KMSKeyID != "" {
			t.Errorf("instance %s: root volume %+v, want /dev/xvda encrypted with the default key", in.ID, bd)
		}
	}
	t.Logf("EC2 calls: %v", sim.Calls())
}

// Each refusal of RunInstances the simulator injects reaches the host as
// the kind its reaction needs (plugins/aws/errors.go says why).
func TestAWSPluginLaunchErrorCodes(t *testing.T) {
	sim := ec2sim.New(ec2sim.Options{Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	config, err := json.Marshal(map[string]any{
		"region": "us-east-1", "endpointURL": url, "ecrEndpointURL": url,
		"credentials": map[string]any{"accessKeyID": "AKIDSIM", "secretAccessKey": "secret"},
		"vpcID":       ec2sim.DefaultVPCID,
		"image":       map[string]any{"owner": ec2sim.DebianOwnerID, "name": "debian-12-amd64-*"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := aws.New(slog.New(slog.DiscardHandler))
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "sim", NodeName: "kip", Config: config}); err != nil {
		t.Fatal(err)
	}
	want := map[string]func(error) bool{
		"MaxSpotInstanceCountExceeded": func(err error) bool {
			var q *pluginapi.QuotaExceededError
			return errors.As(err, &q) && q.CapacityType == pluginapi.CapacitySpot && len(q.InstanceTypes) == 0
		},
		"VcpuLimitExceeded": func(err error) bool {
			var q *pluginapi.QuotaExceededError
			return errors.As(err, &q) && q.CapacityType == pluginapi.CapacitySpot && slices.Contains(q.InstanceTypes, "t3.small") &&
				slices.Contains(q.InstanceTypes, "m5.large") && !slices.Contains(q.InstanceTypes, "p3.2xlarge")
		},
		"InstanceLimitExceeded": func(err error) bool {
			var q *pluginapi.QuotaExceededError
			return errors.As(err, &q) && q.CapacityType == pluginapi.CapacitySpot && len(q.InstanceTypes) == 0
		},
		"Unsupported": pluginapi.IsInsufficientCapacity,
		"AuthFailure.ServiceLinkedRoleCreationNotPermitted": pluginapi.IsInvalidConfig,
		"InstanceCreditSpecification.NotSupported":          pluginapi.IsUnsupported,
		"InvalidBlockDeviceMapping":                         pluginapi.IsUnsupported,
	}
	for code := range ec2sim.LaunchErrorCodes {
		t.Run(code, func(t *testing.T) {
			is := want[code]
			if is == nil {
				t.Fatalf("no expectation for %s", code)
			}
			sim.InjectLaunchError(code, 1)
			_, err := p.Launch(t.Context(), &pluginapi.LaunchRequest{
				CellID: "cell-" + strings.ToLower(strings.ReplaceAll(code, ".", "-")), NodeName: "kip", PodUID: "uid",
				InstanceType: "t3.small", CapacityType: pluginapi.CapacitySpot, Bootstrap: []byte(`{}`),
			})
			if err == nil || !is(err) || !strings.Contains(err.Error(), code) {
				t.Errorf("Launch with %s injected = %v", code, err)
			}
		})
	}
	if n := len(sim.Instances()); n != 0 {
		t.Errorf("%d instances launched, want none", n)
	}
}
