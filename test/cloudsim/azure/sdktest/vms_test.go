package sdktest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/google/go-cmp/cmp"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// TestVMLifecycle drives one VM through BeginCreateOrUpdate and BeginDelete
// with the SDK's pollers against a clock the test moves: 201 with
// Azure-AsyncOperation, the operation InProgress until the VM runs,
// Succeeded, the final GET; then 202, Deleting, gone, 404 ResourceNotFound.
func TestVMLifecycle(t *testing.T) {
	clock := newClock()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, AllocationDelay: 10 * time.Second, BootDelay: 30 * time.Second, ShutdownDelay: 20 * time.Second})
	ctx := t.Context()
	s := spec{name: "kip-0d1c6a4e", zone: "2", bootstrap: `{"cellID":"kip-0d1c6a4e"}`, tags: map[string]string{"kip-cluster": "c1", "kip-cell": "default/web"}}

	p, err := begin(ctx, c, s)
	if err != nil {
		t.Fatalf("BeginCreateOrUpdate: %v", err)
	}
	if p.Done() {
		t.Fatal("the create's poller is done at once; want it to follow the operation")
	}
	assertState(t, c, s.name, "Creating", []string{"ProvisioningState/creating"})
	if done, err := pollOnce(ctx, p); err != nil || done {
		t.Fatalf("poll before the boot: done %v, %v; want InProgress", done, err)
	}
	clock.Advance(15 * time.Second) // allocated, booting
	assertState(t, c, s.name, "Creating", []string{"ProvisioningState/creating", "PowerState/starting"})
	clock.Advance(30 * time.Second)
	r, err := p.PollUntilDone(ctx, pollEvery)
	if err != nil {
		t.Fatalf("PollUntilDone: %v", err)
	}
	vm := r.VirtualMachine
	in, _ := sim.VM(rg, s.name)
	want := map[string]string{
		"id":       "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/" + s.name,
		"name":     s.name,
		"type":     "Microsoft.Compute/virtualMachines",
		"location": location,
		"state":    "Succeeded",
		"vmId":     in.VMID,
		"size":     size,
		"zone":     "2",
		"nic":      "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/networkInterfaces/" + s.name + "-nic",
		"tag":      "c1",
		"priority": "",
	}
	got := map[string]string{
		"id": str(vm.ID), "name": str(vm.Name), "type": str(vm.Type), "location": str(vm.Location),
		"state": str(vm.Properties.ProvisioningState), "vmId": str(vm.Properties.VMID),
		"size": string(*vm.Properties.HardwareProfile.VMSize), "zone": *vm.Zones[0],
		"nic": str(vm.Properties.NetworkProfile.NetworkInterfaces[0].ID), "tag": str(vm.Tags["kip-cluster"]),
		"priority": "",
	}
	if vm.Properties.Priority != nil {
		got["priority"] = string(*vm.Properties.Priority)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the created VM (-want +got):\n%s", diff)
	}
	if vm.Properties.UserData != nil || vm.Properties.InstanceView != nil {
		t.Errorf("userData %v, instance view %v without $expand; ARM leaves them out", vm.Properties.UserData, vm.Properties.InstanceView)
	}
	assertState(t, c, s.name, "Succeeded", []string{"ProvisioningState/succeeded", "PowerState/running"})
	ud, err := c.vms.Get(ctx, rg, s.name, &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesUserData)})
	if err != nil || str(ud.Properties.UserData) != base64.StdEncoding.EncodeToString([]byte(s.bootstrap)) {
		t.Errorf("$expand=userData: %v, %v; want the bootstrap", str(ud.Properties.UserData), err)
	}
	if string(in.Bootstrap) != s.bootstrap {
		t.Errorf("the cell's bootstrap %q, want %q", in.Bootstrap, s.bootstrap)
	}
	iv, err := c.vms.InstanceView(ctx, rg, s.name, nil)
	if err != nil || len(iv.Statuses) != 2 || str(iv.Statuses[1].Code) != "PowerState/running" || str(iv.ComputerName) != s.name {
		t.Errorf("instanceView: %+v, %v", iv.VirtualMachineInstanceView, err)
	}

	checkNIC(t, c, s.name, in.Address, str(vm.ID))

	// Delete: 202, Deleting for the shutdown delay, then gone with its NIC.
	dp, err := c.vms.BeginDelete(ctx, rg, s.name, nil)
	if err != nil {
		t.Fatalf("BeginDelete: %v", err)
	}
	assertState(t, c, s.name, "Deleting", []string{"ProvisioningState/deleting", "PowerState/stopped"})
	if done, err := pollOnce(ctx, dp); err != nil || done {
		t.Fatalf("poll of the delete before the shutdown: done %v, %v", done, err)
	}
	clock.Advance(20 * time.Second)
	if _, err := dp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatalf("delete's PollUntilDone: %v", err)
	}
	if _, err := get(ctx, c, s.name); !is404(err) {
		t.Errorf("GET after the delete: %v; want 404 ResourceNotFound", err)
	}
	if _, err := c.nics.Get(ctx, rg, s.name+"-nic", nil); !is404(err) {
		t.Errorf("NIC after the delete: %v; want 404 ResourceNotFound", err)
	}
	// Deleting what does not exist is 204: done at once.
	if err := remove(ctx, c, s.name); err != nil {
		t.Errorf("deleting a VM that does not exist: %v", err)
	}
	calls := sim.Calls()
	for _, op := range []string{"VirtualMachines_CreateOrUpdate", "VirtualMachines_Get", "VirtualMachines_InstanceView", "VirtualMachines_Delete", "Operations_Get", "NetworkInterfaces_Get"} {
		if calls[op] == 0 {
			t.Errorf("no %s counted: %v", op, calls)
		}
	}
	if calls["VirtualMachines_Delete"] != 2 || calls["VirtualMachines_CreateOrUpdate"] != 1 {
		t.Errorf("calls %v; want 1 PUT and 2 DELETEs", calls)
	}
}

