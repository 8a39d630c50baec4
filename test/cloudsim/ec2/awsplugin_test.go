package ec2sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
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
	sim := ec2sim.New(ec2sim.Options{BootDelay: 200 * time.Millisecond, VolumeDelay: 150 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
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
	volumes := newVolumeHooks(t, url)
	plugintest.Run(t, aws.New, plugintest.Config{
		// One zone's subnet: the volume cases attach a disk of the
		// instances' zone to two instances, and one of OtherZone to one.
		Plugin: config(func(c map[string]any) { c["subnets"] = []string{"subnet-00000000000000001"} }),
		Invalid: []plugintest.InvalidConfig{
			{Config: config(func(c map[string]any) { delete(c, "region") }), Key: "region"},
			{Config: config(func(c map[string]any) { c["subnets"] = []string{"subnet-0dead0dead0dead0de"} }), Key: "subnets[0]"},
			{Config: config(func(c map[string]any) {
				c["image"] = map[string]any{"owner": ec2sim.DebianOwnerID, "name": "nothing-*"}
			}), Key: "image.name"},
		},
		InstanceType: "t3.small",
		ReadyTimeout: 30 * time.Second,
		CreateVolume: volumes.create,
		DeleteVolume: volumes.delete,
		OtherZone:    "us-east-1b",
		// EC2 refuses no EBS volume type on the plugin's instance types:
		// every type attaches to every Nitro instance (the refusals
		// AttachVolume documents, an encrypted volume on a type without
		// EBS encryption and a Marketplace product code, concern no type
		// of the catalog).
		NoIncompatibleVolume: "EC2 attaches every EBS volume type to every instance type of the plugin's catalog",
	})
	for _, v := range sim.Volumes() {
		if v.Attachment.Root {
			continue // deleted with its instance
		}
		t.Errorf("the suite left volume %s (zone %s) %s, attached %+v", v.ID, v.Zone, v.State, v.Attachment)
	}
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

// volumeHooks create and delete volumes for the conformance suite through
// the real SDK client, as the EBS CSI driver's controller does: create,
// then wait for available; delete once the volume is no longer in use.
type volumeHooks struct {
	client *ec2.Client
}

func newVolumeHooks(t *testing.T, url string) *volumeHooks {
	return &volumeHooks{client: ec2.New(ec2.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSIM", "secret", ""),
		BaseEndpoint: awssdk.String(url),
	})}
}

func (h *volumeHooks) create(ctx context.Context, zone string) (string, error) {
	out, err := h.client.CreateVolume(ctx, &ec2.CreateVolumeInput{
		AvailabilityZone: awssdk.String(zone), Size: awssdk.Int32(1), VolumeType: types.VolumeTypeGp3, Encrypted: awssdk.Bool(true),
		ClientToken: awssdk.String(fmt.Sprintf("plugintest-%d", time.Now().UnixNano())),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume,
			Tags: []types.Tag{{Key: awssdk.String(pluginapi.TagCluster), Value: awssdk.String("plugintest")}}}},
	})
	if err != nil {
		return "", fmt.Errorf("creating a volume in %s: %w", zone, err)
	}
	id := awssdk.ToString(out.VolumeId)
	for {
		d, err := h.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() == "InvalidVolume.NotFound":
			// Not visible yet: EC2 is eventually consistent.
		case err != nil:
			return id, fmt.Errorf("describing new volume %s: %w", id, err)
		case len(d.Volumes) == 1 && d.Volumes[0].State == types.VolumeStateAvailable:
			return id, nil
		}
		select {
		case <-ctx.Done():
			return id, fmt.Errorf("waiting for volume %s to be available: %w", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// delete deletes a volume, waiting while EC2 answers VolumeInUse (the
// suite's instances are terminating and their volumes detaching), then
// until DescribeVolumes no longer shows it.
func (h *volumeHooks) delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := h.client.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: awssdk.String(id)})
		var ae smithy.APIError
		switch {
		case err == nil:
			_, err = h.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
			if errors.As(err, &ae) && ae.ErrorCode() == "InvalidVolume.NotFound" {
				return nil
			}
		case errors.As(err, &ae) && ae.ErrorCode() == "InvalidVolume.NotFound":
			return nil
		case !errors.As(err, &ae) || ae.ErrorCode() != "VolumeInUse":
			return fmt.Errorf("deleting volume %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deleting volume %s, still there: %w", id, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
