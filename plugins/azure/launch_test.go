package azure

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// The PUT is create-only and carries everything the contract with the
// simulator and the boot recipe names: the inline NIC and OS disk deleted
// with the VM, the bootstrap as userData, the boot recipe as customData,
// the zone, Spot's settings, the tags, the identity and the NSG.
func TestLaunchBody(t *testing.T) {
	f := newFakeARM(t)
	recipe := filepath.Join(t.TempDir(), "cloud-init.yaml")
	if err := os.WriteFile(recipe, []byte("#cloud-config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nsg := fakeNSGID
	identity := "/subscriptions/" + fakeSub + "/resourceGroups/kip-id/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kip-cell"
	cfg := testConfig(f)
	cfg["customData"] = recipe
	cfg["networkSecurityGroupID"] = nsg
	cfg["identity"] = identity
	cfg["tags"] = map[string]string{"team": "infra"}
	p := configured(t, f, cfg)
	req := launchRequest("kip-body")
	req.CapacityType = pluginapi.CapacitySpot
	req.Zones = []string{"eastus-2"}
	req.VolumeSizeGiB = 64
	req.Tags = map[string]string{"kipcell.io/namespace": "default"}
	resp, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The create's operation ended: the VM runs, at its NIC's address
	// (NetworkInterfaces_Get), so the host reaches its agent at once, with
	// its second IP configuration's address for the pod.
	want := pluginapi.Instance{ID: "kip-body", CellID: "kip-body", InstanceType: "Standard_B2s", Zone: "eastus-2",
		CapacityType: pluginapi.CapacitySpot, State: pluginapi.StateRunning,
		Addresses: []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: "10.1.0.4"}, {Type: pluginapi.AddressPod, Address: "10.1.1.4"}}}
	got := resp.Instance
	got.Tags, got.LaunchedAt = nil, time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Launch answered (-want +got):\n%s", diff)
	}
	if h := f.header("VirtualMachines_CreateOrUpdate", 0); h.Get("If-None-Match") != "*" {
		t.Errorf("the PUT has If-None-Match %q; want * (create only)", h.Get("If-None-Match"))
	}
	body := f.body("VirtualMachines_CreateOrUpdate", 0)
	props := body["properties"].(map[string]any)
	nic := props["networkProfile"].(map[string]any)["networkInterfaceConfigurations"].([]any)[0].(map[string]any)
	nicProps := nic["properties"].(map[string]any)
	ipcs := nicProps["ipConfigurations"].([]any)
	ipc := ipcs[0].(map[string]any)
	var pod map[string]any
	if len(ipcs) == 2 {
		pod = ipcs[1].(map[string]any)
	}
	osProfile := props["osProfile"].(map[string]any)
	osDisk := props["storageProfile"].(map[string]any)["osDisk"].(map[string]any)
	gotBody := map[string]any{
		"location":          body["location"],
		"zones":             body["zones"],
		"tags":              body["tags"],
		"identity":          body["identity"],
		"vmSize":            props["hardwareProfile"].(map[string]any)["vmSize"],
		"image":             props["storageProfile"].(map[string]any)["imageReference"],
		"osDisk":            osDisk,
		"priority":          props["priority"],
		"evictionPolicy":    props["evictionPolicy"],
		"billingProfile":    props["billingProfile"],
		"userData":          props["userData"],
		"customData":        osProfile["customData"],
		"computerName":      osProfile["computerName"],
		"adminUsername":     osProfile["adminUsername"],
		"networkApiVersion": props["networkProfile"].(map[string]any)["networkApiVersion"],
		"nicName":           nic["name"],
		"nicPrimary":        nicProps["primary"],
		"nicDeleteOption":   nicProps["deleteOption"],
		"nicNSG":            nicProps["networkSecurityGroup"],
		"ipConfigName":      ipc["name"],
		"subnet":            ipc["properties"].(map[string]any)["subnet"],
		"podIPConfig":       pod,
	}
	wantBody := map[string]any{
		"location": "eastus",
		"zones":    []any{"2"},
		"tags": map[string]any{"team": "infra", "kipcell.io~1namespace": "default", "kip-cluster": testCluster, "kip-node": "kip",
			"kip-cell": "kip-body", "kip-pod-uid": "uid-kip-body"},
		"identity":          map[string]any{"type": "UserAssigned", "userAssignedIdentities": map[string]any{identity: map[string]any{}}},
		"vmSize":            "Standard_B2s",
		"image":             map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"},
		"osDisk":            map[string]any{"createOption": "FromImage", "deleteOption": "Delete", "diskSizeGB": float64(64)},
		"priority":          "Spot",
		"evictionPolicy":    "Delete",
		"billingProfile":    map[string]any{"maxPrice": float64(-1)},
		"userData":          base64.StdEncoding.EncodeToString(req.Bootstrap),
		"customData":        base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")),
		"computerName":      "kip-body",
		"adminUsername":     "kipadmin",
		"networkApiVersion": "2020-11-01",
		"nicName":           "kip-body-nic",
		"nicPrimary":        true,
		"nicDeleteOption":   "Delete",
		"nicNSG":            map[string]any{"id": nsg},
		"ipConfigName":      "ipconfig1",
		"subnet":            map[string]any{"id": fakeSubnetID},
		"podIPConfig":       map[string]any{"name": "ipconfig-pod", "properties": map[string]any{"primary": false, "subnet": map[string]any{"id": fakeSubnetID}}},
	}
	if diff := cmp.Diff(wantBody, gotBody); diff != "" {
		t.Errorf("the PUT's body (-want +got):\n%s", diff)
	}
	if got := resp.Instance.Tags["kipcell.io/namespace"]; got != "default" {
		t.Errorf("the answer's tag kipcell.io/namespace is %q; want default (escaped tag names read back)", got)
	}
}

