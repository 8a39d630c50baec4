package sdktest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// TestRateLimit: a call over the rate limit is 429 with Retry-After and
// ARM's throttling body; azcore's retry policy, when on, waits Retry-After
// and succeeds.
func TestRateLimit(t *testing.T) {
	sim, c := startSim(t, azuresim.Options{RateLimit: azuresim.RateLimit{PerSecond: 1, Burst: 1}})
	ctx := t.Context()
	if _, err := c.subnets.Get(ctx, rg, "kip-vnet", "default", nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.subnets.Get(ctx, rg, "kip-vnet", "default", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != "OperationNotAllowed" {
		t.Fatalf("second call: %v; want 429 OperationNotAllowed", err)
	}
	if ra := re.RawResponse.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if sim.Throttled() != 1 {
		t.Errorf("Throttled %d, want 1", sim.Throttled())
	}

	// With azcore's retries the SDK waits Retry-After and gets through.
	sim2, c2 := startSim(t, azuresim.Options{RateLimit: azuresim.RateLimit{PerSecond: 1, Burst: 1}},
		policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Second})
	for range 2 {
		if _, err := c2.subnets.Get(ctx, rg, "kip-vnet", "default", nil); err != nil {
			t.Fatalf("with retries: %v", err)
		}
	}
	if sim2.Throttled() != 1 || sim2.Calls()["Subnets_Get"] != 3 {
		t.Errorf("throttled %d, calls %v; want 1 refused and 3 calls", sim2.Throttled(), sim2.Calls())
	}
	sim2.SetRateLimit(azuresim.RateLimit{})
	for range 5 {
		if _, err := c2.subnets.Get(ctx, rg, "kip-vnet", "default", nil); err != nil {
			t.Fatalf("without a limit: %v", err)
		}
	}
	if sim2.MaxCallsPerSecond() < 2 {
		t.Errorf("MaxCallsPerSecond %d, want at least 2", sim2.MaxCallsPerSecond())
	}
	sim2.ResetCalls()
	if len(sim2.Calls()) != 0 || sim2.Throttled() != 0 {
		t.Errorf("after ResetCalls: %v, %d", sim2.Calls(), sim2.Throttled())
	}
}

// TestLostAnswer: the PUT takes effect and its answer is lost (500): a
// retried PUT finds the VM being created (409 Conflict), and once it runs
// a PUT is 200 and the VM is there.
func TestLostAnswer(t *testing.T) {
	clock := newClock()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, BootDelay: time.Minute})
	ctx := t.Context()
	sim.InjectFault(azuresim.Fault{Operation: "VirtualMachines_CreateOrUpdate", Code: "InternalServerError", HTTPStatus: http.StatusInternalServerError, AfterEffect: true})
	s := spec{name: "kip-lost", zone: "1"}
	if _, err := begin(ctx, c, s); !isCode(err, http.StatusInternalServerError, "InternalServerError") {
		t.Fatalf("PUT: %v; want the injected 500", err)
	}
	if _, err := begin(ctx, c, s); !isCode(err, http.StatusConflict, "Conflict") {
		t.Errorf("retried PUT while creating: %v; want 409 Conflict", err)
	}
	clock.Advance(time.Minute)
	if _, err := create(ctx, c, s); err != nil {
		t.Errorf("PUT once it runs: %v", err)
	}
	// A fault before the effect changes nothing.
	sim.InjectFault(azuresim.Fault{Operation: "VirtualMachines_Delete", Code: "InternalServerError", HTTPStatus: http.StatusInternalServerError})
	if err := remove(ctx, c, s.name); !isCode(err, http.StatusInternalServerError, "InternalServerError") {
		t.Errorf("DELETE: %v; want the injected 500", err)
	}
	if vm, _ := sim.VM(rg, s.name); vm.ProvisioningState != "Succeeded" {
		t.Errorf("after a failed DELETE the VM is %s", vm.ProvisioningState)
	}
	sim.InjectFault(azuresim.Fault{Code: "Whatever", Times: 3})
	sim.ClearFaults()
	if _, err := get(ctx, c, s.name); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
}

