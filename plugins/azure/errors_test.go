package azure

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// Every refusal of a launch Azure answers, on the wire (a synchronous
// error of the PUT, or an operation that fails), maps to its kind.
func TestLaunchErrorKinds(t *testing.T) {
	type want struct {
		kind      string
		types     []string               // QuotaExceeded's
		capacity  pluginapi.CapacityType // QuotaExceeded's, InsufficientCapacity's
		key       string                 // InvalidConfig's
		field     string                 // Unsupported's
		retry     time.Duration          // Throttled's
		vmDeleted bool                   // the failed VM is gone
	}
	for _, tc := range []struct {
		name    string
		spot    bool
		sync    *fakeError // the PUT's answer
		repeat  bool       // every PUT's, not the first's only
		async   *fakeError // the operation's error
		skusFor bool       // list the SKUs first (families known)
		want    want
	}{
		{name: "AllocationFailed", async: &fakeError{code: "AllocationFailed", message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."},
			want: want{kind: "capacity", capacity: pluginapi.CapacityOnDemand, vmDeleted: true}},
		{name: "ZonalAllocationFailed", async: &fakeError{code: "ZonalAllocationFailed", message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone."},
			want: want{kind: "capacity", capacity: pluginapi.CapacityOnDemand, vmDeleted: true}},
		{name: "OverconstrainedAllocationRequest", spot: true, async: &fakeError{code: "OverconstrainedAllocationRequest", message: "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too restrictive."},
			want: want{kind: "capacity", capacity: pluginapi.CapacitySpot, vmDeleted: true}},
		{name: "SkuNotAvailable", sync: &fakeError{status: 409, code: "SkuNotAvailable", message: "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: Standard_B2s' is currently not available in location 'eastus' zones '1'."},
			want: want{kind: "capacity", capacity: pluginapi.CapacityOnDemand}},
		{name: "family quota", skusFor: true, sync: &fakeError{status: 409, code: "OperationNotAllowed", message: "Operation could not be completed as it results in exceeding approved standardBSFamily Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 10, Current Usage: 10, Additional Required: 2, (Minimum) New Limit Required: 12."},
			want: want{kind: "quota", types: []string{"Standard_B2s"}, capacity: pluginapi.CapacityOnDemand}},
		{name: "family quota, sizes of the family", skusFor: true, sync: &fakeError{status: 409, code: "OperationNotAllowed", message: "Operation could not be completed as it results in exceeding approved standardDSv3Family Cores quota. Location: eastus, Current Limit: 10."},
			want: want{kind: "quota", types: []string{"Standard_B2s", "Standard_D2s_v3", "Standard_D4s_v3"}, capacity: pluginapi.CapacityOnDemand}},
		{name: "Spot quota", spot: true, sync: &fakeError{status: 409, code: "OperationNotAllowed", message: "Operation could not be completed as it results in exceeding approved LowPriorityCores quota. Location: eastus, Current Limit: 3."},
			want: want{kind: "quota", capacity: pluginapi.CapacitySpot}},
		{name: "regional quota", sync: &fakeError{status: 409, code: "OperationNotAllowed", message: "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Location: eastus, Current Limit: 10."},
			want: want{kind: "quota", capacity: pluginapi.CapacityOnDemand}},
		{name: "throttled", sync: &fakeError{status: 429, code: "TooManyRequests", message: "The request is being throttled.", retryAfter: "7"},
			want: want{kind: "throttled", retry: 7 * time.Second}},
		{name: "image not found", sync: &fakeError{status: 404, code: "PlatformImageNotFound", message: "The platform image 'Canonical:nothing:server:latest' is not available. Verify that all fields in the storage profile are correct. imageReference"},
			want: want{kind: "config", key: "image"}},
		{name: "InvalidParameter subnet", sync: &fakeError{status: 400, code: "InvalidParameter", message: "Subnet cells referenced by resource is not in the same Virtual Network."},
			want: want{kind: "config", key: "subnetID"}},
		{name: "InvalidParameter disk size", sync: &fakeError{status: 400, code: "InvalidParameter", message: "The specified disk size 2 GB is smaller than the size of the corresponding disk in the VM image: 30 GB. This is not allowed. Please choose equal or greater size. Target: 'osDisk.diskSizeGB'."},
			want: want{kind: "unsupported", field: pluginapi.FieldVolumeSizeGiB}},
		{name: "BadRequest VM size", sync: &fakeError{status: 400, code: "BadRequest", message: "The value Standard_B2s provided for the VM size is not valid. hardwareProfile.vmSize"},
			want: want{kind: "capacity", capacity: pluginapi.CapacityOnDemand}},
		{name: "ResourceNotFound of the subnet", sync: &fakeError{status: 404, code: "ResourceNotFound", message: "The Resource 'Microsoft.Network/virtualNetworks/kip-vnet/subnets/cells' under resource group 'kip-net' was not found."},
			want: want{kind: "config", key: "subnetID"}},
		{name: "ResourceNotFound of the group", sync: &fakeError{status: 404, code: "ResourceGroupNotFound", message: "Resource group 'kip-cells' could not be found."},
			want: want{kind: "notfound"}},
		{name: "Conflict of a VM being deleted", repeat: true, sync: &fakeError{status: 409, code: "Conflict", message: "The operation conflicts with another operation on the VM."},
			want: want{kind: "transient"}},
		{name: "server error", sync: &fakeError{status: 500, code: "InternalServerError", message: "An unexpected error occurred."},
			want: want{kind: "transient"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			p := configured(t, f, testConfig(f))
			if tc.skusFor {
				if _, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.sync != nil {
				f.mu.Lock()
				f.errs["VirtualMachines_CreateOrUpdate"] = []fakeError{*tc.sync}
				if tc.repeat {
					f.errs["VirtualMachines_CreateOrUpdate"] = append(f.errs["VirtualMachines_CreateOrUpdate"], *tc.sync)
				}
				f.mu.Unlock()
			}
			if tc.async != nil {
				f.failAllocation(tc.async.code, tc.async.message, 1)
			}
			req := launchRequest("kip-err")
			if tc.spot {
				req.CapacityType = pluginapi.CapacitySpot
			}
			_, err := p.Launch(t.Context(), req)
			if err == nil {
				t.Fatal("Launch succeeded; want an error")
			}
			var got want
			var ic *pluginapi.InsufficientCapacityError
			var qe *pluginapi.QuotaExceededError
			var th *pluginapi.ThrottledError
			var cfgErr *pluginapi.InvalidConfigError
			var un *pluginapi.UnsupportedError
			switch {
			case errors.As(err, &ic):
				got.kind, got.capacity = "capacity", ic.CapacityType
				if ic.InstanceType != "Standard_B2s" || ic.Zone != "eastus-1" {
					t.Errorf("InsufficientCapacity names %s in %s; want Standard_B2s in eastus-1", ic.InstanceType, ic.Zone)
				}
			case errors.As(err, &qe):
				got.kind, got.types, got.capacity = "quota", qe.InstanceTypes, qe.CapacityType
			case errors.As(err, &th):
				got.kind, got.retry = "throttled", th.RetryAfter
			case errors.As(err, &cfgErr):
				got.kind, got.key = "config", cfgErr.Key
			case errors.As(err, &un):
				got.kind, got.field = "unsupported", un.Field
			case pluginapi.IsNotFound(err):
				got.kind = "notfound"
			case pluginapi.IsTransient(err):
				got.kind = "transient"
			default:
				got.kind = "other: " + err.Error()
			}
			_, exists := f.vm("kip-err")
			got.vmDeleted = tc.async != nil && !exists
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Launch: %v\n(-want +got):\n%s", err, diff)
			}
			code := tc.sync
			if code == nil {
				code = tc.async
			}
			if !strings.Contains(err.Error(), code.code) {
				t.Errorf("the error %q does not name Azure's code %s", err, code.code)
			}
		})
	}
}

// Errors of other calls map to their kinds too: a credential Azure refuses
// names credentials, a missing permission names the role.
func TestMapError(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	cfg, _ := p.cfg.Get()
	for _, tc := range []struct {
		err  fakeError
		want func(error) bool
		text string
	}{
		{fakeError{status: 401, code: "InvalidAuthenticationToken", message: "The access token is invalid."}, pluginapi.IsInvalidConfig, "credentials"},
		{fakeError{status: 403, code: "AuthorizationFailed", message: "The client does not have authorization to perform action 'Microsoft.Compute/virtualMachines/read'."}, func(err error) bool { return !pluginapi.IsTransient(err) }, "deploy/azure/role.json"},
		{fakeError{status: 429, code: "TooManyRequests", message: "throttled", retryAfter: "7"}, pluginapi.IsThrottled, "TooManyRequests"},
		{fakeError{status: 503, code: "ServiceUnavailable", message: "try later"}, pluginapi.IsTransient, "ServiceUnavailable"},
		{fakeError{status: 404, code: "ResourceNotFound", message: "gone"}, pluginapi.IsNotFound, "ResourceNotFound"},
	} {
		f.mu.Lock()
		f.errs["VirtualMachines_Get"] = []fakeError{tc.err}
		f.mu.Unlock()
		_, err := cfg.getVM(t.Context(), "kip-x")
		got := mapError("VirtualMachines_Get", err)
		if !tc.want(got) || !strings.Contains(got.Error(), tc.text) {
			t.Errorf("%d %s: mapped to %v (%T); want its kind, naming %q", tc.err.status, tc.err.code, got, got, tc.text)
		}
		var ic *pluginapi.InvalidConfigError
		if errors.As(got, &ic) && ic.Key != "credentials" {
			t.Errorf("%s: InvalidConfig names %q; want credentials", tc.err.code, ic.Key)
		}
	}
}
