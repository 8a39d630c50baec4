package azure

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
)

// Volumes: the plugin attaches Azure managed disks (the PersistentVolumes
// of azuredisk-csi, driver disk.csi.azure.com, whose volume handle is the
// disk's resource ID) to the cells' VMs as data disks, the way
// azuredisk-csi's controller does for a standalone VM: a PATCH of the VM
// (VirtualMachines_Update) whose storageProfile.dataDisks is the VM's list
// with the disk added at the lowest free LUN (createOption Attach,
// managedDisk.id), or with the disk marked toBeDetached. The VM's model is
// the record: a restarted plugin finds every attachment in it, and nothing
// lives only in memory.
//
// On the VM the disk is the SCSI device at that LUN, which the udev rule
// every Azure Linux image ships (66-azure-storage.rules) links as
// /dev/disk/azure/scsi1/lun<N>: the attachment's Device.Path, where the
// cell's agent finds it (as azuredisk-csi's node plugin does). Azure's data
// disks have no serial the agent could match to the disk.
//
// Azure attaches a managed disk read-write only: a read-only attachment
// exists only for shared disks (maxShares > 1, ReadOnly caching is a
// cache mode, not an access mode), so ReadOnly is Unsupported (field
// read_only) and the host mounts the disk read-only instead.

// volumeDriver is the CSI driver whose volumes the plugin attaches.
const volumeDriver = "disk.csi.azure.com"

// maxLUN is the highest LUN of a data disk.
const maxLUN = 63

// lunPath is where an Azure Linux VM links the data disk at lun.
func lunPath(lun int32) string { return fmt.Sprintf("/dev/disk/azure/scsi1/lun%d", lun) }

var _ pluginapi.VolumeAttacher = (*provider)(nil)

// diskRef is a managed disk's resource ID, parsed.
type diskRef struct{ subscription, resourceGroup, name string }

// parseDiskID reads /subscriptions/{s}/resourceGroups/{rg}/providers/
// Microsoft.Compute/disks/{name}, whose segment names ARM compares without
// case.
func parseDiskID(id string) (diskRef, bool) {
	p := strings.Split(strings.Trim(id, "/"), "/")
	if len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[4], "providers") || !strings.EqualFold(p[5], "Microsoft.Compute") || !strings.EqualFold(p[6], "disks") ||
		p[1] == "" || p[3] == "" || p[7] == "" {
		return diskRef{}, false
	}
	return diskRef{subscription: p[1], resourceGroup: p[3], name: p[7]}, true
}

// vmLocks serialises the data disk updates of one VM within the process:
// ARM refuses a VM update while another runs (409 Conflict), and a
// read-modify-write of the disk list must not lose a concurrent one
// (If-Match guards against other processes). A lock is a one-slot channel
// so that a waiting call still ends with its context; it is forgotten
// once nobody holds or waits for it, so that the map does not grow with
// every cell the process has seen.
type vmLocks struct {
	mu    sync.Mutex
	locks map[string]*vmLock
}

type vmLock struct {
	slot  chan struct{}
	users int // holders and waiters
}