// TestEviction: a Spot VM with evictionPolicy Delete is Deleting, then
// gone with its NIC, without a DELETE; with Deallocate it stays,
// deallocated, its cell stopped.
func TestEviction(t *testing.T) {
	clock := newClock()
	cells := cellstest.NewFakeCells()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, Cells: cells, ShutdownDelay: 30 * time.Second})
	ctx := t.Context()
	mustCreate(t, c, spec{name: "kip-spot", zone: "1", spot: true})
	mustCreate(t, c, spec{name: "kip-dealloc", zone: "1", spot: true, eviction: armcompute.VirtualMachineEvictionPolicyTypesDeallocate})
	mustCreate(t, c, spec{name: "kip-regular", zone: "1"})
	if err := sim.Evict("kip-regular"); err == nil {
		t.Error("evicting a regular VM succeeded")
	}
	if err := sim.Evict("kip-spot"); err != nil {
		t.Fatal(err)
	}
	if err := sim.Evict("kip-dealloc"); err != nil {
		t.Fatal(err)
	}
	assertState(t, c, "kip-spot", "Deleting", []string{"ProvisioningState/deleting", "PowerState/stopped", "PowerState/evicted"})
	clock.Advance(30 * time.Second)
	eventually(t, "the cell stopped", func() bool { return cells.Stops("kip-spot") == 1 })
	if _, err := get(ctx, c, "kip-spot"); !is404(err) {
		t.Errorf("evicted VM: %v; want 404", err)
	}
	if _, err := c.nics.Get(ctx, rg, "kip-spot-nic", nil); !is404(err) {
		t.Errorf("evicted VM's NIC: %v; want 404", err)
	}
	assertState(t, c, "kip-dealloc", "Succeeded", []string{"ProvisioningState/succeeded", "PowerState/deallocated", "PowerState/evicted"})
	eventually(t, "the deallocated VM's cell stopped", func() bool { return cells.Stops("kip-dealloc") == 1 })
	if vm, _ := sim.VM(rg, "kip-spot"); !vm.Evicted || !vm.Gone || sim.Calls()["VirtualMachines_Delete"] != 0 {
		t.Errorf("VM %+v, calls %v; want evicted and gone without a DELETE", vm, sim.Calls())
	}
}

// TestTimeKnobs: SetAllocationDelay, SetBootDelay, SetShutdownDelay and
// SetPageSize apply from then on; SetLatency delays answers;
// SetAgentDelay and SilenceAgents hold agents back.
func TestTimeKnobs(t *testing.T) {
	clock := newClock()
	cells := cellstest.NewAgentCells()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, Cells: cells})
	ctx := t.Context()
	sim.SetAllocationDelay(10 * time.Second)
	sim.SetBootDelay(20 * time.Second)
	sim.SetShutdownDelay(5 * time.Second)
	sim.SetAgentDelay(time.Minute)
	p, err := begin(ctx, c, spec{name: "kip-slow", zone: "1"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	assertState(t, c, "kip-slow", "Creating", []string{"ProvisioningState/creating", "PowerState/starting"})
	clock.Advance(20 * time.Second)
	eventually(t, "the cell started", func() bool { return cells.IsStarted("kip-slow") })
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	if cells.AgentStarted("kip-slow") {
		t.Error("the agent started before its delay")
	}
	clock.Advance(time.Minute)
	if _, err := get(ctx, c, "kip-slow"); err != nil { // reading the VM starts a due agent
		t.Fatal(err)
	}
	eventually(t, "the agent started", func() bool { return cells.AgentStarted("kip-slow") })

	sim.SetAgentDelay(0)
	sim.SilenceAgents(1)
	sim.SetAllocationDelay(0)
	sim.SetBootDelay(0)
	mustCreate(t, c, spec{name: "kip-mute", zone: "1"})
	clock.Advance(time.Hour)
	if _, err := get(ctx, c, "kip-mute"); err != nil {
		t.Fatal(err)
	}
	if vm, _ := sim.VM(rg, "kip-mute"); !vm.Silent || vm.AgentStarted || vm.Address == "" {
		t.Errorf("silenced VM %+v; want silent, running with an address, no agent", vm)
	}

	sim.SetPageSize(1)
	page, err := c.vms.NewListPager(rg, nil).NextPage(ctx)
	if err != nil || len(page.Value) != 1 || page.NextLink == nil {
		t.Errorf("page of 1: %d VMs, next %v, %v", len(page.Value), page.NextLink, err)
	}

	dp, err := c.vms.BeginDelete(ctx, rg, "kip-slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cell stopped", func() bool { return cells.Stops("kip-slow") == 1 })
	if done, err := pollOnce(ctx, dp); err != nil || done {
		t.Fatalf("delete before the shutdown delay: done %v, %v", done, err)
	}
	clock.Advance(5 * time.Second)
	if _, err := dp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}

	sim.SetLatency(50 * time.Millisecond)
	start := time.Now()
	if _, err := get(ctx, c, "kip-mute"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answer in %v with a latency of 50ms", d)
	}
	if sim.Latency() != 50*time.Millisecond {
		t.Errorf("Latency %v", sim.Latency())
	}
}

// TestOSProvisioningFailure: a VM whose cell cannot start fails as a VM
// whose OS provisioning timed out.
func TestOSProvisioningFailure(t *testing.T) {
	cells := cellstest.NewFakeCells()
	cells.FailStart = errors.New("no cell")
	_, c := startSim(t, azuresim.Options{Cells: cells})
	_, err := create(t.Context(), c, spec{name: "kip-broken", zone: "1"})
	if s, code := respErr(err); code != "OSProvisioningTimedOut" {
		t.Fatalf("create: %v (%d %s); want OSProvisioningTimedOut", err, s, code)
	}
	vm, err := get(t.Context(), c, "kip-broken")
	if _, codes := states(vm); err != nil || len(codes) == 0 || codes[0] != "ProvisioningState/failed/OSProvisioningTimedOut" {
		t.Errorf("VM: %v, %v", codes, err)
	}
}
