package sdktest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// TestResumeToken: a poller's resume token, taken while the create runs,
// resumes it in a new poller (as a restarted plugin would), and the same
// for a delete.
func TestResumeToken(t *testing.T) {
	clock := newClock()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, BootDelay: time.Minute, ShutdownDelay: time.Minute})
	ctx := t.Context()
	s := spec{name: "kip-resume", zone: "1"}
	p, err := begin(ctx, c, s)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.ResumeToken()
	if err != nil {
		t.Fatalf("ResumeToken: %v", err)
	}
	resumed, err := c.vms.BeginCreateOrUpdate(ctx, rg, s.name, armcompute.VirtualMachine{}, &armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{ResumeToken: tok})
	if err != nil {
		t.Fatalf("resuming the create: %v", err)
	}
	if done, err := pollOnce(ctx, resumed); err != nil || done {
		t.Fatalf("resumed poller before the boot: done %v, %v", done, err)
	}
	clock.Advance(time.Minute)
	r, err := resumed.PollUntilDone(ctx, pollEvery)
	if err != nil || str(r.Properties.ProvisioningState) != "Succeeded" {
		t.Fatalf("resumed create: %v, %v; want Succeeded", r.Properties, err)
	}
	if n := sim.Calls()["VirtualMachines_CreateOrUpdate"]; n != 1 {
		t.Errorf("%d PUTs; the resumed poller must not send another", n)
	}

	dp, err := c.vms.BeginDelete(ctx, rg, s.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err = dp.ResumeToken()
	if err != nil {
		t.Fatalf("delete's ResumeToken: %v", err)
	}
	rd, err := c.vms.BeginDelete(ctx, rg, s.name, &armcompute.VirtualMachinesClientBeginDeleteOptions{ResumeToken: tok})
	if err != nil {
		t.Fatalf("resuming the delete: %v", err)
	}
	clock.Advance(time.Minute)
	if _, err := rd.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatalf("resumed delete: %v", err)
	}
	if vm, _ := sim.VM(rg, s.name); !vm.Gone {
		t.Errorf("VM after the resumed delete: %+v; want gone", vm)
	}
}

// TestAllocationFailure: an allocation failure is an accepted PUT whose
// operation ends Failed, which PollUntilDone returns as an
// *azcore.ResponseError with the code; the VM stays Failed (its instance
// view says why) until deleted, and a PUT once capacity is back creates
// it again.
func TestAllocationFailure(t *testing.T) {
	for _, code := range []string{"", azuresim.CodeZonalAllocationFailed, azuresim.CodeOverconstrainedAllocationRequest} {
		t.Run(code, func(t *testing.T) {
			clock := newClock()
			sim, c := startSim(t, azuresim.Options{Now: clock.Now, AllocationDelay: 5 * time.Second})
			ctx := t.Context()
			sim.InjectAllocationFailure(size, "1", code)
			want := code
			if want == "" {
				want = azuresim.CodeAllocationFailed
			}
			s := spec{name: "kip-nocap", zone: "1"}
			p, err := begin(ctx, c, s)
			if err != nil {
				t.Fatalf("PUT: %v; an allocation failure is not a refusal of the PUT", err)
			}
			if done, err := pollOnce(ctx, p); err != nil || done {
				t.Fatalf("poll before the allocation: done %v, %v", done, err)
			}
			clock.Advance(5 * time.Second)
			_, err = p.PollUntilDone(ctx, pollEvery)
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.ErrorCode != want {
				t.Fatalf("PollUntilDone: %v; want an *azcore.ResponseError %s", err, want)
			}
			assertState(t, c, s.name, "Failed", []string{"ProvisioningState/failed/" + want})
			if vm, _ := sim.VM(rg, s.name); vm.Address != "" {
				t.Errorf("a VM that was not allocated has address %q", vm.Address)
			}
			// Another zone has capacity.
			other, err := begin(ctx, c, spec{name: "kip-other", zone: "2"})
			if err != nil {
				t.Fatalf("zone 2: %v", err)
			}
			clock.Advance(5 * time.Second)
			if _, err := other.PollUntilDone(ctx, pollEvery); err != nil {
				t.Errorf("zone 2: %v", err)
			}
			// Capacity is back: a PUT creates the Failed VM again.
			sim.ClearAllocationFailures()
			p, err = begin(ctx, c, s)
			if err != nil {
				t.Fatalf("PUT of the Failed VM: %v", err)
			}
			clock.Advance(5 * time.Second)
			if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
				t.Fatalf("re-created VM: %v", err)
			}
			if err := remove(ctx, c, s.name); err != nil {
				t.Errorf("delete: %v", err)
			}
		})
	}
}

