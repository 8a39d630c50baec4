package azure

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
)

// A VM's provisioning state and instance view map to the contract's
// states.
func TestStateFromAzure(t *testing.T) {
	status := func(code, message string) *armcompute.InstanceViewStatus {
		return &armcompute.InstanceViewStatus{Code: ptr(code), Message: ptr(message)}
	}
	for _, tc := range []struct {
		provisioning string
		statuses     []*armcompute.InstanceViewStatus
		state        pluginapi.InstanceState
		reason       string
	}{
		{"Creating", nil, pluginapi.StatePending, ""},
		{"Creating", []*armcompute.InstanceViewStatus{status("ProvisioningState/creating", "")}, pluginapi.StatePending, ""},
		{"Succeeded", nil, pluginapi.StatePending, ""},
		{"Succeeded", []*armcompute.InstanceViewStatus{status("ProvisioningState/succeeded", ""), status("PowerState/starting", "")}, pluginapi.StatePending, ""},
		{"Succeeded", []*armcompute.InstanceViewStatus{status("ProvisioningState/succeeded", ""), status("PowerState/running", "")}, pluginapi.StateRunning, ""},
		{"Updating", []*armcompute.InstanceViewStatus{status("PowerState/running", "")}, pluginapi.StateRunning, ""},
		{"Deleting", []*armcompute.InstanceViewStatus{status("PowerState/running", "")}, pluginapi.StateTerminating, "VM being deleted"},
		{"Succeeded", []*armcompute.InstanceViewStatus{status("PowerState/stopping", "")}, pluginapi.StateTerminating, "VM stopping outside Kip"},
		{"Succeeded", []*armcompute.InstanceViewStatus{status("PowerState/stopped", "")}, pluginapi.StateTerminated, "VM stopped outside Kip"},
		{"Succeeded", []*armcompute.InstanceViewStatus{status("PowerState/deallocated", "")}, pluginapi.StateTerminated, "VM deallocated outside Kip"},
		{"Failed", []*armcompute.InstanceViewStatus{status("ProvisioningState/failed/AllocationFailed", "Allocation failed.")}, pluginapi.StateTerminated,
			"VM provisioning failed: AllocationFailed: Allocation failed."},
	} {
		state, reason, _ := stateFromAzure(tc.provisioning, tc.statuses)
		if state != tc.state || reason != tc.reason {
			t.Errorf("%s %v: %s %q; want %s %q", tc.provisioning, len(tc.statuses), state, reason, tc.state, tc.reason)
		}
	}
}

// List pages through the VM and NIC lists, keeps only the cluster's cells,
// and gives each its NIC's address; Describe answers the cluster's from
// the view and another VM by GET (leaving out a VM that is no cell).
func TestListAndDescribe(t *testing.T) {
	f := newFakeARM(t)
	f.pageSize = 2
	p := configured(t, f, testConfig(f), func(p *provider) { p.SnapshotAge = 0 })
	for _, cell := range []string{"kip-a", "kip-b", "kip-c"} {
		if _, err := p.Launch(t.Context(), launchRequest(cell)); err != nil {
			t.Fatal(err)
		}
	}
	// A VM of another cluster, and one that is no cell.
	f.mu.Lock()
	f.vms["kip-other"] = &fakeVM{provisioning: "Succeeded", power: "running", ip: "10.1.0.99",
		body: map[string]any{"tags": map[string]any{"kip-cluster": "other", "kip-cell": "kip-other"}}}
	f.vms["jumpbox"] = &fakeVM{provisioning: "Succeeded", power: "running", ip: "10.1.0.98", body: map[string]any{}}
	f.mu.Unlock()
	list, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range list.Instances {
		got = append(got, in.ID+" "+string(in.State)+" "+in.Addresses[0].Address)
	}
	want := []string{"kip-a running 10.1.0.4", "kip-b running 10.1.0.5", "kip-c running 10.1.0.6"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("List = %q; want %q", got, want)
	}
	if f.callCount("VirtualMachines_List") < 3 || f.callCount("NetworkInterfaces_List") < 3 {
		t.Errorf("the lists were not paged: %d VM list pages, %d NIC list pages", f.callCount("VirtualMachines_List"), f.callCount("NetworkInterfaces_List"))
	}
	desc, err := p.Describe(t.Context(), &pluginapi.DescribeRequest{IDs: []string{"kip-b", "kip-other", "jumpbox", "kip-missing", "Not/AName"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range desc.Instances {
		ids = append(ids, in.ID)
	}
	if len(ids) != 2 || ids[0] != "kip-b" || ids[1] != "kip-other" {
		t.Errorf("Describe answered %q; want kip-b (the view) and kip-other (a cell, by GET)", ids)
	}
}
