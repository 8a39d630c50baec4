package azuresim

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Quota names InjectQuota takes besides a size family
// (standardDSv3Family): Spot VMs' vCPUs, and the region's vCPUs of
// regular VMs.
const (
	QuotaLowPriorityCores = "LowPriorityCores"
	QuotaRegionalCores    = "cores"
)

// InjectAllocationFailure makes the creates of size in zone (empty
// matches any; the most specific applies) fail as Azure fails them when
// it has no capacity: the PUT is accepted (201) and the operation ends
// Failed, AllocationDelay later, with code (AllocationFailed when empty,
// ZonalAllocationFailed or OverconstrainedAllocationRequest); the VM
// stays, provisioningState Failed, until deleted. It applies until
// ClearAllocationFailures.
func (s *Server) InjectAllocationFailure(size, zone, code string) {
	s.allocFails.Inject(size, zone, cmp.Or(code, CodeAllocationFailed))
}

// ClearAllocationFailures removes every injected allocation failure.
func (s *Server) ClearAllocationFailures() { s.allocFails.ClearAll() }

// allocationError is a failed create's error, as Compute words it.
func allocationError(code string) *armError {
	msg := "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. " +
		"Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
	switch code {
	case CodeZonalAllocationFailed:
		msg = "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone. " +
			"Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
	case CodeOverconstrainedAllocationRequest:
		msg = "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too restrictive. " +
			"Please remove some constraints and try again. Constraints applied are:\n  - Availability Zone\n  - VM Size\n"
	}
	return &armError{Status: http.StatusOK, Code: code, Message: msg}
}

// SkuNotAvailable makes size unavailable in zone (empty matches any) for
// the subscription: a PUT is refused with 409 SkuNotAvailable, and
// resourceSkus lists a Zone restriction (a Location one when every zone
// is). It applies until ClearSkuNotAvailable.
func (s *Server) SkuNotAvailable(size, zone string) { s.unavailable.Inject(size, zone, true) }

// ClearSkuNotAvailable makes every size available again.
func (s *Server) ClearSkuNotAvailable() { s.unavailable.ClearAll() }

func (s *Server) skuUnavailable(size, zone string) bool {
	_, short := s.unavailable.Short(size, zone)
	return short
}

// InjectQuota sets a vCPU quota: a size family's (standardDSv3Family, the
// regular VMs of that family), QuotaLowPriorityCores (every Spot VM) or
// QuotaRegionalCores (every regular VM). A PUT that would take the VMs
// that exist (not Failed nor deallocated) over it is refused with 409
// OperationNotAllowed, as Compute refuses it. It applies until
// ClearQuotas.
func (s *Server) InjectQuota(name string, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas[name] = limit
}

// ClearQuotas removes every injected quota.
func (s *Server) ClearQuotas() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.quotas)
}

// refusal is the error a new VM's PUT is refused with: SkuNotAvailable,
// or a quota it would exceed. The caller holds s.mu.
func (s *Server) refusal(size Size, zone string, sp *spec) *armError {
	if !size.offered(zone) || s.skuUnavailable(size.Name, zone) {
		where := fmt.Sprintf("location '%s'", s.opts.Location)
		if zone != "" {
			where += fmt.Sprintf(" zones '%s'", zone)
		}
		return &armError{Status: http.StatusConflict, Code: CodeSkuNotAvailable,
			Message: fmt.Sprintf("The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: %s' is currently not available in %s "+
				"for subscription '%s'. Please try another size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable for details.",
				size.Name, where, s.opts.Subscription)}
	}
	spot := sp.Props.Priority == "Spot" || sp.Props.Priority == "Low"
	names := []string{size.family(), QuotaRegionalCores}
	if spot {
		names = []string{QuotaLowPriorityCores}
	}
	now := s.now()
	for _, name := range names {
		limit, set := s.quotas[name]
		if !set {
			continue
		}
		usage := 0
		for _, v := range s.order {
			if v.gone(now) || v.deallocated || v.failed(now) != nil || v.spot != spot {
				continue
			}
			if name == QuotaRegionalCores || name == QuotaLowPriorityCores || v.size.family() == name {
				usage += v.size.VCPUs
			}
		}
		if usage+size.VCPUs > limit {
			return quotaError(name, s.opts.Location, limit, usage, size.VCPUs)
		}
	}
	return nil
}