// TestDeleteOfAFailedVM: the plugin deletes a VM whose allocation failed,
// so that the next attempt can reuse the name.
func TestDeleteOfAFailedVM(t *testing.T) {
	sim, c := startSim(t, azuresim.Options{})
	ctx := t.Context()
	sim.InjectAllocationFailure("", "3", "")
	if _, err := create(ctx, c, spec{name: "kip-f", zone: "3"}); err == nil {
		t.Fatal("create in a zone without capacity succeeded")
	}
	if err := remove(ctx, c, "kip-f"); err != nil {
		t.Fatalf("deleting the Failed VM: %v", err)
	}
	if _, err := create(ctx, c, spec{name: "kip-f", zone: "1"}); err != nil {
		t.Errorf("the name after the delete: %v", err)
	}
}

// TestRefusals: what ARM refuses synchronously, as the SDK sees it.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(*azuresim.Server)
		spec   spec
		edit   func(*armcompute.VirtualMachine)
		status int
		code   string
		msg    string // in the message
	}{
		{name: "sku not available in the zone", setup: func(s *azuresim.Server) { s.SkuNotAvailable(size, "1") },
			spec: spec{zone: "1"}, status: http.StatusConflict, code: "SkuNotAvailable", msg: "zones '1'"},
		{name: "family quota", setup: func(s *azuresim.Server) { s.InjectQuota("standardDSv3Family", 1) },
			status: http.StatusConflict, code: "OperationNotAllowed", msg: "exceeding approved standardDSv3Family Cores quota"},
		{name: "spot quota", setup: func(s *azuresim.Server) { s.InjectQuota(azuresim.QuotaLowPriorityCores, 0) },
			spec: spec{spot: true}, status: http.StatusConflict, code: "OperationNotAllowed", msg: "LowPriorityCores quota"},
		{name: "regional quota", setup: func(s *azuresim.Server) { s.InjectQuota(azuresim.QuotaRegionalCores, 1) },
			status: http.StatusConflict, code: "OperationNotAllowed", msg: "Total Regional Cores quota"},
		{name: "unknown size", spec: spec{size: "Standard_X1"}, status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "unknown zone", spec: spec{zone: "4"}, status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "another location", edit: func(vm *armcompute.VirtualMachine) { vm.Location = to.Ptr("westus") },
			status: http.StatusBadRequest, code: "LocationNotAvailableForResourceType"},
		{name: "reserved tag characters", spec: spec{tags: map[string]string{"kip/cell": "x"}}, status: http.StatusBadRequest, code: "InvalidTagNameCharacters"},
		{name: "no networkApiVersion", edit: func(vm *armcompute.VirtualMachine) { vm.Properties.NetworkProfile.NetworkAPIVersion = nil },
			status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "subnet that does not exist", edit: func(vm *armcompute.VirtualMachine) {
			vm.Properties.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.Subnet.ID = to.Ptr(strings.Replace(subnetID, "default", "none", 1))
		}, status: http.StatusBadRequest, code: "InvalidResourceReference"},
		{name: "two IP configurations, none primary", edit: func(vm *armcompute.VirtualMachine) {
			nic := vm.Properties.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
			nic.IPConfigurations[0].Properties.Primary = to.Ptr(false)
			nic.IPConfigurations = append(nic.IPConfigurations, podIPConfig())
		}, status: http.StatusBadRequest, code: "NetworkInterfaceMustHaveOneOneIPConfigAsPrimary"},
		{name: "two IP configurations of one name", edit: func(vm *armcompute.VirtualMachine) {
			nic := vm.Properties.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
			second := podIPConfig()
			second.Name = to.Ptr("ipconfig1")
			nic.IPConfigurations = append(nic.IPConfigurations, second)
		}, status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "userData not base64", edit: func(vm *armcompute.VirtualMachine) { vm.Properties.UserData = to.Ptr("not base64!") },
			status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "eviction policy of a regular VM", edit: func(vm *armcompute.VirtualMachine) {
			vm.Properties.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		}, status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "no SSH key with passwords disabled", edit: func(vm *armcompute.VirtualMachine) {
			vm.Properties.OSProfile.LinuxConfiguration.SSH = nil
		}, status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "no image", edit: func(vm *armcompute.VirtualMachine) { vm.Properties.StorageProfile.ImageReference = nil },
			status: http.StatusBadRequest, code: "InvalidParameter"},
		{name: "VM name starting with an underscore", spec: spec{name: "_kip"}, status: http.StatusBadRequest, code: "InvalidResourceName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, c := startSim(t, azuresim.Options{})
			if tt.setup != nil {
				tt.setup(sim)
			}
			s := tt.spec
			if s.name == "" {
				s.name = "kip-refused"
			}
			body := vmBody(s)
			if tt.edit != nil {
				tt.edit(&body)
			}
			_, err := c.vms.BeginCreateOrUpdate(t.Context(), rg, s.name, body, nil)
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.status || re.ErrorCode != tt.code {
				t.Fatalf("PUT: %v; want %d %s", err, tt.status, tt.code)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not say %q", err, tt.msg)
			}
			if len(sim.VMs()) != 0 {
				t.Errorf("a refused PUT created %+v", sim.VMs())
			}
		})
	}
}