func (l *vmLocks) lock(ctx context.Context, vm string) (func(), error) {
	key := strings.ToLower(vm)
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*vmLock{}
	}
	c := l.locks[key]
	if c == nil {
		c = &vmLock{slot: make(chan struct{}, 1)}
		l.locks[key] = c
	}
	c.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if c.users--; c.users == 0 {
			delete(l.locks, key)
		}
	}
	select {
	case c.slot <- struct{}{}:
		return func() { <-c.slot; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// volumeRequest checks what every volume call checks: the driver, the
// instance (a cell's VM name) and the disk's ID, in the plugin's
// subscription.
func (cfg *config) volumeRequest(driver, instance, handle string) (diskRef, error) {
	if driver != volumeDriver {
		return diskRef{}, pluginapi.NewUnsupportedField(pluginapi.FieldVolumeDriver, "the azure plugin attaches volumes of driver %s, not %q", volumeDriver, driver)
	}
	if !vmNameRE.MatchString(instance) {
		return diskRef{}, pluginapi.NewNotFound("instance %q is not an instance ID of this plugin (a cell's VM name)", instance)
	}
	ref, ok := parseDiskID(handle)
	if !ok {
		return diskRef{}, pluginapi.NewNotFound("volume %q is not a managed disk's resource ID (/subscriptions/…/resourceGroups/…/providers/Microsoft.Compute/disks/…)", handle)
	}
	if !strings.EqualFold(ref.subscription, cfg.subscription) {
		return diskRef{}, pluginapi.NewNotFound("disk %s is in subscription %s; the plugin attaches the disks of its subscription %s", handle, ref.subscription, cfg.subscription)
	}
	return ref, nil
}

// clusterVM reads a cell's VM, NotFound when it does not exist; a VM of
// another cluster is refused, as Terminate refuses it.
func (cfg *config) clusterVM(ctx context.Context, instance string) (*armcompute.VirtualMachine, error) {
	got, err := cfg.clients.vms.Get(ctx, cfg.resourceGroup, instance, nil)
	if err != nil {
		return nil, mapError("VirtualMachines_Get", err)
	}
	vm := &got.VirtualMachine
	if c := deref(vm.Tags[tagCluster]); c != cfg.clusterID {
		return nil, fmt.Errorf("instance %s is tagged for cluster %q, not this cluster's %q; refusing: %w", instance, c, cfg.clusterID, errOtherCluster)
	}
	return vm, nil
}

// errOtherCluster is a VM of another cluster, or of none, which the
// volume calls leave alone.
var errOtherCluster = errors.New("not a cell of this cluster")

// dataDisks are a VM's data disks.
func dataDisks(vm *armcompute.VirtualMachine) []*armcompute.DataDisk {
	if vm.Properties == nil || vm.Properties.StorageProfile == nil {
		return nil
	}
	return vm.Properties.StorageProfile.DataDisks
}

// diskOf is the VM's data disk whose managed disk is handle (ARM IDs
// compare without case), or nil.
func diskOf(vm *armcompute.VirtualMachine, handle string) *armcompute.DataDisk {
	for _, d := range dataDisks(vm) {
		if d != nil && d.ManagedDisk != nil && strings.EqualFold(deref(d.ManagedDisk.ID), handle) {
			return d
		}
	}
	return nil
}

// attachmentState is a data disk's state from its VM's: toBeDetached is
// detaching, and so is every disk of a VM being deleted (Azure detaches
// them); a VM being created or updated is still attaching what it lists
// (an update attaches or detaches its disks: the plugin cannot tell which
// listed disk the update is for, so it reports each as attaching until
// the VM is Succeeded).
func attachmentState(vm *armcompute.VirtualMachine, d *armcompute.DataDisk) pluginapi.AttachmentState {
	if d.ToBeDetached != nil && *d.ToBeDetached {
		return pluginapi.AttachmentDetaching
	}
	state := ""
	if vm.Properties != nil {
		state = deref(vm.Properties.ProvisioningState)
	}
	switch state {
	case "Deleting":
		return pluginapi.AttachmentDetaching
	case "Creating", "Updating":
		return pluginapi.AttachmentAttaching
	}
	return pluginapi.AttachmentAttached
}

// attachment is the contract's attachment of a VM's data disk.
func attachment(instance, handle string, vm *armcompute.VirtualMachine, d *armcompute.DataDisk) pluginapi.VolumeAttachment {
	a := pluginapi.VolumeAttachment{InstanceID: instance, Driver: volumeDriver, VolumeHandle: handle, State: attachmentState(vm, d)}
	if d.Lun != nil {
		a.Device.Path = lunPath(*d.Lun)
	}
	return a
}

// AttachVolume attaches a managed disk to a cell's VM at the lowest LUN
// its data disks leave free: a PATCH of the VM's data disks, with
// If-Match on the etag it read, and returns once ARM accepted it (the
// attachment attaching, its device the LUN's path). A disk the VM lists
// already is answered as it is (attaching, attached), at its LUN. Before
// the PATCH it reads the disk (Disks_Get): a disk managed by another VM
// is VolumeConflict in-use naming it, one in another zone than the VM
// wrong-zone; ARM's own refusals of the PATCH are mapped the same way,
// and its data disk limit for the size (409 OperationNotAllowed) is
// attachment-limit.
//
// ARM takes one update of a VM at a time (409 Conflict while the VM is
// Updating), so AttachVolume waits out an update under way (another
// disk's attach or detach, this disk's detach), reading the VM every
// lroFrequency, until its context ends; a PATCH refused for a VM changed
// since it was read (412: another process of the plugin updated it) is
// made again on the VM as it is now. No disk of a concurrent attach is
// lost.
func (p *provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := cfg.volumeRequest(req.Driver, req.InstanceID, req.VolumeHandle)
	if err != nil {
		return nil, err
	}
	if req.ReadOnly {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldReadOnly,
			"Azure attaches a managed disk read-write only (a read-only attachment needs a shared disk); mount it read-only instead")
	}
	unlock, err := p.vmLocks.lock(ctx, req.InstanceID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for {
		a, wait, err := p.attachOnce(ctx, cfg, req, ref)
		switch {
		case err != nil:
			return nil, fmt.Errorf("attaching disk %s to instance %s: %w", req.VolumeHandle, req.InstanceID, err)
		case !wait:
			p.Log.Info("volume attaching", "instance", req.InstanceID, "volume", req.VolumeHandle, "state", a.State, "device", a.Device.Path)
			return &pluginapi.AttachVolumeResponse{Attachment: a}, nil
		}
		if err := p.Sleep(ctx, p.lroFrequency); err != nil {
			return nil, fmt.Errorf("attaching disk %s to instance %s: waiting for the VM's update under way: %w", req.VolumeHandle, req.InstanceID, err)
		}
	}
}

// attachOnce is one read-modify-write of AttachVolume; wait is true when
// the VM is being created or updated, or changed between the read and the
// PATCH: the caller waits and tries again.
func (p *provider) attachOnce(ctx context.Context, cfg *config, req *pluginapi.AttachVolumeRequest, ref diskRef) (pluginapi.VolumeAttachment, bool, error) {
	vm, err := cfg.clusterVM(ctx, req.InstanceID)
	if err != nil {
		return pluginapi.VolumeAttachment{}, false, err
	}
	if d := diskOf(vm, req.VolumeHandle); d != nil {
		a := attachment(req.InstanceID, req.VolumeHandle, vm, d)
		// Detaching: attached again once it is gone.
		return a, a.State == pluginapi.AttachmentDetaching, nil
	}
	if busy(vm) {
		return pluginapi.VolumeAttachment{}, true, nil
	}
	got, err := cfg.clients.disks.Get(ctx, ref.resourceGroup, ref.name, nil)
	if err != nil {
		return pluginapi.VolumeAttachment{}, false, mapError("Disks_Get", err)
	}
	if owner := deref(got.ManagedBy); owner != "" {
		other := owner[strings.LastIndex(owner, "/")+1:]
		return pluginapi.VolumeAttachment{}, false, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, req.VolumeHandle, other,
			fmt.Sprintf("disk %s is attached to VM %s", req.VolumeHandle, owner))
	}
	if vz, dz := zoneOf(vm.Zones), zoneOf(got.Zones); vz != dz {
		return pluginapi.VolumeAttachment{}, false, pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, req.VolumeHandle, "",
			fmt.Sprintf("disk %s is in zone %q of %s, instance %s in zone %q", req.VolumeHandle, dz, cfg.location, req.InstanceID, vz))
	}
	lun, ok := freeLUN(dataDisks(vm))
	if !ok {
		return pluginapi.VolumeAttachment{}, false, pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, req.VolumeHandle, "",
			fmt.Sprintf("instance %s has a data disk at every LUN", req.InstanceID))
	}
	disks := append(modelOf(dataDisks(vm)), &armcompute.DataDisk{
		Lun: &lun, CreateOption: ptr(armcompute.DiskCreateOptionTypesAttach),
		ManagedDisk: &armcompute.ManagedDiskParameters{ID: ptr(req.VolumeHandle)}, Caching: ptr(armcompute.CachingTypesNone),
		// A PersistentVolume's disk outlives the cell: deleting the VM
		// detaches it (Detach is ARM's default for an attached disk;
		// said so that no default can change it).
		DeleteOption: ptr(armcompute.DiskDeleteOptionTypesDetach),
	})
	switch err := cfg.updateDisks(ctx, req.InstanceID, vm, disks); {
	case errors.Is(err, errVMChanged), isConflict(err):
		return pluginapi.VolumeAttachment{}, true, nil
	case err != nil:
		return pluginapi.VolumeAttachment{}, false, mapAttachError(err, req.VolumeHandle)
	}
	return pluginapi.VolumeAttachment{InstanceID: req.InstanceID, Driver: volumeDriver, VolumeHandle: req.VolumeHandle,
		State: pluginapi.AttachmentAttaching, Device: pluginapi.VolumeDevice{Path: lunPath(lun)}}, false, nil
}

