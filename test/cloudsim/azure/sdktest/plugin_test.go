package sdktest

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/plugins/azure"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// TestAzurePluginConformance runs the plugin conformance suite on the
// azure plugin against the simulator: the real armcompute and armnetwork
// clients over TLS (the simulator's certificate as the plugin's CA
// bundle), ARM's long-running operations, states, idempotency and
// validation.
func TestAzurePluginConformance(t *testing.T) {
	sim := azuresim.New(azuresim.Options{AllocationDelay: 50 * time.Millisecond, BootDelay: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
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
	t.Logf("ARM calls: %v", sim.Calls())
}
