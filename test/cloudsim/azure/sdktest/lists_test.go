package sdktest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/google/go-cmp/cmp"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// TestListsAndPages: VirtualMachines_List (with the instance view),
// ListAll (statusOnly) and NetworkInterfaces_List come in pages of
// PageSize that the SDK's pagers follow through nextLink.
func TestListsAndPages(t *testing.T) {
	sim, c := startSim(t, azuresim.Options{PageSize: 2, ResourceGroups: []string{rg, "other-rg"}})
	ctx := t.Context()
	var want []string
	for i := range 5 {
		s := spec{name: fmt.Sprintf("kip-list-%d", i), zone: "1"}
		mustCreate(t, c, s)
		want = append(want, s.name)
	}
	var got, ips []string
	pages := 0
	pager := c.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		for _, vm := range page.Value {
			got = append(got, *vm.Name)
			if _, codes := states(*vm); !slices.Contains(codes, "PowerState/running") {
				t.Errorf("%s listed with statuses %v; want the instance view", *vm.Name, codes)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" || pages != 3 {
		t.Errorf("listed in %d pages (-want +got):\n%s", pages, diff)
	}

	got = nil
	all := c.vms.NewListAllPager(&armcompute.VirtualMachinesClientListAllOptions{StatusOnly: to.Ptr("true")})
	for all.More() {
		page, err := all.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, vm := range page.Value {
			got = append(got, *vm.Name)
			if vm.Properties.InstanceView == nil {
				t.Errorf("%s: no instance view with statusOnly", *vm.Name)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListAll (-want +got):\n%s", diff)
	}

	nics := c.nics.NewListPager(rg, nil)
	for nics.More() {
		page, err := nics.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Value {
			ip := str(n.Properties.IPConfigurations[0].Properties.PrivateIPAddress)
			vm, _ := sim.VM(rg, strings.TrimSuffix(*n.Name, "-nic"))
			if ip == "" || ip != vm.Address {
				t.Errorf("NIC %s: ip %q, want its VM's %q", *n.Name, ip, vm.Address)
			}
			ips = append(ips, ip)
		}
	}
	if len(ips) != 5 {
		t.Errorf("%d NICs listed, want 5", len(ips))
	}
	// Another resource group is empty; one that does not exist is 404.
	if page, err := c.vms.NewListPager("other-rg", nil).NextPage(ctx); err != nil || len(page.Value) != 0 {
		t.Errorf("other-rg: %v, %v; want empty", page.Value, err)
	}
	if _, err := c.vms.NewListPager("nope", nil).NextPage(ctx); !isCode(err, 404, "ResourceGroupNotFound") {
		t.Errorf("a resource group that does not exist: %v; want 404 ResourceGroupNotFound", err)
	}
	// ARM's VM list filters by scale set only, not by tag.
	tagFilter := "tagName eq 'kip-cluster'"
	if _, err := c.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Filter: &tagFilter}).NextPage(ctx); !isCode(err, 400, "InvalidParameter") {
		t.Errorf("a tag filter: %v; want 400 InvalidParameter", err)
	}
	calls := sim.Calls()
	if calls["VirtualMachines_List"] != 3+3 || calls["VirtualMachines_ListAll"] != 3 || calls["NetworkInterfaces_List"] != 3 {
		t.Errorf("calls %v; want 6 List (3 pages, 3 more), 3 ListAll, 3 NetworkInterfaces_List", calls)
	}
}

// TestDetachedNIC: a NIC whose deleteOption is not Delete stays after its
// VM, detached, as Azure leaves it.
func TestDetachedNIC(t *testing.T) {
	_, c := startSim(t, azuresim.Options{})
	ctx := t.Context()
	body := vmBody(spec{name: "kip-keep"})
	body.Properties.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.DeleteOption = nil
	p, err := c.vms.BeginCreateOrUpdate(ctx, rg, "kip-keep", body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	if err := remove(ctx, c, "kip-keep"); err != nil {
		t.Fatal(err)
	}
	n, err := c.nics.Get(ctx, rg, "kip-keep-nic", nil)
	if err != nil || n.Properties.VirtualMachine != nil {
		t.Errorf("NIC after its VM: %v, %v; want it detached", n.Properties, err)
	}
}

// TestResourceSkus: the location's sizes with their capabilities and
// zones, and the restrictions SkuNotAvailable sets.
func TestResourceSkus(t *testing.T) {
	sizes := []azuresim.Size{
		{Name: "Standard_D2s_v3", VCPUs: 2, MemoryMiB: 8192},
		{Name: "Standard_NC6s_v3", VCPUs: 6, MemoryMiB: 114688, GPUs: 1, Zones: []string{"1"}},
		{Name: "Standard_B2s", VCPUs: 2, MemoryMiB: 4096},
	}
	sim, c := startSim(t, azuresim.Options{Sizes: sizes, PageSize: 2})
	ctx := t.Context()
	sim.SkuNotAvailable("Standard_D2s_v3", "2")
	sim.SkuNotAvailable("Standard_B2s", "")
	type sku struct {
		Family, VCPUs, MemoryGB, GPUs string
		Zones                         []string
		Restriction                   string
		RestrictedZones               []string
	}
	got := map[string]sku{}
	pager := c.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: to.Ptr("location eq 'eastus'")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Value {
			k := sku{Family: str(s.Family)}
			for _, cp := range s.Capabilities {
				switch *cp.Name {
				case "vCPUs":
					k.VCPUs = *cp.Value
				case "MemoryGB":
					k.MemoryGB = *cp.Value
				case "GPUs":
					k.GPUs = *cp.Value
				}
			}
			for _, z := range s.LocationInfo[0].Zones {
				k.Zones = append(k.Zones, *z)
			}
			for _, r := range s.Restrictions {
				k.Restriction = string(*r.Type)
				for _, z := range r.RestrictionInfo.Zones {
					k.RestrictedZones = append(k.RestrictedZones, *z)
				}
			}
			got[*s.Name] = k
		}
	}
	want := map[string]sku{
		"Standard_D2s_v3":  {Family: "standardDSv3Family", VCPUs: "2", MemoryGB: "8", GPUs: "0", Zones: []string{"1", "2", "3"}, Restriction: "Zone", RestrictedZones: []string{"2"}},
		"Standard_NC6s_v3": {Family: "standardNCSv3Family", VCPUs: "6", MemoryGB: "112", GPUs: "1", Zones: []string{"1"}},
		"Standard_B2s":     {Family: "standardBSFamily", VCPUs: "2", MemoryGB: "4", GPUs: "0", Zones: []string{"1", "2", "3"}, Restriction: "Location"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SKUs (-want +got):\n%s", diff)
	}
	// A size a zone does not offer is SkuNotAvailable there.
	if _, err := begin(ctx, c, spec{name: "kip-gpu", size: "Standard_NC6s_v3", zone: "2"}); !isCode(err, 409, "SkuNotAvailable") {
		t.Errorf("NC6s_v3 in zone 2: %v; want 409 SkuNotAvailable", err)
	}
	if page, err := c.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: to.Ptr("location eq 'westus'")}).NextPage(ctx); err != nil || len(page.Value) != 0 {
		t.Errorf("another location: %d SKUs, %v; want none", len(page.Value), err)
	}
}

// TestSubnetAndSecurityGroup: Subnets_Get and NetworkSecurityGroups_Get,
// which the plugin's Configure checks.
func TestSubnetAndSecurityGroup(t *testing.T) {
	_, c := startSim(t, azuresim.Options{})
	ctx := t.Context()
	sn, err := c.subnets.Get(ctx, rg, "kip-vnet", "default", nil)
	if err != nil || str(sn.ID) != subnetID || str(sn.Properties.AddressPrefix) != "10.0.0.0/24" {
		t.Errorf("subnet: %+v, %v", sn.Subnet, err)
	}
	if _, err := c.subnets.Get(ctx, rg, "kip-vnet", "none", nil); !is404(err) {
		t.Errorf("a subnet that does not exist: %v; want 404", err)
	}
	g, err := c.nsgs.Get(ctx, rg, "kip-nsg", nil)
	if err != nil || str(g.ID) != nsgID {
		t.Errorf("security group: %+v, %v", g.SecurityGroup, err)
	}
	if _, err := c.nsgs.Get(ctx, rg, "none", nil); !is404(err) {
		t.Errorf("a security group that does not exist: %v; want 404", err)
	}
}
