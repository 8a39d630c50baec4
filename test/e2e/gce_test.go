//go:build e2e

package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/e2e/framework"
)

// TestGCEStockoutFallsToTheNextType: with no capacity for the cheapest
// machine type that fits (e2-small, $0.01675 in us-central1: every zone
// answers ZONE_RESOURCE_POOL_EXHAUSTED), the pod runs on the next
// candidate, g1-small ($0.0257), and its events name every zone tried.
func TestGCEStockoutFallsToTheNextType(t *testing.T) {
	framework.Only(t, framework.PluginGCE)
	kipLogOnFailure(t)
	kip.GCE.InjectStockout(gcesim.Stockout{MachineType: "e2-small"})
	got, events := squeezedPod(t, kip.GCE.ClearStockouts)
	if typ := got.Annotations["cell.kipcell.io/instance-type"]; typ != "g1-small" {
		t.Errorf("placed on %q, want g1-small: the next candidate after e2-small ($0.01675) is g1-small ($0.0257)", typ)
	}
	for _, zone := range []string{"us-central1-a", "us-central1-b", "us-central1-c"} {
		if !strings.Contains(events, "Warning InsufficientCapacity e2-small in "+zone+" (on-demand, $") ||
			!strings.Contains(events, `insufficient capacity for e2-small (zone "`+zone+`", on-demand)`) ||
			!strings.Contains(events, "The zone 'projects/"+gcesim.DefaultProject+"/zones/"+zone+"' does not have enough resources") {
			t.Errorf("no InsufficientCapacity event for e2-small in %s:\n%s", zone, events)
		}
	}
	if !strings.Contains(events, gcesim.CodeZoneResourcePoolExhausted) {
		t.Errorf("the events do not name GCE's error code %s:\n%s", gcesim.CodeZoneResourcePoolExhausted, events)
	}
	t.Logf("events of the squeezed pod:\n%s", events)
}

// TestGCEPreemptionReplacesThePod: a Deployment's Spot pod whose instance
// Compute Engine preempts (instanceTerminationAction DELETE: STOPPING,
// TERMINATED, deleted) fails with CellLost naming the preemption, and the
// Deployment's replacement runs. kip learns it either way the plugin
// tells: the interruption event of its watch ("spot interruption: …"), or
// the instance's state when kip finds the cell gone first (the plugin
// describes a Spot instance stopping that it did not delete as "spot
// preemption: …").
func TestGCEPreemptionReplacesThePod(t *testing.T) {
	framework.Only(t, framework.PluginGCE)
	spotReclaimReplacesThePod(t, "preempted", func(t *testing.T, uid types.UID) {
		var zone, name string
		for _, in := range kip.GCE.Instances() {
			if in.Labels[gceLabelPodUID] == string(uid) && in.Status == "RUNNING" {
				zone, name = in.Zone, in.Name
				if !in.Spot || in.TerminationAction != "DELETE" {
					t.Errorf("instance %s/%s: Spot %v, instanceTerminationAction %q; want a Spot instance deleted when preempted", zone, name, in.Spot, in.TerminationAction)
				}
			}
		}
		if name == "" {
			t.Fatalf("no running instance for pod %s", uid)
		}
		if err := kip.GCE.Preempt(zone, name); err != nil {
			t.Fatal(err)
		}
	}, namesPreemption)
}

// namesPreemption reports whether a CellLost message says the cell was
// preempted: by kip's interruption prefix or by the plugin's state reason.
func namesPreemption(message string) bool {
	return strings.Contains(message, "spot interruption: ") || strings.Contains(message, "spot preemption: Compute Engine is reclaiming the instance")
}

// TestGCEThrottledPluginStillRunsEveryPod: with Compute Engine answering
// 403 rateLimitExceeded to a run of calls, every pod of a Deployment ends
// Running, and the plugin never calls faster than its own rate limit
// allows (plugins/gce's defaults, rateLimit unset: two token buckets of
// burst 20, refilled at 10/s for reads and operation waits and 5/s for
// inserts and deletes, so at most 2×20+10+5 = 55 calls in any second).
func TestGCEThrottledPluginStillRunsEveryPod(t *testing.T) {
	framework.Only(t, framework.PluginGCE)
	t.Cleanup(kip.GCE.ClearFaults)
	throttledDeployment(t, kip.GCE, 15, func() {
		kip.GCE.InjectFault(gcesim.Fault{Code: "rateLimitExceeded", HTTPStatus: http.StatusForbidden, Message: "Rate Limit Exceeded", Times: 15})
	}, 55)
}

// TestGCECellsJoinWithTheirIdentityToken: in the gce pass a cell's
// instance has the cells' service account, and kip joins its agent only
// once the gce plugin has checked the instance's identity token, which the
// agent read from its instance's metadata server (kip-cell
// --gce-metadata-endpoint): the plugin refuses a join without one, so the
// pod runs only if the check passed, and kip never says that cells join
// unchecked.
func TestGCECellsJoinWithTheirIdentityToken(t *testing.T) {
	framework.Only(t, framework.PluginGCE)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	settle(t, ns)
	createPod(t, ns, "checked", onKip(sleeper()))
	p := f.WaitForPods(t, ns, "app=checked", 1, 90*time.Second, "running", running)[0]
	ins := instancesOf(t, p.UID)
	if len(ins) != 1 {
		t.Fatalf("pod %s has %d instances, want 1", p.Name, len(ins))
	}
	zone, name, _ := strings.Cut(ins[0].ID, "/")
	in, ok := kip.GCE.Instance(zone, name)
	if !ok {
		t.Fatalf("no instance %s in the simulator", ins[0].ID)
	}
	accounts, _ := in.Body["serviceAccounts"].([]any)
	if len(accounts) != 1 || accounts[0].(map[string]any)["email"] != framework.GCEServiceAccount {
		t.Errorf("instance %s has service accounts %v, want %s", ins[0].ID, in.Body["serviceAccounts"], framework.GCEServiceAccount)
	}
	for _, line := range strings.Split(kip.LogTail(1<<20), "\n") {
		if strings.Contains(line, "join without an instance identity check") {
			t.Errorf("kip joins cells without checking their identity: %s", line)
		}
	}
}
