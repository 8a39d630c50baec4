package gce

import (
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

// ListInstanceTypes is the catalog for the configured zones, available
// where machineTypes.aggregatedList sells the type (custom types where
// their family is sold), without other architectures than the image's;
// the listing is asked once and kept.
func TestListInstanceTypes(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	resp, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	avail := map[string]map[string]bool{}
	for _, it := range resp.InstanceTypes {
		if it.Arch != pluginapi.ArchAMD64 {
			t.Errorf("%s is %s; the image is amd64", it.Name, it.Arch)
		}
		avail[it.Name] = map[string]bool{}
		for _, o := range it.Offerings {
			if o.Zone != "us-central1-a" && o.Zone != "us-central1-b" {
				t.Errorf("%s offered in %s", it.Name, o.Zone)
			}
			avail[it.Name][o.Zone+"/"+string(o.CapacityType)] = o.Available
		}
	}
	for _, tc := range []struct {
		typ, offering string
		want          bool
	}{
		{"e2-small", "us-central1-a/on-demand", true},
		{"e2-small", "us-central1-b/spot", true},
		{"g2-standard-4", "us-central1-a/on-demand", true},
		{"g2-standard-4", "us-central1-b/on-demand", false},
		{"n2-custom-2-4096", "us-central1-b/on-demand", true},
		{"c3-standard-4", "us-central1-a/on-demand", false},
	} {
		got, ok := avail[tc.typ][tc.offering]
		if !ok || got != tc.want {
			t.Errorf("%s %s: available %v (listed %v), want %v", tc.typ, tc.offering, got, ok, tc.want)
		}
	}
	if _, ok := avail["t2a-standard-1"]; ok {
		t.Error("an arm64 type is listed with an amd64 image")
	}
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.callCount("machineTypes.aggregatedList"); n != 1 {
		t.Errorf("%d machineTypes.aggregatedList, want 1 (cached)", n)
	}
}

// Without permission to list machine types, every offering is available.
func TestListInstanceTypesWithoutPermission(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	f.failHTTP("machineTypes.aggregatedList", 403, "forbidden", "Required 'compute.machineTypes.list' permission", 1)
	resp, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range resp.InstanceTypes {
		for _, o := range it.Offerings {
			if !o.Available {
				t.Fatalf("%s in %s unavailable without permission to ask", it.Name, o.Zone)
			}
		}
	}
}
