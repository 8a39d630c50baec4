//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/e2e/framework"
)

// TestAzureAllocationFailureFallsToTheNextSize: with no capacity for the
// smallest size that fits (the catalog has no prices, so kip ranks by
// size: Standard_B2s, 2 × 20% of a vCPU and 4 GiB; every zone's create
// ends Failed with AllocationFailed after ARM accepted it), the pod runs
// on the next, Standard_F2s_v2 (2 vCPU and 4 GiB, after B2s by name), its
// events name every zone tried with ARM's code, and the failed VMs are
// deleted, not left behind.
func TestAzureAllocationFailureFallsToTheNextSize(t *testing.T) {
	framework.Only(t, framework.PluginAzure)
	kipLogOnFailure(t)
	kip.Azure.InjectAllocationFailure("Standard_B2s", "", azuresim.CodeAllocationFailed)
	got, events := squeezedPod(t, kip.Azure.ClearAllocationFailures)
	if typ := got.Annotations["cell.kipcell.io/instance-type"]; typ != "Standard_F2s_v2" {
		t.Errorf("placed on %q, want Standard_F2s_v2: the next size after Standard_B2s that fits", typ)
	}
	for _, zone := range []string{"eastus-1", "eastus-2", "eastus-3"} {
		if !strings.Contains(events, "Warning InsufficientCapacity Standard_B2s in "+zone+" (on-demand, price unknown)") {
			t.Errorf("no InsufficientCapacity event for Standard_B2s in %s:\n%s", zone, events)
		}
	}
	if !strings.Contains(events, azuresim.CodeAllocationFailed) {
		t.Errorf("the events do not name ARM's error code %s:\n%s", azuresim.CodeAllocationFailed, events)
	}
	f.WaitFor(t, 30*time.Second, "the failed VMs deleted", func(context.Context) (bool, error) {
		for _, vm := range kip.Azure.VMs() {
			if vm.Tags[azureTagPodUID] == string(got.UID) && vm.Size == "Standard_B2s" && !vm.Gone {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("events of the squeezed pod:\n%s", events)
}

// TestAzureSpotEvictionReplacesThePod: a Deployment's Spot pod whose VM
// Azure evicts (evictionPolicy Delete: Deleting, then gone, with no
// DELETE from kip) fails with CellLost naming the eviction, and the
// Deployment's replacement runs.
func TestAzureSpotEvictionReplacesThePod(t *testing.T) {
	framework.Only(t, framework.PluginAzure)
	spotReclaimReplacesThePod(t, "evicted", func(t *testing.T, uid types.UID) {
		var name string
		for _, vm := range kip.Azure.VMs() {
			if vm.Tags[azureTagPodUID] == string(uid) && vm.ProvisioningState == azuresim.StateSucceeded {
				name = vm.Name
				if !vm.Spot || vm.EvictionPolicy != "Delete" {
					t.Errorf("VM %s: Spot %v, evictionPolicy %q; want a Spot VM deleted when evicted", name, vm.Spot, vm.EvictionPolicy)
				}
			}
		}
		if name == "" {
			t.Fatalf("no running VM for pod %s", uid)
		}
		if err := kip.Azure.Evict(name); err != nil {
			t.Fatal(err)
		}
	}, namesEviction)
}

// namesEviction reports whether a CellLost message says the cell was
// evicted: by kip's interruption prefix or by the plugin's state reason.
func namesEviction(message string) bool {
	return strings.Contains(message, "spot interruption: ") || strings.Contains(message, "spot eviction: Azure is reclaiming the VM")
}

// TestAzureThrottledPluginStillRunsEveryPod: with ARM answering 429 with
// Retry-After to a run of calls (Compute's subscription throttling,
// OperationNotAllowed), every pod
// of a Deployment ends Running, and the plugin never calls faster than its
// own rate limit allows (plugins/azure's defaults, rateLimit unset: two
// token buckets of burst 20, refilled at 10/s for reads and operation
// polls and 5/s for creates and deletes, so at most 2×20+10+5 = 55 calls
// in any second).
func TestAzureThrottledPluginStillRunsEveryPod(t *testing.T) {
	framework.Only(t, framework.PluginAzure)
	t.Cleanup(kip.Azure.ClearFaults)
	throttledDeployment(t, kip.Azure, 15, func() {
		kip.Azure.InjectFault(azuresim.Fault{Code: azuresim.CodeOperationNotAllowed, HTTPStatus: http.StatusTooManyRequests,
			Message: "The server rejected the request because too many requests have been received for this subscription.", Times: 15})
	}, 55)
}