// busy reports whether ARM takes no update of the VM now: it is being
// created or updated.
func busy(vm *armcompute.VirtualMachine) bool {
	if vm.Properties == nil {
		return false
	}
	s := deref(vm.Properties.ProvisioningState)
	return s == "Creating" || s == "Updating"
}

// isConflict reports whether err is ARM's 409 Conflict: another update of
// the VM is under way.
func isConflict(err error) bool {
	re, ae, ok := responseError(err)
	return ok && re.StatusCode == 409 && ae.Code == "Conflict"
}

// zoneOf is a resource's availability zone, "" for a regional one.
func zoneOf(zones []*string) string {
	if len(zones) == 0 {
		return ""
	}
	return deref(zones[0])
}

// freeLUN is the lowest LUN no data disk holds (one detaching holds its
// LUN until it is gone).
func freeLUN(disks []*armcompute.DataDisk) (int32, bool) {
	for lun := int32(0); lun <= maxLUN; lun++ {
		if !slices.ContainsFunc(disks, func(d *armcompute.DataDisk) bool { return d != nil && d.Lun != nil && *d.Lun == lun }) {
			return lun, true
		}
	}
	return 0, false
}

// modelOf is the VM's data disks as an update sends them back: what names
// each (LUN, managed disk, create option, caching, toBeDetached), not what
// ARM fills in.
func modelOf(disks []*armcompute.DataDisk) []*armcompute.DataDisk {
	out := make([]*armcompute.DataDisk, 0, len(disks)+1)
	for _, d := range disks {
		if d == nil {
			continue
		}
		m := &armcompute.DataDisk{Lun: d.Lun, CreateOption: d.CreateOption, Caching: d.Caching, ToBeDetached: d.ToBeDetached, Name: d.Name,
			DeleteOption: d.DeleteOption}
		if d.ManagedDisk != nil {
			m.ManagedDisk = &armcompute.ManagedDiskParameters{ID: d.ManagedDisk.ID}
		}
		out = append(out, m)
	}
	return out
}