// TestConflicts: a PUT while the VM is being created is 409 Conflict, while
// it is being deleted 409 OperationNotAllowed; a PUT of a VM that
// succeeded is 200 and updates its tags, and one that changes its zone is
// refused; a second DELETE while deleting is accepted.
func TestConflicts(t *testing.T) {
	clock := newClock()
	_, c := startSim(t, azuresim.Options{Now: clock.Now, BootDelay: time.Minute, ShutdownDelay: time.Minute})
	ctx := t.Context()
	s := spec{name: "kip-busy", zone: "1", tags: map[string]string{"kip-cluster": "c1"}}
	p, err := begin(ctx, c, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := begin(ctx, c, s); !isCode(err, http.StatusConflict, "Conflict") {
		t.Errorf("PUT while creating: %v; want 409 Conflict", err)
	}
	// A create-only PUT (If-None-Match: *) of a VM that exists, in any
	// state, is 412.
	createOnly := &armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfNoneMatch: to.Ptr("*")}
	if _, err := c.vms.BeginCreateOrUpdate(ctx, rg, s.name, vmBody(s), createOnly); !isCode(err, http.StatusPreconditionFailed, "PreconditionFailed") {
		t.Errorf("create-only PUT while creating: %v; want 412 PreconditionFailed", err)
	}
	clock.Advance(time.Minute)
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	if _, err := c.vms.BeginCreateOrUpdate(ctx, rg, s.name, vmBody(s), createOnly); !isCode(err, http.StatusPreconditionFailed, "PreconditionFailed") {
		t.Errorf("create-only PUT of a VM that runs: %v; want 412 PreconditionFailed", err)
	}
	s.tags["kip-node"] = "n1"
	if r, err := create(ctx, c, s); err != nil || str(r.Tags["kip-node"]) != "n1" {
		t.Errorf("the updated VM: %v, %v; want tag kip-node n1", r.Tags, err)
	}
	moved := s
	moved.zone = "2"
	if _, err := begin(ctx, c, moved); !isCode(err, http.StatusConflict, "PropertyChangeNotAllowed") {
		t.Errorf("PUT in another zone: %v; want 409 PropertyChangeNotAllowed", err)
	}
	dp, err := c.vms.BeginDelete(ctx, rg, s.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := begin(ctx, c, s); !isCode(err, http.StatusConflict, "OperationNotAllowed") {
		t.Errorf("PUT while deleting: %v; want 409 OperationNotAllowed", err)
	}
	dp2, err := c.vms.BeginDelete(ctx, rg, s.name, nil)
	if err != nil {
		t.Fatalf("second DELETE while deleting: %v", err)
	}
	clock.Advance(time.Minute)
	if _, err := dp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Errorf("first delete: %v", err)
	}
	if _, err := dp2.PollUntilDone(ctx, pollEvery); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

// TestDeleteWhileCreating: a DELETE of a VM being created cancels the
// create (its poller ends with an error) and deletes it.
func TestDeleteWhileCreating(t *testing.T) {
	clock := newClock()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, BootDelay: time.Minute})
	ctx := t.Context()
	p, err := begin(ctx, c, spec{name: "kip-short"})
	if err != nil {
		t.Fatal(err)
	}
	if err := remove(ctx, c, "kip-short"); err != nil {
		t.Fatalf("delete while creating: %v", err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err == nil {
		t.Error("the create's poller succeeded after the delete; want Canceled")
	}
	if vm, _ := sim.VM(rg, "kip-short"); !vm.Gone {
		t.Errorf("VM %+v; want gone", vm)
	}
}

func isCode(err error, status int, code string) bool {
	s, c := respErr(err)
	return s == status && c == code
}
