package azure

import (
	"context"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// azVM is a VM as the plugin's view keeps it: the contract's instance, and
// what WatchEvents and Launch need beside it.
type azVM struct {
	pluginapi.Instance
	spot bool
	// provisioning is the VM's provisioningState (Creating, Succeeded,
	// Failed, Deleting, …); failure is the code of a Failed VM's
	// ProvisioningState/failed/<code> status.
	provisioning string
	failure      string
}

// Describe returns the named instances that exist. VMs of the cluster come
// from the shared snapshot (at most SnapshotAge old, refreshed once for all
// the cells asking); others, which the host rarely asks for, from
// VirtualMachines_Get. An ID that is not a cell's VM name names nothing,
// and a VM without the cell tag is not a cell and is left out.
func (p *provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.Describe(ctx, cfg.view, p.SnapshotAge, req.IDs, cfg.reported, kit.LookupEach(cfg.reported, func(ctx context.Context, id string) (azVM, bool, error) {
		if !vmNameRE.MatchString(id) {
			return azVM{}, false, nil
		}
		vm, err := cfg.getVM(ctx, id)
		if isNotFound(err) {
			return azVM{}, false, nil
		}
		if err != nil {
			return azVM{}, false, mapError("VirtualMachines_Get", err)
		}
		return vm, true, nil
	}))
}

// List returns the cluster's instances from the shared snapshot, at most
// SnapshotAge old, and never older than a Launch whose outcome was not
// seen.
func (p *provider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return kit.List(ctx, cfg.view, p.SnapshotAge, cfg.reported)
}

// evictionReason is why a Spot VM ends that this plugin did not delete:
// Azure is evicting it (capacity or price), and with evictionPolicy Delete
// the VM is deleted.
const evictionReason = "spot eviction: Azure is reclaiming the VM"

// reported is an instance as Describe and List return it: a Spot VM that
// is ending though this plugin did not delete it says it is evicted, as
// WatchEvents infers it.
func (cfg *config) reported(vm azVM) pluginapi.Instance {
	in := vm.Instance
	if vm.spot && vm.failure == "" && ending(in.State) && !cfg.deleting.Has(in.ID) {
		in.StateReason = strings.TrimSuffix(evictionReason+" ("+in.StateReason+")", " ()")
	}
	return in
}

// getVM reads one VM with its instance view (VirtualMachines_Get); its
// address is the view's, if the view knows it (a GET of the NIC would
// cost a call for what the next List brings).
func (cfg *config) getVM(ctx context.Context, name string) (azVM, error) {
	got, err := cfg.clients.vms.Get(ctx, cfg.resourceGroup, name, &armcompute.VirtualMachinesClientGetOptions{Expand: ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		return azVM{}, err
	}
	vm := vmFromAzure(&got.VirtualMachine, cfg.location)
	if known, ok := cfg.view.Lookup(vm.ID); ok {
		vm.Addresses = known.Addresses
	}
	return vm, nil
}

// fetchCluster returns the view's source: every VM of the resource group
// tagged with the cluster, in any state, from one paginated
// VirtualMachines_List with the instance view (ARM's VM list has no tag
// filter: the plugin filters), and their private addresses from one
// paginated NetworkInterfaces_List of the resource group.
func (p *provider) fetchCluster(cfg *config) func(context.Context) (map[string]azVM, error) {
	return func(ctx context.Context) (map[string]azVM, error) {
		out := map[string]azVM{}
		pager := cfg.clients.vms.NewListPager(cfg.resourceGroup, &armcompute.VirtualMachinesClientListOptions{Expand: ptr(armcompute.ExpandTypeForListVMsInstanceView)})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, mapError("VirtualMachines_List", err)
			}
			for _, v := range page.Value {
				vm := vmFromAzure(v, cfg.location)
				if vm.CellID == "" || vm.Tags[pluginapi.TagCluster] != cfg.clusterID {
					continue
				}
				out[vm.ID] = vm
			}
		}
		if len(out) == 0 {
			return out, nil
		}
		ips := map[string][]pluginapi.Address{}
		nics := cfg.clients.nics.NewListPager(cfg.resourceGroup, nil)
		for nics.More() {
			page, err := nics.NextPage(ctx)
			if err != nil {
				return nil, mapError("NetworkInterfaces_List", err)
			}
			for _, nic := range page.Value {
				if vm, addrs := nicAddresses(nic); vm != "" && len(addrs) > 0 {
					ips[strings.ToLower(vm)] = addrs
				}
			}
		}
		for id, vm := range out {
			if addrs := ips[strings.ToLower(id)]; len(addrs) > 0 {
				vm.Addresses = addrs
				out[id] = vm
			}
		}
		return out, nil
	}
}

