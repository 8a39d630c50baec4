package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/plugins/azure"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// TestAzurePluginConformance runs the plugin conformance suite on the
// azure plugin against the simulator: the real armcompute and armnetwork
// clients over TLS (the simulator's certificate as the plugin's CA
// bundle), ARM's long-running operations, states, idempotency and
// validation; and the volume cases on managed disks the test creates
// through the SDK's disks client, attached by the VM's PATCH as ARM
// attaches them (an operation, refusals, LUNs), onto a recording
// DiskStarter's cells.
func TestAzurePluginConformance(t *testing.T) {
	cells := newDiskCells()
	sim := azuresim.New(azuresim.Options{AllocationDelay: 50 * time.Millisecond, BootDelay: 200 * time.Millisecond,
		DiskDelay: 100 * time.Millisecond, Cells: cells, Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ca := filepath.Join(t.TempDir(), "arm-ca.pem")
	if err := os.WriteFile(ca, sim.CACert(), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(edit func(map[string]any)) []byte {
		c := map[string]any{
			"subscriptionID": azuresim.DefaultSubscription, "resourceGroup": azuresim.DefaultResourceGroup,
			"location": azuresim.DefaultLocation, "subnetID": subnetID, "networkSecurityGroupID": nsgID,
			"image":        map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server"},
			"sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKipKipKipKipKipKipKipKipKipKipKipKipKipKipKip kip-test",
			"endpoint":     url, "caBundle": ca, "withoutAuthentication": true,
			// One zone: the plugin spreads cells without a zone over its
			// zones by cell ID, and the volume-in-use case needs two
			// instances in one zone; the wrong-zone case's disks go to
			// zone 2 (OtherZone).
			"zones": []string{"1"},
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
	disks := diskClient(t, sim, url)
	var n atomic.Int64
	createVolume := func(ctx context.Context, zone string, sku armcompute.DiskStorageAccountTypes) (string, error) {
		name := fmt.Sprintf("pv-%d", n.Add(1))
		p, err := disks.BeginCreateOrUpdate(ctx, rg, name, armcompute.Disk{
			Location: to.Ptr(location), Zones: []*string{to.Ptr(strings.TrimPrefix(zone, azuresim.DefaultLocation+"-"))},
			SKU: &armcompute.DiskSKU{Name: to.Ptr(sku)},
			Properties: &armcompute.DiskProperties{
				CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)}, DiskSizeGB: to.Ptr[int32](1),
			},
		}, nil)
		if err != nil {
			return "", err
		}
		d, err := p.PollUntilDone(ctx, pollEvery)
		return str(d.ID), err
	}
	plugintest.Run(t, azure.New, plugintest.Config{
		Plugin: config(nil),
		Invalid: []plugintest.InvalidConfig{
			{Config: config(func(c map[string]any) { delete(c, "subscriptionID") }), Key: "subscriptionID"},
			{Config: config(func(c map[string]any) { c["subnetID"] = subnetID + "-nowhere" }), Key: "subnetID"},
			{Config: config(func(c map[string]any) { c["networkSecurityGroupID"] = nsgID + "-nowhere" }), Key: "networkSecurityGroupID"},
			{Config: config(func(c map[string]any) { c["zones"] = []string{"1", "x"} }), Key: "zones[1]"},
		},
		InstanceType:      size,
		ReadyTimeout:      30 * time.Second,
		UnknownInstanceID: "kip-never-launched",
		OtherZone:         azuresim.DefaultLocation + "-2",
		CreateVolume: func(ctx context.Context, zone string) (string, error) {
			return createVolume(ctx, zone, armcompute.DiskStorageAccountTypesStandardLRS)
		},
		// A Premium SSD, which a Dv3 size (no s: no premium storage)
		// cannot take.
		IncompatibleInstanceType: "Standard_D2_v3",
		IncompatibleVolume: func(ctx context.Context, zone, _ string) (string, error) {
			return createVolume(ctx, zone, armcompute.DiskStorageAccountTypesPremiumLRS)
		},
		DeleteVolume: func(ctx context.Context, handle string) error {
			name := handle[strings.LastIndex(handle, "/")+1:]
			// The suite's instances are terminated: their disks are free
			// once the VMs are gone and the detach is done.
			for {
				p, err := disks.BeginDelete(ctx, rg, name, nil)
				if isCode(err, 409, "OperationNotAllowed") {
					select {
					case <-ctx.Done():
						return fmt.Errorf("disk %s still attached: %w", name, err)
					case <-time.After(50 * time.Millisecond):
						continue
					}
				}
				if err != nil {
					return err
				}
				_, err = p.PollUntilDone(ctx, pollEvery)
				return err
			}
		},
	})
	for _, vm := range sim.VMs() {
		if vm.ProvisioningState != azuresim.StateDeleting && !vm.Gone {
			t.Errorf("the suite left VM %s %s", vm.Name, vm.ProvisioningState)
		}
		// Every VM that got an address has the pod's too.
		if vm.Address != "" && vm.PodAddress == "" {
			t.Errorf("VM %s at %s has no pod address (a second IP configuration)", vm.Name, vm.Address)
		}
	}
	if calls := sim.Calls(); calls["VirtualMachines_Update"] == 0 || calls["Disks_Get"] == 0 {
		t.Errorf("the plugin never attached through ARM: %v", calls)
	}
	t.Logf("ARM calls: %v", sim.Calls())
	t.Logf("DiskStarter calls: %q", cells.log())
}

// diskClient is the SDK's disks client on the simulator, as the suite's
// hooks use it.
func diskClient(t *testing.T, sim *azuresim.Server, url string) *armcompute.DisksClient {
	t.Helper()
	c, err := armcompute.NewDisksClient(sub, &azfake.TokenCredential{}, &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: url, Audience: "https://management.core.windows.net/"},
			}},
			Transport: sim.Client(),
		},
		DisableRPRegistration: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
