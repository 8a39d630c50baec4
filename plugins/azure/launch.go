package azure

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
)

// vmNameRE is a cell ID Launch takes as a Linux VM's name and computer
// name: lowercase letters, digits and hyphens, at most 64, starting and
// ending with a letter or digit (Kip's kip-<pod UID> and kip-<uid>-r<n>).
var vmNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,62}[a-z0-9])?$`)

// Launch creates the cell's VM with one VirtualMachines_CreateOrUpdate
// (PUT, If-None-Match: *) named after the cell ID, with its NIC and OS
// disk inline (deleted with the VM), and follows the operation until it
// ends (Azure-AsyncOperation, Retry-After honoured): a zone out of
// capacity fails the operation, not the PUT, and the host needs that
// failure to try its next offering. A VM whose operation failed for want
// of capacity is deleted (and waited for) before Launch answers
// InsufficientCapacity, so that the host's next attempt can reuse the
// name.
//
// It is idempotent four ways. A create under way in this process is
// followed again from its poller's resume token when the host retries
// (its context ended first). A cell this process terminated is answered
// terminated, starting nothing. A VM of the cell the view knows (after a
// restart, too) is followed by VirtualMachines_Get while it is Creating,
// deleted and refused while Failed, and answered otherwise. And the PUT is
// create-only (If-None-Match: *): a VM of that name that exists answers
// 412, and the plugin reads it, answering its own cluster's and refusing
// another's.
func (p *provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := cfg.plan(req)
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	cell := req.CellID
	if cfg.deleting.Has(cell) {
		inst := plan.instance(p.Now())
		if vm, ok := cfg.view.Lookup(cell); ok {
			inst = vm.Instance
		}
		if inst.State != pluginapi.StateTerminated {
			inst.State = pluginapi.StateTerminating
		}
		inst.StateReason = "the cell's VM was terminated"
		p.Log.Info("cell terminated before; starting nothing", "cell", cell)
		return &pluginapi.LaunchResponse{Instance: inst}, nil
	}
	if tok := p.resume.get(cell); tok != "" {
		poller, err := cfg.clients.vms.BeginCreateOrUpdate(ctx, cfg.resourceGroup, cell, armcompute.VirtualMachine{},
			&armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		if err == nil {
			p.Log.Info("following the cell's create again", "cell", cell)
			return p.follow(ctx, cfg, plan, poller)
		}
		p.resume.drop(cell)
		p.Log.Warn("cannot resume the cell's create; looking for its VM", "cell", cell, "error", err)
	}
	vm, known, err := cfg.knownCell(ctx, cell)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		// The PUT is create-only by itself: go on without the view.
		p.Log.Warn("launching a cell without the view of the cluster", "cell", cell, "error", err)
	case known:
		if resp, err, gone := p.existing(ctx, cfg, plan, vm); !gone {
			return resp, err
		}
	}
	return p.create(ctx, cfg, plan)
}

// create sends the PUT and follows its operation. A PUT that finds the
// name taken reads the VM (existing); a VM gone meanwhile (or a failed
// one of another offering, deleted) is created once more.
func (p *provider) create(ctx context.Context, cfg *config, plan *launchPlan) (*pluginapi.LaunchResponse, error) {
	cell := plan.cellID
	for attempt := 0; ; attempt++ {
		poller, err := cfg.clients.vms.BeginCreateOrUpdate(ctx, cfg.resourceGroup, cell, plan.vm,
			&armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions{IfNoneMatch: ptr("*")})
		if err == nil {
			return p.follow(ctx, cfg, plan, poller)
		}
		if ctx.Err() != nil || !nameTaken(err) {
			// The VM may exist even so (the answer was lost): the next
			// List must ask Azure rather than trust the snapshot.
			cfg.view.Uncertain()
			return nil, fmt.Errorf("launching cell %s: %w", cell, cfg.mapLaunchError(err, plan.spec, plan.zone, plan.capacity))
		}
		vm, gerr := cfg.getVM(ctx, cell)
		switch {
		case isNotFound(gerr):
		case gerr != nil:
			return nil, fmt.Errorf("launching cell %s: getting its existing VM: %w", cell, mapError("VirtualMachines_Get", gerr))
		default:
			if resp, err, gone := p.existing(ctx, cfg, plan, vm); !gone {
				return resp, err
			}
		}
		if attempt > 0 {
			return nil, pluginapi.NewTransient("launching cell %s: VM %s existed and is gone now (%v)", cell, cell, mapError("VirtualMachines_CreateOrUpdate", err))
		}
	}
}

// nameTaken reports whether a PUT was refused because a VM of that name
// exists (412 of If-None-Match), or is being created or deleted (409
// Conflict, or OperationNotAllowed that is no quota's).
func nameTaken(err error) bool {
	re, ae, ok := responseError(err)
	if !ok {
		return false
	}
	return re.StatusCode == http.StatusPreconditionFailed ||
		(re.StatusCode == http.StatusConflict && (ae.Code == "Conflict" || (ae.Code == "OperationNotAllowed" && !isQuota(ae))))
}

// follow polls a create's operation until it ends, keeping its resume
// token meanwhile: a Launch whose context ends first leaves the token, and
// the host's retry follows the same operation.
func (p *provider) follow(ctx context.Context, cfg *config, plan *launchPlan, poller *runtime.Poller[armcompute.VirtualMachinesClientCreateOrUpdateResponse]) (*pluginapi.LaunchResponse, error) {
	cell := plan.cellID
	if tok, err := poller.ResumeToken(); err == nil {
		p.resume.put(cell, tok)
	}
	res, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.lroFrequency})
	if err != nil {
		cfg.view.Uncertain()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !poller.Done() {
			// A poll failed (throttled, unreachable): the token follows
			// the operation again at the next try.
			return nil, fmt.Errorf("launching cell %s: following the create: %w", cell, mapError("VirtualMachines_CreateOrUpdate", err))
		}
		p.resume.drop(cell)
		return nil, p.failed(ctx, cfg, plan, err)
	}
	p.resume.drop(cell)
	vm := vmFromAzure(&res.VirtualMachine, cfg.location)
	if c := vm.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
		return nil, fmt.Errorf("launching cell %s: VM %s in resource group %s is tagged for cluster %q, not this cluster's %q; cell IDs must be unique in the resource group",
			cell, cell, cfg.resourceGroup, c, cfg.clusterID)
	}
	switch {
	case vm.State == pluginapi.StateUnknown:
		vm.State = pluginapi.StatePending
	case vm.State == pluginapi.StatePending && strings.EqualFold(vm.provisioning, "Succeeded") &&
		(res.Properties == nil || res.Properties.InstanceView == nil):
		// The create's operation succeeds once the VM has provisioned,
		// that is runs; the final GET carries no instance view to say so.
		vm.State = pluginapi.StateRunning
	}
	vm = p.withAddress(ctx, cfg, vm)
	cfg.view.Launched(vm.ID, vm)
	p.Log.Info("cell launched", "cell", cell, "instance", vm.ID, "type", plan.spec, "zone", plan.zone, "capacity_type", plan.capacity)
	return &pluginapi.LaunchResponse{Instance: vm.Instance}, nil
}

// withAddress gives a running VM that has no address yet its NIC's
// private address, with one NetworkInterfaces_Get of the NIC Launch
// created (<cell>-nic): the create's operation ends when the VM runs, and
// the host, which needs the address to reach the cell's agent, would
// otherwise wait for the view's next NIC listing. A failed read leaves the
// VM as it is (the view brings the address later).
func (p *provider) withAddress(ctx context.Context, cfg *config, vm azVM) azVM {
	if vm.State != pluginapi.StateRunning || vm.PrivateAddress() != "" {
		return vm
	}
	nic, err := cfg.clients.nics.Get(ctx, cfg.resourceGroup, vm.ID+"-nic", nil)
	if err != nil {
		p.Log.Warn("reading the NIC of a launched VM; its address comes with the next listing", "cell", vm.CellID, "error", err)
		return vm
	}
	if owner, addrs := nicAddresses(&nic.Interface); len(addrs) > 0 && strings.EqualFold(owner, vm.ID) {
		vm.Addresses = addrs
	}
	return vm
}

// failed answers a create whose operation failed: the failed VM is deleted
// (and waited for) so that the name is free, and the failure is mapped
// (an allocation failure is InsufficientCapacity).
func (p *provider) failed(ctx context.Context, cfg *config, plan *launchPlan, opErr error) error {
	cell := plan.cellID
	if err := p.deleteAndWait(ctx, cfg, cell); err != nil {
		p.Log.Warn("deleting the VM of a failed launch failed; the next List shows it", "cell", cell, "error", err)
	}
	p.Log.Info("cell launch failed", "cell", cell, "type", plan.spec, "zone", plan.zone, "capacity_type", plan.capacity, "error", opErr)
	return fmt.Errorf("launching cell %s: %w", cell, cfg.mapLaunchError(opErr, plan.spec, plan.zone, plan.capacity))
}

// existing answers a launch whose VM Azure already has: another cluster's
// is refused; one being created is followed with VirtualMachines_Get
// until its provisioning ends; a failed one is deleted, and its failure
// answered when it was this offering's (a launch retried after a
// restart), else the name is free for this one; any other is the answer.
// gone is true when the VM no longer exists (the caller creates it).
func (p *provider) existing(ctx context.Context, cfg *config, plan *launchPlan, vm azVM) (resp *pluginapi.LaunchResponse, err error, gone bool) {
	cell := plan.cellID
	for {
		if c := vm.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
			return nil, fmt.Errorf("launching cell %s: resource group %s already has a VM named %s, of cluster %q, not this cluster's %q; cell IDs must be unique in the resource group",
				cell, cfg.resourceGroup, cell, c, cfg.clusterID), false
		}
		if !strings.EqualFold(vm.provisioning, "Creating") {
			break
		}
		if err := p.Sleep(ctx, p.lroFrequency); err != nil {
			return nil, err, false
		}
		if vm, err = cfg.getVM(ctx, cell); err != nil {
			if isNotFound(err) {
				return nil, nil, true
			}
			return nil, fmt.Errorf("launching cell %s: following its VM's creation: %w", cell, mapError("VirtualMachines_Get", err)), false
		}
	}
	if strings.EqualFold(vm.provisioning, "Failed") {
		if err := p.deleteAndWait(ctx, cfg, cell); err != nil {
			return nil, fmt.Errorf("launching cell %s: deleting its failed VM: %w", cell, mapError("VirtualMachines_Delete", err)), false
		}
		cfg.view.Uncertain()
		if vm.InstanceType != plan.spec || vm.Zone != plan.zone || vm.CapacityType != plan.capacity {
			return nil, nil, true
		}
		text := fmt.Sprintf("VirtualMachines_CreateOrUpdate: the cell's VM failed: %s", vm.StateReason)
		if slices.Contains(capacityCodes, vm.failure) {
			return nil, fmt.Errorf("launching cell %s: %w", cell, pluginapi.NewInsufficientCapacity(plan.spec, plan.zone, plan.capacity, text)), false
		}
		return nil, pluginapi.NewTransient("launching cell %s: %s (the VM is deleted; a retry creates it again)", cell, text), false
	}
	vm = p.withAddress(ctx, cfg, vm)
	cfg.view.Launched(vm.ID, vm)
	p.Log.Info("cell launched before; returning its VM", "cell", cell, "instance", vm.ID, "state", vm.State)
	return &pluginapi.LaunchResponse{Instance: vm.Instance}, nil, false
}

// knownCell returns the cell's VM when the plugin's view of the cluster
// knows one. The view is refreshed only when it has never been fetched or
// a launch's outcome was unknown since.
func (cfg *config) knownCell(ctx context.Context, cell string) (azVM, bool, error) {
	snap, err := cfg.view.Get(ctx, anyAge)
	if err != nil {
		return azVM{}, false, err
	}
	vm, ok := snap[cell]
	return vm, ok, nil
}

// anyAge accepts a snapshot of any age.
const anyAge = 100 * 365 * 24 * time.Hour

// launchPlan is a VirtualMachines_CreateOrUpdate call and what it was made
// of.
type launchPlan struct {
	vm       armcompute.VirtualMachine
	cellID   string
	zone     string // the contract's, eastus-1
	capacity pluginapi.CapacityType
	tags     map[string]string
	spec     string // the VM size
}

// instance is the plan's instance before Azure shows it: pending, no
// address yet.
func (pl *launchPlan) instance(now time.Time) pluginapi.Instance {
	return pluginapi.Instance{
		ID: pl.cellID, CellID: pl.cellID, InstanceType: pl.spec, Zone: pl.zone,
		CapacityType: pl.capacity, State: pluginapi.StatePending, Tags: pl.tags, LaunchedAt: now,
	}
}

// networkAPIVersion is the Microsoft.Network API version ARM uses for the
// inline NIC (networkProfile.networkApiVersion).
const networkAPIVersion = armcompute.NetworkAPIVersionTwoThousandTwenty1101

// podIPConfig names the NIC's IP configuration whose address is the pod's.
const podIPConfig = "ipconfig-pod"

// plan turns a launch request into the VM to PUT. It is pure: the same
// request and configuration give the same body.
func (cfg *config) plan(req *pluginapi.LaunchRequest) (*launchPlan, error) {
	capacity, err := req.Capacity()
	if err != nil {
		return nil, err
	}
	if !vmNameRE.MatchString(req.CellID) {
		return nil, fmt.Errorf("cell ID %q is not an Azure Linux VM name the plugin takes (at most 64 lowercase letters, digits and hyphens, starting and ending with a letter or digit)", req.CellID)
	}
	if len(req.SecurityGroups) > 0 {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldSecurityGroups, "the azure plugin has no per-pod security groups: every cell's NIC has networkSecurityGroupID")
	}
	if req.InstanceProfile != "" {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldInstanceProfile, "the azure plugin has no instance profiles: the cells' managed identity is identity")
	}
	image, err := cfg.imageReference(req.Image)
	if err != nil {
		return nil, err
	}
	zone, err := cfg.placement(req, capacity)
	if err != nil {
		return nil, err
	}
	az, _ := cfg.azureZone(zone)
	userData := base64.StdEncoding.EncodeToString(req.Bootstrap)
	if len(userData) > maxUserData {
		return nil, fmt.Errorf("the cell's bootstrap is %d bytes in base64; Azure's userData takes at most %d", len(userData), maxUserData)
	}
	tags := pluginapi.StandardTags(cfg.clusterID, req)

	osDisk := &armcompute.OSDisk{
		CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage),
		DeleteOption: ptr(armcompute.DiskDeleteOptionTypesDelete),
	}
	if req.VolumeSizeGiB > 0 {
		osDisk.DiskSizeGB = ptr(req.VolumeSizeGiB)
	}
	nic := &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
		Primary:      ptr(true),
		DeleteOption: ptr(armcompute.DeleteOptionsDelete),
		// A second IP configuration in the subnet is the pod's own
		// address (pluginapi.AddressPod): the agent gives it to the pod's
		// network namespace, so that a pod never shares the VM's network;
		// the virtual network routes it to the NIC, as Azure CNI's pod
		// addresses.
		IPConfigurations: []*armcompute.VirtualMachineNetworkInterfaceIPConfiguration{{
			Name: ptr("ipconfig1"),
			Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
				Primary: ptr(true),
				Subnet:  &armcompute.SubResource{ID: ptr(cfg.subnetID)},
			},
		}, {
			Name: ptr(podIPConfig),
			Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
				Primary: ptr(false),
				Subnet:  &armcompute.SubResource{ID: ptr(cfg.subnetID)},
			},
		}},
	}
	if cfg.nsgID != "" {
		nic.NetworkSecurityGroup = &armcompute.SubResource{ID: ptr(cfg.nsgID)}
	}
	osProfile := &armcompute.OSProfile{
		ComputerName:  ptr(req.CellID),
		AdminUsername: ptr(cfg.adminUsername),
		LinuxConfiguration: &armcompute.LinuxConfiguration{
			DisablePasswordAuthentication: ptr(true),
			SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
				Path:    ptr("/home/" + cfg.adminUsername + "/.ssh/authorized_keys"),
				KeyData: ptr(cfg.sshPublicKey),
			}}},
		},
	}
	if cfg.customData != nil {
		osProfile.CustomData = ptr(base64.StdEncoding.EncodeToString(cfg.customData))
	}
	props := &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: ptr(armcompute.VirtualMachineSizeTypes(req.InstanceType))},
		StorageProfile:  &armcompute.StorageProfile{ImageReference: image, OSDisk: osDisk},
		OSProfile:       osProfile,
		UserData:        ptr(userData),
		NetworkProfile: &armcompute.NetworkProfile{
			NetworkAPIVersion: ptr(networkAPIVersion),
			NetworkInterfaceConfigurations: []*armcompute.VirtualMachineNetworkInterfaceConfiguration{{
				Name: ptr(req.CellID + "-nic"), Properties: nic,
			}},
		},
	}
	if capacity == pluginapi.CapacitySpot {
		// An evicted cell is gone: deleted, not deallocated (a deallocated
		// VM keeps its disk, billed, and its name). A max price of -1 pays
		// up to the on-demand price: the VM is evicted for capacity only.
		props.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		props.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		props.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(-1.0)}
	}
	vm := armcompute.VirtualMachine{
		Location:   ptr(cfg.location),
		Zones:      []*string{ptr(az)},
		Tags:       cfg.vmTags(tags),
		Properties: props,
	}
	if cfg.identity != "" {
		vm.Identity = &armcompute.VirtualMachineIdentity{
			Type:                   ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{cfg.identity: {}},
		}
	}
	return &launchPlan{vm: vm, cellID: req.CellID, zone: zone, capacity: capacity, tags: tags, spec: req.InstanceType}, nil
}

// imageReference is the VM's image: the configured one, or the request's
// (a resource ID, or a URN publisher:offer:sku:version).
func (cfg *config) imageReference(requested string) (*armcompute.ImageReference, error) {
	im := cfg.image
	if requested != "" {
		parts := strings.Split(requested, ":")
		switch {
		case strings.HasPrefix(strings.ToLower(requested), "/subscriptions/"):
			im = Image{ID: requested}
		case len(parts) == 4 && !slices.Contains(parts, ""):
			im = Image{Publisher: parts[0], Offer: parts[1], SKU: parts[2], Version: parts[3]}
		default:
			return nil, pluginapi.NewInvalidConfig("image", "the requested image %q is neither an image resource ID nor a URN publisher:offer:sku:version", requested)
		}
	}
	if im.ID != "" {
		return &armcompute.ImageReference{ID: ptr(im.ID)}, nil
	}
	return &armcompute.ImageReference{Publisher: ptr(im.Publisher), Offer: ptr(im.Offer), SKU: ptr(im.SKU), Version: ptr(im.Version)}, nil
}

// placement picks the zone: the first of req.Zones that is configured, or,
// when the request names no zone, one derived from the cell ID (the same
// every retry, spread over the zones).
func (cfg *config) placement(req *pluginapi.LaunchRequest, capacity pluginapi.CapacityType) (string, error) {
	if len(req.Zones) == 0 {
		h := fnv.New32a()
		h.Write([]byte(req.CellID))
		return zoneName(cfg.location, cfg.zones[int(h.Sum32()%uint32(len(cfg.zones)))]), nil
	}
	for _, z := range req.Zones {
		if _, ok := cfg.azureZone(z); ok {
			return z, nil
		}
	}
	return "", pluginapi.NewInsufficientCapacity(req.InstanceType, req.Zones[0], capacity,
		fmt.Sprintf("zone %s is not configured (zones: %s)", strings.Join(req.Zones, ", "), strings.Join(cfg.zoneNames(), ", ")))
}

// resumeTokens are the resume tokens of the creates under way, by cell.
type resumeTokens struct {
	mu     sync.Mutex
	tokens map[string]string
}

func (r *resumeTokens) get(cell string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tokens[cell]
}

func (r *resumeTokens) put(cell, tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[cell] = tok
}

func (r *resumeTokens) drop(cell string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tokens, cell)
}