// Launch follows the operation to its end (Azure-AsyncOperation polls),
// and the next List has the VM running with its NIC's address.
func TestLaunchFollowsTheOperation(t *testing.T) {
	f := newFakeARM(t)
	f.polls = 3
	p := configured(t, f, testConfig(f), func(p *provider) { p.SnapshotAge = 0 })
	if _, err := p.Launch(t.Context(), launchRequest("kip-ops")); err != nil {
		t.Fatal(err)
	}
	if got := f.callCount("Operations_Get"); got != 4 {
		t.Errorf("Launch polled the operation %d times; want 4 (three InProgress, then Succeeded)", got)
	}
	if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != 1 {
		t.Errorf("Launch sent %d PUTs; want 1", got)
	}
	list, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) != 1 || list.Instances[0].State != pluginapi.StateRunning ||
		list.Instances[0].PrivateAddress() != "10.1.0.4" || list.Instances[0].PodAddress() != "10.1.1.4" {
		t.Errorf("List = %+v; want kip-ops running at 10.1.0.4, its pod at 10.1.1.4", list.Instances)
	}
}

// An allocation failure deletes the failed VM before Launch answers, so
// the host's next offering reuses the cell's name.
func TestLaunchAllocationFailureFreesTheName(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	f.failAllocation("ZonalAllocationFailed", "Allocation failed in zone 1.", 1)
	_, err := p.Launch(t.Context(), launchRequest("kip-alloc"))
	if !pluginapi.IsInsufficientCapacity(err) {
		t.Fatalf("Launch: %v; want InsufficientCapacity", err)
	}
	if _, ok := f.vm("kip-alloc"); ok {
		t.Fatal("the failed VM is still there")
	}
	req := launchRequest("kip-alloc")
	req.InstanceType, req.Zones = "Standard_D2s_v3", []string{"eastus-2"}
	resp, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatalf("the next offering's Launch: %v", err)
	}
	if resp.Instance.InstanceType != "Standard_D2s_v3" || resp.Instance.Zone != "eastus-2" {
		t.Errorf("the next offering's Launch answered %+v", resp.Instance)
	}
}

// A Launch whose context ends while the VM is being created keeps the
// operation's resume token: the host's retry follows it, with no second
// PUT.
func TestLaunchResumesTheOperation(t *testing.T) {
	f := newFakeARM(t)
	f.polls = 1 << 30
	p := configured(t, f, testConfig(f))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Launch(ctx, launchRequest("kip-resume"))
		done <- err
	}()
	for f.callCount("Operations_Get") < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Launch succeeded; want its context's error")
	}
	if p.resume.get("kip-resume") == "" {
		t.Fatal("no resume token kept for the cell")
	}
	f.mu.Lock()
	for _, op := range f.ops {
		op.pollsLeft = 0
	}
	f.mu.Unlock()
	if _, err := p.Launch(t.Context(), launchRequest("kip-resume")); err != nil {
		t.Fatalf("the retried Launch: %v", err)
	}
	if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != 1 {
		t.Errorf("%d PUTs; want 1: the retry follows the first create", got)
	}
	if p.resume.get("kip-resume") != "" {
		t.Error("the resume token outlived the create")
	}
}

