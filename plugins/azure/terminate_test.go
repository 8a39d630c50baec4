package azure

import (
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

// Terminate deletes the VM (202, terminating), succeeds again while it is
// being deleted, answers NotFound once it is gone, and refuses a VM of
// another cluster without deleting it.
func TestTerminate(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	if _, err := p.Launch(t.Context(), launchRequest("kip-end")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		resp, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "kip-end"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Instance.State != pluginapi.StateTerminating {
			t.Errorf("Terminate answered %s; want terminating", resp.Instance.State)
		}
	}
	if v, _ := f.vm("kip-end"); v.provisioning != "Deleting" {
		t.Errorf("the VM is %s; want Deleting", v.provisioning)
	}
	f.finishDeletes()
	fresh := configured(t, f, testConfig(f)) // a restarted plugin: no view, no memory
	if _, err := fresh.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "kip-end"}); !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of a deleted VM: %v; want NotFound", err)
	}
	if _, err := fresh.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "Not/A/Name"}); !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of an ID of another shape: %v; want NotFound", err)
	}

	f.mu.Lock()
	f.vms["kip-stranger"] = &fakeVM{provisioning: "Succeeded", power: "running",
		body: map[string]any{"tags": map[string]any{"kip-cluster": "other", "kip-cell": "kip-stranger"}}}
	f.mu.Unlock()
	deletes := f.callCount("VirtualMachines_Delete")
	if _, err := fresh.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "kip-stranger"}); err == nil {
		t.Error("Terminate of another cluster's VM succeeded")
	}
	if f.callCount("VirtualMachines_Delete") != deletes {
		t.Error("Terminate of another cluster's VM sent a DELETE")
	}
}