// errVMChanged is an update refused because the VM changed since it was
// read (412 on If-Match).
var errVMChanged = errors.New("the VM changed since it was read")

// updateDisks PATCHes the VM's data disks to disks, with If-Match on the
// etag read with vm, and returns once ARM has accepted the update (its
// operation then attaches and detaches the disks).
func (cfg *config) updateDisks(ctx context.Context, instance string, vm *armcompute.VirtualMachine, disks []*armcompute.DataDisk) error {
	var opts *armcompute.VirtualMachinesClientBeginUpdateOptions
	if vm.Etag != nil {
		opts = &armcompute.VirtualMachinesClientBeginUpdateOptions{IfMatch: vm.Etag}
	}
	_, err := cfg.clients.vms.BeginUpdate(ctx, cfg.resourceGroup, instance, armcompute.VirtualMachineUpdate{
		Properties: &armcompute.VirtualMachineProperties{StorageProfile: &armcompute.StorageProfile{DataDisks: disks}},
	}, opts)
	if re, _, ok := responseError(err); ok && re.StatusCode == 412 {
		return errVMChanged
	}
	return err
}

// storageTypeTarget is the target of ARM's refusal of a disk type the
// VM's size cannot take; storageTypeRE reads the type out of its message.
const storageTypeTarget = "dataDisk.managedDisk.storageAccountType"

var storageTypeRE = regexp.MustCompile(`storage account type (\S+) of disk`)

// mapAttachError maps ARM's refusal of an attaching update to the
// contract's kinds: Compute's codes for a disk attached elsewhere
// (ConflictingUserInput), a disk type the VM's size cannot take (400
// InvalidParameter, target dataDisk.managedDisk.storageAccountType: "the
// VM size Standard_D2_v2 does not support the storage account type
// Premium_LRS of disk …", as the attach-detach controller's events quote
// it) wrong-type naming the SKU, in another zone (BadRequest naming the
// zone), and over the size's data disk limit (OperationNotAllowed naming
// the maximum); 409 Conflict (another update of the VM is under way) is
// Transient, as mapError has it.
func mapAttachError(err error, handle string) error {
	const op = "VirtualMachines_Update"
	re, ae, ok := responseError(err)
	if !ok {
		return mapError(op, err)
	}
	text := fmt.Sprintf("%s: %d %s: %s", op, re.StatusCode, ae.Code, ae.Message)
	msg := strings.ToLower(ae.Message)
	switch {
	case ae.Code == "ConflictingUserInput" || strings.Contains(msg, "already attached") || strings.Contains(msg, "already owned"):
		return pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, handle, "", text)
	case re.StatusCode == 400 && (strings.EqualFold(ae.Target, storageTypeTarget) || strings.Contains(msg, "does not support the storage account type")):
		sku := ""
		if m := storageTypeRE.FindStringSubmatch(ae.Message); m != nil {
			sku = m[1]
		}
		return pluginapi.NewVolumeWrongType(handle, sku, text)
	case re.StatusCode == 400 && strings.Contains(msg, "zone"):
		return pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, handle, "", text)
	case strings.Contains(msg, "maximum number of data disks"):
		return pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, handle, "", text)
	}
	return mapError(op, err)
}