// quotaError is Compute's refusal of a PUT over a vCPU quota.
func quotaError(name, location string, limit, usage, need int) *armError {
	what := name + " Cores"
	switch name {
	case QuotaLowPriorityCores:
		what = "LowPriorityCores"
	case QuotaRegionalCores:
		what = "Total Regional Cores"
	}
	msg := fmt.Sprintf("Operation could not be completed as it results in exceeding approved %s quota. Additional details - "+
		"Deployment Model: Resource Manager, Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d, "+
		"(Minimum) New Limit Required: %d. Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView "+
		"by specifying parameters listed in the 'Details' section for deployment to succeed. Please read more about quota limits at "+
		"https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests",
		what, location, limit, usage, need, usage+need)
	return &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed, Message: msg,
		Details: []errorDetail{{Code: "QuotaExceeded", Message: msg}}}
}

// Evict reclaims the Spot VM named name (in any resource group) as Azure
// does: with evictionPolicy Delete it is Deleting for the shutdown delay
// while its cell stops, then gone with its NIC and disk, without a
// DELETE; with Deallocate it stays, PowerState/deallocated, its cell
// stopped.
func (s *Server) Evict(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var v *vm
	for _, rg := range s.opts.ResourceGroups {
		if it := s.live(rg, name, now); it != nil {
			v = it
		}
	}
	switch {
	case v == nil:
		return fmt.Errorf("evicting %s: no such VM", name)
	case !v.spot:
		return fmt.Errorf("evicting %s: not a Spot VM", name)
	case v.provisioningState(now) != StateSucceeded || v.deallocated:
		return fmt.Errorf("evicting %s: VM is %s %s", name, v.provisioningState(now), v.powerState(now))
	}
	v.evicted = true
	if v.eviction == "Delete" {
		s.beginDelete(v, now)
	} else {
		v.deallocated = true
		s.cells.StopLocked(cellVM{s, v})
	}
	s.log.Info("VM evicted", "vm", name, "cell", v.cell.LogAttr, "policy", v.eviction)
	return nil
}

// SetAgentDelay sets how long after they run the VMs created from now on
// start their cell agents (Options.AgentDelay).
func (s *Server) SetAgentDelay(d time.Duration) { s.cells.SetAgentDelay(d) }

// SilenceAgents makes the next n VMs created never start their cell
// agents: they run, with an address, and nothing answers there, as a VM
// whose image or boot recipe is broken. It needs a CellStarter that is an
// AgentStarter (localcells.LocalCells).
func (s *Server) SilenceAgents(n int) { s.cells.Silence(n) }

// VM returns what the server knows of the VM named name in rg, as it is
// now, including one that is gone after its delete.
func (s *Server) VM(rg, name string) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vms[keyOf(rg, name)]
	if v == nil {
		return VM{}, false
	}
	return v.snapshot(s.now()), true
}

// VMs returns every VM ever created, in PUT order (a Failed VM created
// again by a second PUT once, as it is now).
func (s *Server) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]VM, 0, len(s.order))
	for _, v := range s.order {
		if !v.replaced {
			out = append(out, v.snapshot(now))
		}
	}
	return out
}

// cellVM is a VM as its cell's Lifecycle sees it (simcells.Instance);
// its methods run under s.mu.
type cellVM struct {
	s *Server
	v *vm
}

func (c cellVM) Cell() *simcells.Cell { return &c.v.cell }
func (c cellVM) ReadyAt() time.Time   { return c.v.runningAt }

// StartFailed fails a VM whose cell could not start, as a VM whose OS
// provisioning did not finish: provisioningState Failed with
// OSProvisioningTimedOut.
func (c cellVM) StartFailed(time.Time) { c.v.startFailed = true }

// CellStopped stops the VM's metadata service once its cell stopped.
func (c cellVM) CellStopped(time.Time) { c.s.stopIMDS(c.v) }

// CellSizes are the local cell sizes of VM sizes (for a CellStarter such
// as localcells.LocalCells, which sizes cells like the sizes the
// simulator launches).
func CellSizes(sizes []Size) []simcells.InstanceType {
	out := make([]simcells.InstanceType, 0, len(sizes))
	for _, z := range sizes {
		out = append(out, simcells.InstanceType{Name: z.Name, VCPUs: int32(z.VCPUs), MemoryMiB: int64(z.MemoryMiB)}) //nolint:gosec // Azure's vCPU counts fit
	}
	return out
}
