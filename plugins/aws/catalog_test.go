package aws

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/aws/catalog"
)

func TestGetInfo(t *testing.T) {
	info, err := New(nil).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInfo(info); err != nil {
		t.Error(err)
	}
	cat, _ := catalog.Load()
	if info.Name != "aws" || info.Catalog != cat.Info() || info.Catalog.GeneratedAt.IsZero() {
		t.Errorf("GetInfo = %+v, want name aws and the embedded catalog's provenance", info)
	}
	for _, c := range []pluginapi.Capability{pluginapi.CapabilitySpot, pluginapi.CapabilityGPU, pluginapi.CapabilitySecurityGroups,
		pluginapi.CapabilityInstanceProfiles, pluginapi.CapabilityVolumeSize, pluginapi.CapabilityWatchEvents,
		pluginapi.CapabilityInterruptionEvents, pluginapi.CapabilityRegistryAuth} {
		if !info.Has(c) {
			t.Errorf("GetInfo lacks capability %s", c)
		}
	}
	if !json.Valid([]byte(info.ConfigSchema)) {
		t.Error("the config schema is not JSON")
	}
}

func offeringsOf(types []pluginapi.InstanceType, name string) map[string]bool {
	out := map[string]bool{}
	for _, t := range types {
		if t.Name == name {
			for _, o := range t.Offerings {
				out[o.Zone+"/"+string(o.CapacityType)] = o.Available
			}
		}
	}
	return out
}

func TestListInstanceTypes(t *testing.T) {
	f := newFakeEC2(t)
	f.pageSize = 1
	f.offered = map[string][]string{"m5.large": {"us-east-1a", "us-east-1b"}, "c5.large": {"us-east-1b"}, "m6g.large": {"us-east-1a"}}
	p := configured(t, testConfig(f))
	ctx := t.Context()
	resp, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInstanceTypes(resp.InstanceTypes); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]bool{
		"m5.large":  {"us-east-1a/on-demand": true, "us-east-1a/spot": true, "us-east-1b/on-demand": true, "us-east-1b/spot": true},
		"c5.large":  {"us-east-1a/on-demand": false, "us-east-1a/spot": false, "us-east-1b/on-demand": true, "us-east-1b/spot": true},
		"t3.small":  {"us-east-1a/on-demand": false, "us-east-1a/spot": false, "us-east-1b/on-demand": false, "us-east-1b/spot": false},
		"m6g.large": {}, // arm64: the image is amd64
	}
	for name, w := range want {
		if diff := cmp.Diff(w, offeringsOf(resp.InstanceTypes, name)); diff != "" {
			t.Errorf("offerings of %s (-want +got):\n%s", name, diff)
		}
	}
	for _, it := range resp.InstanceTypes {
		if it.Arch != pluginapi.ArchAMD64 {
			t.Fatalf("type %s is %s; the image is amd64", it.Name, it.Arch)
		}
	}
	reqs := f.requests("DescribeInstanceTypeOfferings")
	if len(reqs) != 4 { // 4 offerings, pages of 1
		t.Errorf("%d DescribeInstanceTypeOfferings calls, want 4 pages", len(reqs))
	}
	if r := reqs[0]; r.Get("LocationType") != "availability-zone" || r.Get("Filter.1.Name") != "location" ||
		r.Get("Filter.1.Value.1") != "us-east-1a" || r.Get("Filter.1.Value.2") != "us-east-1b" {
		t.Errorf("DescribeInstanceTypeOfferings request = %v", r)
	}
	// Kept for an hour.
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.callCount("DescribeInstanceTypeOfferings"); n != 4 {
		t.Errorf("a second ListInstanceTypes called EC2 again (%d calls)", n)
	}
}

// Without ec2:DescribeInstanceTypeOfferings the catalog stands alone.
func TestListInstanceTypesWithoutOfferingsPermission(t *testing.T) {
	f := newFakeEC2(t)
	f.fail("DescribeInstanceTypeOfferings", codeUnauthorized, 403, 1)
	p := configured(t, with(testConfig(f), "image", map[string]any{"id": fakeARMAMI}))
	resp, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.InstanceTypes) < 100 {
		t.Fatalf("%d types, want the catalog's arm64 types", len(resp.InstanceTypes))
	}
	for _, it := range resp.InstanceTypes {
		if it.Arch != pluginapi.ArchARM64 {
			t.Fatalf("type %s is %s; the image is arm64", it.Name, it.Arch)
		}
		for _, o := range it.Offerings {
			if !o.Available {
				t.Fatalf("%s in %s is unavailable; without offerings every one is available", it.Name, o.Zone)
			}
		}
	}
}

func TestListInstanceTypesFailure(t *testing.T) {
	f := newFakeEC2(t)
	f.fail("DescribeInstanceTypeOfferings", codeRequestLimitExceeded, 503, 1)
	p := configured(t, testConfig(f))
	if _, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{}); !pluginapi.IsThrottled(err) {
		t.Errorf("ListInstanceTypes while throttled = %v, want Throttled", err)
	}
}

// An endpoint that knows no offerings (an answer with none) leaves the
// catalog as it is rather than make every type unavailable.
func TestListInstanceTypesWithNoOfferings(t *testing.T) {
	f := newFakeEC2(t)
	f.offered = map[string][]string{}
	p := configured(t, testConfig(f))
	resp, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := offeringsOf(resp.InstanceTypes, "m5.large"); !got["us-east-1a/on-demand"] || !got["us-east-1b/spot"] {
		t.Errorf("m5.large offerings = %v, want all available", got)
	}
}