// DetachVolume marks the disk toBeDetached in the VM's data disks (a
// PATCH with If-Match) and returns once ARM accepted it: the attachment is
// detaching until the update ends and the VM no longer lists it. A disk
// already detaching succeeds; one the VM does not list (or a VM that does
// not exist) is NotFound. Like AttachVolume it waits out another update
// of the VM under way.
func (p *provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cfg.volumeRequest(req.Driver, req.InstanceID, req.VolumeHandle); err != nil {
		return nil, err
	}
	unlock, err := p.vmLocks.lock(ctx, req.InstanceID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for {
		wait, err := p.detachOnce(ctx, cfg, req)
		switch {
		case err != nil:
			return nil, fmt.Errorf("detaching disk %s from instance %s: %w", req.VolumeHandle, req.InstanceID, err)
		case !wait:
			return &pluginapi.DetachVolumeResponse{}, nil
		}
		if err := p.Sleep(ctx, p.lroFrequency); err != nil {
			return nil, fmt.Errorf("detaching disk %s from instance %s: waiting for the VM's update under way: %w", req.VolumeHandle, req.InstanceID, err)
		}
	}
}

// detachOnce is one read-modify-write of DetachVolume; wait as for
// attachOnce.
func (p *provider) detachOnce(ctx context.Context, cfg *config, req *pluginapi.DetachVolumeRequest) (bool, error) {
	vm, err := cfg.clusterVM(ctx, req.InstanceID)
	if err != nil {
		return false, err
	}
	d := diskOf(vm, req.VolumeHandle)
	switch {
	case d == nil:
		return false, pluginapi.NewNotFound("disk %s is not attached to instance %s", req.VolumeHandle, req.InstanceID)
	case attachmentState(vm, d) == pluginapi.AttachmentDetaching:
		return false, nil
	case busy(vm):
		return true, nil
	}
	disks := modelOf(dataDisks(vm))
	for _, m := range disks {
		if m.ManagedDisk != nil && strings.EqualFold(deref(m.ManagedDisk.ID), req.VolumeHandle) {
			m.ToBeDetached = ptr(true)
		}
	}
	switch err := cfg.updateDisks(ctx, req.InstanceID, vm, disks); {
	case errors.Is(err, errVMChanged), isConflict(err):
		return true, nil
	case err != nil:
		return false, mapError("VirtualMachines_Update", err)
	}
	p.Log.Info("volume detaching", "instance", req.InstanceID, "volume", req.VolumeHandle)
	return false, nil
}

// DescribeVolumeAttachments reads each cell's VM (VirtualMachines_Get) and
// answers its managed data disks: attaching while the VM is being created
// or updated, detaching when toBeDetached or the VM is being deleted,
// attached otherwise, each at its LUN's path. The handle is the disk's ID
// as ARM writes it. An instance that does not exist, or is not a cell of
// the cluster, has none.
func (p *provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	out := &pluginapi.DescribeVolumeAttachmentsResponse{}
	seen := map[string]bool{}
	for _, id := range req.InstanceIDs {
		if seen[id] || !vmNameRE.MatchString(id) {
			continue
		}
		seen[id] = true
		vm, err := cfg.clusterVM(ctx, id)
		switch {
		case pluginapi.IsNotFound(err), errors.Is(err, errOtherCluster):
			continue
		case err != nil:
			return nil, fmt.Errorf("describing the volume attachments of instance %s: %w", id, err)
		}
		for _, d := range dataDisks(vm) {
			if d == nil || d.ManagedDisk == nil || deref(d.ManagedDisk.ID) == "" {
				continue
			}
			out.Attachments = append(out.Attachments, attachment(id, deref(d.ManagedDisk.ID), vm, d))
		}
	}
	return out, nil
}