// A restarted plugin finds the cell's VM by the VM list: one being created
// is followed by GET until it is provisioned; one that failed for want of
// capacity is deleted and answered InsufficientCapacity when it was this
// offering's, and replaced when the request is another offering's; one
// that runs is the answer. No second PUT but for the replacement.
func TestLaunchAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    string
		failCode string
		size     string // the retried request's; "" the first's
		want     func(*pluginapi.LaunchResponse, error) bool
		gone     bool
		puts     int
	}{
		{"creating", "Creating", "", "", func(r *pluginapi.LaunchResponse, err error) bool {
			return err == nil && r.Instance.State == pluginapi.StateRunning
		}, false, 1},
		{"failed", "Failed", "AllocationFailed", "", func(_ *pluginapi.LaunchResponse, err error) bool {
			return pluginapi.IsInsufficientCapacity(err)
		}, true, 1},
		{"failed, another offering", "Failed", "AllocationFailed", "Standard_D2s_v3", func(r *pluginapi.LaunchResponse, err error) bool {
			return err == nil && r.Instance.InstanceType == "Standard_D2s_v3"
		}, false, 2},
		{"succeeded", "Succeeded", "", "", func(r *pluginapi.LaunchResponse, err error) bool {
			return err == nil && r.Instance.State == pluginapi.StateRunning
		}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			first := configured(t, f, testConfig(f))
			if _, err := first.Launch(t.Context(), launchRequest("kip-restart")); err != nil {
				t.Fatal(err)
			}
			f.set("kip-restart", func(v *fakeVM) {
				v.provisioning, v.failCode, v.power = tc.state, tc.failCode, "running"
				if tc.state != "Succeeded" {
					v.power = ""
				}
			})
			p := configured(t, f, testConfig(f)) // another process
			gets := f.callCount("VirtualMachines_Get")
			if tc.state == "Creating" {
				go func() {
					for f.callCount("VirtualMachines_Get") == gets {
						time.Sleep(time.Millisecond)
					}
					f.set("kip-restart", func(v *fakeVM) { v.provisioning, v.power = "Succeeded", "running" })
				}()
			}
			req := launchRequest("kip-restart")
			if tc.size != "" {
				req.InstanceType = tc.size
			}
			resp, err := p.Launch(t.Context(), req)
			if !tc.want(resp, err) {
				t.Errorf("Launch = %+v, %v", resp, err)
			}
			if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != tc.puts {
				t.Errorf("%d PUTs; want %d", got, tc.puts)
			}
			if _, ok := f.vm("kip-restart"); ok == tc.gone {
				t.Errorf("the VM exists: %v; want %v", ok, !tc.gone)
			}
		})
	}
}

// Launching a launched cell again answers its VM, with no second PUT; a
// VM of that name of another cluster is refused and left as it was.
func TestLaunchIdempotentAndRefusesAnotherCluster(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	for range 2 {
		if _, err := p.Launch(t.Context(), launchRequest("kip-twice")); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != 1 {
		t.Errorf("%d PUTs for two Launches; want 1", got)
	}

	other := New(nil).(*provider)
	other.httpClient, other.lroFrequency, other.retry = f.srv.Client(), time.Millisecond, p.retry
	if _, err := other.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "other-cluster", NodeName: "kip", Config: mustJSON(t, testConfig(f))}); err != nil {
		t.Fatal(err)
	}
	_, err := other.Launch(t.Context(), launchRequest("kip-twice"))
	if err == nil {
		t.Fatal("another cluster's Launch of the name succeeded; want a refusal")
	}
	v, _ := f.vm("kip-twice")
	if got := v.body["tags"].(map[string]any)["kip-cluster"]; got != testCluster {
		t.Errorf("the VM's kip-cluster tag is %v now; want %s (the refused PUT changed nothing)", got, testCluster)
	}
}

// Cell IDs that are not Linux VM names are refused before any call.
func TestLaunchRefusesBadCellIDs(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	for _, id := range []string{"", "Kip-Upper", "kip_under", "-kip", "kip-" + string(make([]byte, 70))} {
		req := launchRequest("kip-x")
		req.CellID = id
		if _, err := p.Launch(t.Context(), req); err == nil {
			t.Errorf("Launch of cell %q succeeded", id)
		}
	}
	if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != 0 {
		t.Errorf("%d PUTs; want none", got)
	}
}

// A PUT that Azure applied but whose answer was lost is not a second VM:
// with the SDK's retries, the retried PUT (If-None-Match: *) answers 412
// and the plugin follows the VM it made; without them, Launch answers
// Transient, and the host's retry finds the VM in the (refreshed) view and
// follows it by GET. One VM either way.
func TestLaunchLostAnswer(t *testing.T) {
	for _, sdkRetries := range []bool{true, false} {
		f := newFakeARM(t)
		f.polls = 2
		p := configured(t, f, testConfig(f), func(p *provider) {
			if sdkRetries {
				p.retry = policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}
			}
		})
		f.mu.Lock()
		f.lose["VirtualMachines_CreateOrUpdate"] = 1
		f.mu.Unlock()
		resp, err := p.Launch(t.Context(), launchRequest("kip-lost"))
		if !sdkRetries {
			if !pluginapi.IsTransient(err) {
				t.Fatalf("without SDK retries, the lost answer's Launch: %v; want Transient", err)
			}
			resp, err = p.Launch(t.Context(), launchRequest("kip-lost"))
		}
		if err != nil || resp.Instance.ID != "kip-lost" {
			t.Fatalf("SDK retries %v: Launch = %+v, %v", sdkRetries, resp, err)
		}
		if v, _ := f.vm("kip-lost"); v.provisioning != "Succeeded" {
			t.Errorf("SDK retries %v: the VM is %s; want Succeeded", sdkRetries, v.provisioning)
		}
		wantPUTs := 1
		if sdkRetries {
			wantPUTs = 2 // the lost one, and the retry that found the VM
		}
		if got := f.callCount("VirtualMachines_CreateOrUpdate"); got != wantPUTs {
			t.Errorf("SDK retries %v: %d PUTs; want %d", sdkRetries, got, wantPUTs)
		}
	}
}
