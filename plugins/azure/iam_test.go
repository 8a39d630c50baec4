package azure

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// rolePath is the plugin's custom role, which operators create with
// az role definition create --role-definition.
const rolePath = "../../deploy/azure/role.json"

// actions are the Azure RBAC actions of every ARM operation the plugin
// calls (Azure's resource provider operations,
// https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations,
// and the linked access checks of a VM PUT with an inline NIC and OS
// disk: creating them, joining the subnet and the NSG, assigning the
// identity, reading a custom image; deleting them with the VM).
var actions = map[string][]string{
	"VirtualMachines_CreateOrUpdate": {
		"Microsoft.Compute/virtualMachines/write", "Microsoft.Compute/disks/write",
		"Microsoft.Network/networkInterfaces/write", "Microsoft.Network/networkInterfaces/join/action",
		"Microsoft.Network/virtualNetworks/subnets/join/action", "Microsoft.Network/networkSecurityGroups/join/action",
		"Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
		"Microsoft.Compute/galleries/images/versions/read", "Microsoft.Compute/images/read",
	},
	"VirtualMachines_Get": {"Microsoft.Compute/virtualMachines/read", "Microsoft.Compute/virtualMachines/instanceView/read"},
	// The PATCH of a VM's data disks, and the linked check on each disk
	// it attaches or detaches (its managedBy changes).
	"VirtualMachines_Update":    {"Microsoft.Compute/virtualMachines/write", "Microsoft.Compute/disks/write"},
	"Disks_Get":                 {"Microsoft.Compute/disks/read"},
	"VirtualMachines_List":      {"Microsoft.Compute/virtualMachines/read", "Microsoft.Compute/virtualMachines/instanceView/read"},
	"VirtualMachines_Delete":    {"Microsoft.Compute/virtualMachines/delete", "Microsoft.Compute/disks/delete", "Microsoft.Network/networkInterfaces/delete"},
	"Operations_Get":            {"Microsoft.Compute/locations/operations/read"},
	"ResourceSkus_List":         {"Microsoft.Compute/skus/read"},
	"NetworkInterfaces_List":    {"Microsoft.Network/networkInterfaces/read"},
	"NetworkInterfaces_Get":     {"Microsoft.Network/networkInterfaces/read"},
	"Subnets_Get":               {"Microsoft.Network/virtualNetworks/subnets/read"},
	"NetworkSecurityGroups_Get": {"Microsoft.Network/networkSecurityGroups/read"},
}

// The role is in az's --role-definition format and grants exactly the
// actions of the operations in actions, sorted, each once, and no data
// actions.
func TestRoleMatchesTheCalls(t *testing.T) {
	data, err := os.ReadFile(rolePath)
	if err != nil {
		t.Fatal(err)
	}
	var role struct {
		Name, Description                                string
		IsCustom                                         bool
		Actions, NotActions, DataActions, NotDataActions []string
		AssignableScopes                                 []string
	}
	if err := json.Unmarshal(data, &role); err != nil {
		t.Fatalf("%s: %v", rolePath, err)
	}
	if role.Name == "" || role.Description == "" || !role.IsCustom || len(role.AssignableScopes) == 0 {
		t.Errorf("%s lacks Name, Description, IsCustom or AssignableScopes", rolePath)
	}
	if len(role.NotActions)+len(role.DataActions)+len(role.NotDataActions) > 0 {
		t.Errorf("%s has NotActions or data actions; the plugin needs none", rolePath)
	}
	if !slices.IsSorted(role.Actions) || len(slices.Compact(slices.Clone(role.Actions))) != len(role.Actions) {
		t.Errorf("%s: Actions are not sorted and unique", rolePath)
	}
	var want []string
	for _, as := range actions {
		want = append(want, as...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if diff := cmp.Diff(want, role.Actions); diff != "" {
		t.Errorf("%s grants other actions than the plugin's calls need (-calls +role):\n%s", rolePath, diff)
	}
}

// Every operation in actions is one the plugin really calls, and it calls
// no other: a run through every Provider method (with an NSG, an identity
// and a gallery image, so that the PUT needs every action listed, and a
// failed launch, whose VM the plugin deletes) calls exactly those
// operations. With the test above, the role is exactly what a running
// plugin needs.
func TestEveryCalledOperationHasItsActions(t *testing.T) {
	f := newFakeARM(t)
	ctx := t.Context()
	cfg := testConfig(f)
	cfg["networkSecurityGroupID"] = fakeNSGID
	cfg["identity"] = "/subscriptions/" + fakeSub + "/resourceGroups/kip-id/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kip-cell"
	cfg["image"] = map[string]any{"id": "/subscriptions/" + fakeSub + "/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/kip-cell/versions/1.0.0"}
	p := configured(t, f, cfg, func(p *provider) { p.SnapshotAge = time.Millisecond })
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); err != nil {
		t.Fatal(err)
	}
	f.failAllocation("AllocationFailed", "no capacity", 1)
	if _, err := p.Launch(ctx, launchRequest("kip-iam")); !pluginapi.IsInsufficientCapacity(err) {
		t.Fatalf("the failing Launch: %v", err)
	}
	launched, err := p.Launch(ctx, launchRequest("kip-iam"))
	if err != nil {
		t.Fatal(err)
	}
	id := launched.Instance.ID
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id, "kip-elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	disk := f.addDisk("pv-iam", "1")
	vol := pluginapi.AttachVolumeRequest{InstanceID: id, Driver: volumeDriver, VolumeHandle: disk}
	if _, err := p.AttachVolume(ctx, &vol); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: volumeDriver, VolumeHandle: disk}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	var called []string
	for op, n := range f.calls {
		if n > 0 {
			called = append(called, op)
		}
	}
	f.mu.Unlock()
	slices.Sort(called)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(actions)), called); diff != "" {
		t.Errorf("operations called differ from the actions table (-table +called):\n%s", diff)
	}
	body := f.body("VirtualMachines_CreateOrUpdate", 0)
	if body["identity"] == nil {
		t.Error("the PUT has no identity: the test does not exercise its action")
	}
	nic := body["properties"].(map[string]any)["networkProfile"].(map[string]any)["networkInterfaceConfigurations"].([]any)[0].(map[string]any)
	if nic["properties"].(map[string]any)["networkSecurityGroup"] == nil {
		t.Error("the NIC has no NSG: the test does not exercise its action")
	}
}

// The SDK interfaces (sdk.go) name exactly the operations of actions,
// but Operations_Get, which the long-running operations' pollers call: an
// operation added to an interface without its actions, or actions left
// for an operation no longer callable, fails here.
func TestSDKInterfacesAreTheActions(t *testing.T) {
	got := []string{"Operations_Get"}
	for group, api := range map[string]reflect.Type{
		"VirtualMachines":       reflect.TypeFor[virtualMachinesAPI](),
		"ResourceSkus":          reflect.TypeFor[resourceSKUsAPI](),
		"Disks":                 reflect.TypeFor[disksAPI](),
		"NetworkInterfaces":     reflect.TypeFor[networkInterfacesAPI](),
		"Subnets":               reflect.TypeFor[subnetsAPI](),
		"NetworkSecurityGroups": reflect.TypeFor[networkSecurityGroupsAPI](),
	} {
		for i := range api.NumMethod() {
			op := strings.TrimPrefix(api.Method(i).Name, "Begin") // a long-running operation's
			if op == "NewListPager" {
				op = "List"
			}
			got = append(got, group+"_"+op)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(actions)), got); diff != "" {
		t.Errorf("sdk.go's operations differ from actions (-actions +sdk.go):\n%s", diff)
	}
}