// nicAddresses is the VM a NIC belongs to (its name) and the NIC's
// addresses: the private address, its primary IP configuration's (else its
// first's), then the pod's own (AddressPod), the first secondary IP
// configuration's (primary false), which Launch asks for. A VM launched
// without one (by an earlier version) has none, and its pod shares the
// VM's network. Without a private address there are none.
func nicAddresses(nic *armnetwork.Interface) (vm string, addrs []pluginapi.Address) {
	if nic == nil || nic.Properties == nil || nic.Properties.VirtualMachine == nil {
		return "", nil
	}
	vm = lastSegment(deref(nic.Properties.VirtualMachine.ID))
	var private, pod string
	for _, c := range nic.Properties.IPConfigurations {
		if c == nil || c.Properties == nil || deref(c.Properties.PrivateIPAddress) == "" {
			continue
		}
		ip := *c.Properties.PrivateIPAddress
		switch {
		case deref(c.Properties.Primary):
			private = ip
		case c.Properties.Primary != nil && pod == "":
			pod = ip
		}
		if private == "" {
			private = ip
		}
	}
	if private == "" {
		return vm, nil
	}
	addrs = []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: private}}
	if pod != "" && pod != private {
		addrs = append(addrs, pluginapi.Address{Type: pluginapi.AddressPod, Address: pod})
	}
	return vm, addrs
}

// vmFromAzure converts an ARM VM. Its states map to the contract's
// (stateFromAzure); a deleted VM is absent.
func vmFromAzure(v *armcompute.VirtualMachine, location string) azVM {
	tags := tagsFromAzure(v.Tags)
	vm := azVM{Instance: pluginapi.Instance{
		ID:           deref(v.Name),
		CapacityType: pluginapi.CapacityOnDemand,
		Tags:         tags,
	}}
	if _, ok := tags[pluginapi.TagCell]; ok {
		vm.CellID = vm.ID
	}
	if len(v.Zones) > 0 {
		vm.Zone = zoneName(location, deref(v.Zones[0]))
	}
	props := v.Properties
	if props == nil {
		vm.State = pluginapi.StateUnknown
		return vm
	}
	if props.HardwareProfile != nil {
		vm.InstanceType = string(deref(props.HardwareProfile.VMSize))
	}
	if pr := deref(props.Priority); pr == armcompute.VirtualMachinePriorityTypesSpot || pr == armcompute.VirtualMachinePriorityTypesLow {
		vm.spot, vm.CapacityType = true, pluginapi.CapacitySpot
	}
	if props.TimeCreated != nil {
		vm.LaunchedAt = *props.TimeCreated
	}
	vm.provisioning = deref(props.ProvisioningState)
	var statuses []*armcompute.InstanceViewStatus
	if props.InstanceView != nil {
		statuses = props.InstanceView.Statuses
	}
	vm.State, vm.StateReason, vm.failure = stateFromAzure(vm.provisioning, statuses)
	return vm
}

// stateFromAzure maps a VM's provisioningState and its instance view's
// statuses (ProvisioningState/<state>[/<code>], PowerState/<state>):
//
//   - Creating, or Succeeded without a power state yet, or PowerState/starting:
//     pending;
//   - PowerState/running: running;
//   - Deleting, or PowerState/stopping or deallocating: terminating;
//   - Failed: terminated, the reason the failed status's message;
//   - PowerState/stopped or deallocated: terminated, stopped outside Kip
//     (the host ends such a cell).
func stateFromAzure(provisioning string, statuses []*armcompute.InstanceViewStatus) (state pluginapi.InstanceState, reason, failure string) {
	var power, failMsg string
	for _, s := range statuses {
		code := deref(s)
		switch c := deref(code.Code); {
		case strings.HasPrefix(c, "PowerState/"):
			power = strings.TrimPrefix(c, "PowerState/")
		case strings.HasPrefix(c, "ProvisioningState/failed"):
			failure = strings.TrimPrefix(strings.TrimPrefix(c, "ProvisioningState/failed"), "/")
			failMsg = deref(code.Message)
		}
	}
	switch strings.ToLower(provisioning) {
	case "creating":
		return pluginapi.StatePending, "", ""
	case "deleting":
		return pluginapi.StateTerminating, "VM being deleted", ""
	case "failed":
		reason = "VM provisioning failed"
		if failure != "" {
			reason += ": " + failure
		}
		if failMsg != "" {
			reason += ": " + failMsg
		}
		return pluginapi.StateTerminated, reason, failure
	}
	switch power {
	case "running":
		return pluginapi.StateRunning, "", ""
	case "starting", "":
		return pluginapi.StatePending, "", ""
	case "stopping", "deallocating":
		return pluginapi.StateTerminating, "VM " + power + " outside Kip", ""
	case "stopped", "deallocated":
		return pluginapi.StateTerminated, "VM " + power + " outside Kip", ""
	}
	return pluginapi.StateUnknown, "PowerState/" + power, ""
}