func is404(err error) bool {
	status, code := respErr(err)
	return status == http.StatusNotFound && code == "ResourceNotFound"
}

// assertState reads the VM with its instance view and checks its
// provisioning state and statuses.
func assertState(t *testing.T, c clients, name, state string, codes []string) {
	t.Helper()
	vm, err := get(t.Context(), c, name)
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	gotState, gotCodes := states(vm)
	if gotState != state || !cmp.Equal(gotCodes, codes) {
		t.Errorf("%s: %s %v; want %s %v", name, gotState, gotCodes, state, codes)
	}
}

// checkNIC checks that the VM's NIC has its address and names it, its
// subnet and security group.
func checkNIC(t *testing.T, c clients, name, address, vmID string) {
	t.Helper()
	ctx := t.Context()
	nic, err := c.nics.Get(ctx, rg, name+"-nic", nil)
	if err != nil {
		t.Fatalf("getting the NIC: %v", err)
	}
	ip := nic.Properties.IPConfigurations[0].Properties
	if str(ip.PrivateIPAddress) != address || address == "" || str(ip.Subnet.ID) != subnetID ||
		str(nic.Properties.VirtualMachine.ID) != vmID || str(nic.Properties.NetworkSecurityGroup.ID) != nsgID {
		t.Errorf("NIC: ip %s subnet %s vm %s nsg %s; want %s, the subnet, the VM, the NSG",
			str(ip.PrivateIPAddress), str(ip.Subnet.ID), str(nic.Properties.VirtualMachine.ID), str(nic.Properties.NetworkSecurityGroup.ID), address)
	}

}

// TestPodIPConfiguration: a NIC with a second IP configuration (the pod's,
// as the plugin asks) shows both, the second not primary, with an address
// of its own once the cell has one; the simulator's VM names it.
func TestPodIPConfiguration(t *testing.T) {
	sim, c := startSim(t, azuresim.Options{})
	ctx := t.Context()
	s := spec{name: "kip-pod-ip", bootstrap: `{"cellID":"kip-pod-ip"}`}
	body := vmBody(s)
	nicConf := body.Properties.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
	nicConf.IPConfigurations = append(nicConf.IPConfigurations, podIPConfig())
	p, err := c.vms.BeginCreateOrUpdate(ctx, rg, s.name, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	in, _ := sim.VM(rg, s.name)
	nic, err := c.nics.Get(ctx, rg, s.name+"-nic", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ic := range nic.Properties.IPConfigurations {
		got = append(got, fmt.Sprintf("%s primary=%t %s", str(ic.Name), *ic.Properties.Primary, str(ic.Properties.PrivateIPAddress)))
	}
	want := []string{"ipconfig1 primary=true " + in.Address, "ipconfig-pod primary=false " + in.PodAddress}
	if !cmp.Equal(got, want) || in.Address == "" || in.PodAddress == "" || in.PodAddress == in.Address {
		t.Errorf("IP configurations %v, want %v (two addresses of their own)", got, want)
	}
}
