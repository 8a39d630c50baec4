package azuresim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Managed data disks (Microsoft.Compute/disks) and their attachment to
// VMs (a VM's storageProfile.dataDisks), as ARM and Compute answer them:
//
//   - https://learn.microsoft.com/rest/api/compute/disks/create-or-update
//     (and get, delete): a disk PUT is a long-running operation,
//     provisioningState Creating, then Succeeded; diskState Unattached,
//     Attached (managedBy the VM's ID) or Reserved (its VM deallocated).
//   - https://learn.microsoft.com/azure/virtual-machines/linux/attach-disk-portal
//     and the VM model's dataDisks (armcompute DataDisk): a disk is
//     attached by a VM PUT or PATCH that lists it (createOption Attach,
//     managedDisk.id, a LUN unique on the VM) and detached by one that
//     omits it or sets toBeDetached; the VM is Updating until the
//     operation ends.
//   - the errors as Compute writes them (quoted in the Azure SDKs'
//     issues): 409 ConflictingUserInput "Cannot attach the disk … to VM …
//     because it is already attached to VM …", 400 BadRequest "Disk …
//     cannot be attached to the VM because it is not in the same zone as
//     the VM", 400 InvalidParameter "A disk at LUN 0 already exists.",
//     409 OperationNotAllowed "The maximum number of data disks allowed
//     to be attached to a VM of this size is 4.", 409 OperationNotAllowed
//     "Disk … is attached to VM …" for the delete of an attached disk, and
//     409 Conflict "The request failed due to conflict with a concurrent
//     request." for a VM update while another is under way, and 400
//     InvalidParameter, target dataDisk.managedDisk.storageAccountType,
//     "Requested operation cannot be performed because the VM size
//     Standard_D2_v2 does not support the storage account type
//     Premium_LRS of disk '…'. Consider updating the VM to a size that
//     supports Premium storage." for a premium disk on a size without
//     premium storage (as the attach-detach controller's events quote
//     it; premiumSKUs).

// Disk states (properties.diskState) ARM writes.
const (
	DiskUnattached = "Unattached"
	DiskAttached   = "Attached"
	DiskReserved   = "Reserved"
)

// Codes of the disk and attachment errors.
const (
	CodeConflictingUserInput = "ConflictingUserInput"
	CodeBadRequest           = "BadRequest"
	CodeNotFound             = "NotFound"
)

// maxLUN is the highest LUN of a data disk (0 to 63).
const maxLUN = 63

// DevicePath is where an Azure Linux image's udev rule (66-azure-storage.rules,
// shipped by WALinuxAgent and azure-vm-utils) links the data disk at lun on
// the VM: what azuredisk-csi's node plugin looks for.
func DevicePath(lun int) string { return fmt.Sprintf("/dev/disk/azure/scsi1/lun%d", lun) }

// disk is one managed disk.
type disk struct {
	key       vmKey
	rg, name  string
	seq       uint64
	uniqueID  string
	zone      string
	sizeGB    int
	sku       string
	body      map[string]any
	createdAt time.Time
	readyAt   time.Time // Creating until then, and until made
	made      bool      // the DiskStarter's CreateDisk returned (always, without one)
	madeErr   *armError // CreateDisk failed: the disk is Failed
	deleting  bool
	goneAt    time.Time
	unmade    bool // DeleteDisk returned (always, without a DiskStarter)
	att       *attachment
}

// attachment is a disk on a VM: attaching (until readyAt and until the
// DiskStarter's AttachDisk returned), attached, or detaching (until
// readyAt and until DetachDisk returned), then gone.
type attachment struct {
	disk      *disk
	vm        *vm
	lun       int
	caching   string
	name      string
	detaching bool
	// omitted: detached by leaving it out of the model, so that the VM no
	// longer lists it while it detaches (toBeDetached lists it).
	omitted bool
	readyAt time.Time
	done    bool
	op      *operation
	// attachCalled is closed once the DiskStarter's AttachDisk returned
	// (nil without a DiskStarter): a detach begun while the attach is in
	// flight (its VM deleted) waits for it, so that the machine is never
	// left holding a disk the cloud detached.
	attachCalled chan struct{}
}

func (a *attachment) settled(now time.Time) bool { return a.done && !now.Before(a.readyAt) }

// state is the disk's diskState.
func (d *disk) state() string {
	switch {
	case d.att == nil:
		return DiskUnattached
	case d.att.vm.deallocated:
		return DiskReserved
	}
	return DiskAttached
}

// provisioningState is the disk's.
func (d *disk) provisioningState(now time.Time) string {
	switch {
	case d.deleting:
		return StateDeleting
	case d.madeErr != nil:
		return StateFailed
	case !d.made || now.Before(d.readyAt):
		return StateCreating
	}
	return StateSucceeded
}

func (d *disk) gone(now time.Time) bool { return d.deleting && d.unmade && !now.Before(d.goneAt) }

// id is the disk's DiskStarter ID: its uniqueId, which a disk created again
// with the same name does not share.
func (d *disk) starterID() string { return d.uniqueID }

// Disk is what the server knows of a disk, as it was when read.
type Disk struct {
	ResourceGroup, Name string
	UniqueID            string
	Zone                string
	SizeGB              int
	ProvisioningState   string
	DiskState           string
	// VM and LUN are the VM it is attached to (or attaching, detaching).
	VM        string
	LUN       int
	Detaching bool
	Gone      bool
}

// Disk returns the disk named name in rg, or false.
func (s *Server) Disk(rg, name string) (Disk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.settleDisksLocked(now)
	d := s.disks[keyOf(rg, name)]
	if d == nil {
		return Disk{}, false
	}
	out := Disk{ResourceGroup: d.rg, Name: d.name, UniqueID: d.uniqueID, Zone: d.zone, SizeGB: d.sizeGB,
		ProvisioningState: d.provisioningState(now), DiskState: d.state(), Gone: d.gone(now)}
	if d.att != nil {
		out.VM, out.LUN, out.Detaching = d.att.vm.name, d.att.lun, d.att.detaching
	}
	return out, true
}

// SetDiskDelay sets how long a disk's create, attach and detach take at
// least (Options.DiskDelay), from now on.
func (s *Server) SetDiskDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskDelay = d
}

// diskStarter is the CellStarter as a DiskStarter, or nil.
func (s *Server) diskStarter() simcells.DiskStarter {
	ds, _ := s.opts.Cells.(simcells.DiskStarter)
	return ds
}

// background runs f in the server's background (disk calls of the
// DiskStarter), which Close cancels and waits for.
func (s *Server) background(f func(ctx context.Context)) {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		f(s.bgCtx)
	}()
}

// retrying calls f until it succeeds or ctx ends, as the cloud retries
// what the machine refuses for now (a disk still mounted: DetachDisk).
func retrying(ctx context.Context, f func(context.Context) error) error {
	delay := 20 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// diskNamePattern is Compute's rule for a disk's name: 1 to 80 letters,
// digits, underscores, periods and hyphens, starting with a letter or
// digit and ending with a letter, digit or underscore.
var diskNamePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

// diskSKUs are the managed disk types.
var diskSKUs = []string{"Standard_LRS", "Premium_LRS", "StandardSSD_LRS", "UltraSSD_LRS", "Premium_ZRS", "StandardSSD_ZRS", "PremiumV2_LRS"}

// premiumSKUs are the disk types only a size with premium storage
// (Size.premiumIO) takes: Premium SSDs
// (https://learn.microsoft.com/azure/virtual-machines/disks-types, "Premium
// SSDs … can only be used with VM series that are premium storage
// compatible"). PremiumV2_LRS and UltraSSD_LRS have rules of their own
// (zones, the VM's ultraSSDEnabled), not modelled.
var premiumSKUs = []string{"Premium_LRS", "Premium_ZRS"}

// diskSpec is what the simulator reads of a disk PUT.
type diskSpec struct {
	Location string            `json:"location"`
	Zones    []string          `json:"zones"`
	Tags     map[string]string `json:"tags"`
	SKU      *struct {
		Name string `json:"name"`
	} `json:"sku"`
	Props struct {
		CreationData struct {
			CreateOption string `json:"createOption"`
		} `json:"creationData"`
		DiskSizeGB int `json:"diskSizeGB"`
	} `json:"properties"`
}

// putDisk answers Disks_CreateOrUpdate: a new disk is 202 with
// Azure-AsyncOperation and Location, Creating until made (the
// DiskStarter's CreateDisk, in the background) and Options.DiskDelay
// passed; only createOption Empty is modelled. A PUT of a disk that
// exists may change its tags (a size change or a zone change is refused as
// Compute refuses them); one being created or deleted is 409.
func (s *Server) putDisk(q request) (*answer, error) {
	raw, err := io.ReadAll(io.LimitReader(q.r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	var body map[string]any
	var sp diskSpec
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, &armError{Status: http.StatusBadRequest, Code: "InvalidRequestContent", Message: "The request content was invalid and could not be deserialized: " + err.Error()}
	}
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, &armError{Status: http.StatusBadRequest, Code: "InvalidRequestContent", Message: "The request content was invalid and could not be deserialized: " + err.Error()}
	}
	zone, sku, err := s.checkDisk(q.name, &sp)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.settleDisksLocked(now)
	if old := s.liveDisk(q.rg, q.name, now); old != nil {
		switch {
		case q.r.Header.Get("If-None-Match") == "*":
			return nil, &armError{Status: http.StatusPreconditionFailed, Code: CodePreconditionFailed, Message: "The condition specified using HTTP conditional header(s) is not met."}
		case old.provisioningState(now) != StateSucceeded:
			return nil, &armError{Status: http.StatusConflict, Code: CodeConflict, Message: "The request failed due to conflict with a concurrent request."}
		case zone != old.zone:
			return nil, &armError{Status: http.StatusConflict, Code: "PropertyChangeNotAllowed", Target: "zones", Message: "Changing property 'zones' is not allowed."}
		case sp.Props.DiskSizeGB < old.sizeGB:
			return nil, &armError{Status: http.StatusBadRequest, Code: CodeBadRequest,
				Message: fmt.Sprintf("Disk size reduction is not supported. Current size is %d GB, requested size is %d GB.", old.sizeGB, sp.Props.DiskSizeGB)}
		case sp.Props.DiskSizeGB != old.sizeGB:
			return nil, invalidParameter("diskSizeGB", "The simulator does not resize disks.")
		}
		old.body["tags"] = sp.Tags
		op := s.newDiskOperation("disk-update", old, now)
		return &answer{status: http.StatusOK, header: s.lroHeader(q.r, op, false), body: s.diskJSON(old, now)}, nil
	}
	s.seq++
	d := &disk{
		key: keyOf(q.rg, q.name), rg: q.rg, name: q.name, seq: s.seq, uniqueID: newGUID(), zone: zone, sizeGB: sp.Props.DiskSizeGB,
		sku: sku, body: body, createdAt: now, readyAt: now.Add(s.diskDelay),
	}
	s.disks[d.key] = d
	s.diskOrder = append(s.diskOrder, d)
	s.log.Info("disk created", "disk", q.name, "zone", zone, "size_gb", d.sizeGB)
	if ds := s.diskStarter(); ds != nil {
		id, bytes := d.starterID(), int64(d.sizeGB)<<30
		s.background(func(ctx context.Context) {
			err := ds.CreateDisk(ctx, id, bytes)
			s.mu.Lock()
			defer s.mu.Unlock()
			d.made = true
			if err != nil {
				s.log.Warn("the disk starter could not create a disk", "disk", d.name, "error", err)
				d.madeErr = &armError{Status: http.StatusOK, Code: "InternalOperationError", Message: "The disk could not be created: " + err.Error()}
			}
		})
	} else {
		d.made = true
	}
	op := s.newDiskOperation("disk-create", d, now)
	h := s.lroHeader(q.r, op, true)
	return &answer{status: http.StatusAccepted, header: h, body: s.diskJSON(d, now)}, nil
}

// checkDisk validates a disk PUT as Compute does, and returns its zone and
// SKU.
func (s *Server) checkDisk(name string, sp *diskSpec) (string, string, error) {
	if !diskNamePattern.MatchString(name) {
		return "", "", &armError{Status: http.StatusBadRequest, Code: "InvalidResourceName",
			Message: fmt.Sprintf("Resource name %s is invalid. The name can be up to 80 characters long. Valid characters include alphanumeric, underscore, hyphen and period (except at end).", name)}
	}
	switch {
	case sp.Location == "":
		return "", "", &armError{Status: http.StatusBadRequest, Code: "LocationRequired", Message: "The location property is required for this definition."}
	case !strings.EqualFold(strings.ReplaceAll(sp.Location, " ", ""), s.opts.Location):
		return "", "", &armError{Status: http.StatusBadRequest, Code: "LocationNotAvailableForResourceType",
			Message: fmt.Sprintf("The provided location '%s' is not available for resource type 'Microsoft.Compute/disks'. List of available regions for the resource type is '%s'.", sp.Location, s.opts.Location)}
	}
	zone := ""
	switch len(sp.Zones) {
	case 0:
	case 1:
		zone = sp.Zones[0]
		if !containsFold(s.opts.Zones, zone) {
			return "", "", invalidParameter("zones", fmt.Sprintf("The zone(s) '%s' for resource 'Microsoft.Compute/disks/%s' is not supported. The supported zones for location '%s' are '%s'", zone, name, s.opts.Location, strings.Join(s.opts.Zones, ",")))
		}
	default:
		return "", "", invalidParameter("zones", "A disk can be placed in one availability zone only.")
	}
	sku := "Standard_LRS"
	if sp.SKU != nil && sp.SKU.Name != "" {
		sku = sp.SKU.Name
		if !slices.Contains(diskSKUs, sku) {
			return "", "", invalidParameter("sku.name", fmt.Sprintf("The value '%s' of parameter 'sku.name' is invalid.", sku))
		}
	}
	switch c := sp.Props.CreationData.CreateOption; c {
	case "Empty":
	case "":
		return "", "", invalidParameter("creationData.createOption", "Required parameter 'creationData.createOption' is missing (null).")
	default:
		return "", "", invalidParameter("creationData.createOption", fmt.Sprintf("The simulator creates disks Empty only, not %s.", c))
	}
	if n := sp.Props.DiskSizeGB; n < 1 || n > 32767 {
		return "", "", invalidParameter("diskSizeGB", fmt.Sprintf("The specified disk size %d GB is invalid: an empty disk's diskSizeGB is 1 to 32767.", n))
	}
	return zone, sku, nil
}

// liveDisk is the disk named name in rg that exists, or nil. The caller
// holds s.mu.
func (s *Server) liveDisk(rg, name string, now time.Time) *disk {
	d := s.disks[keyOf(rg, name)]
	if d == nil || d.gone(now) {
		return nil
	}
	return d
}

// diskByID is the disk a managedDisk.id names (case-insensitive, as ARM
// IDs are) that exists, or nil. The caller holds s.mu.
func (s *Server) diskByID(id string, now time.Time) *disk {
	p := strings.Split(strings.Trim(id, "/"), "/")
	if len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[1], s.opts.Subscription) ||
		!strings.EqualFold(p[2], "resourceGroups") || !strings.EqualFold(p[4], "providers") ||
		!strings.EqualFold(p[5], "Microsoft.Compute") || !strings.EqualFold(p[6], "disks") {
		return nil
	}
	return s.liveDisk(p[3], p[7], now)
}

// lockDisk takes s.mu (unlock lets it go), settles the disks' attaches
// and detaches at now and returns the disk q names, or nil.
func (s *Server) lockDisk(q request) (d *disk, now time.Time, unlock func()) {
	s.mu.Lock()
	now = s.now()
	s.settleDisksLocked(now)
	return s.liveDisk(q.rg, q.name, now), now, s.mu.Unlock
}

// getDisk answers Disks_Get.
func (s *Server) getDisk(q request) (*answer, error) {
	d, now, unlock := s.lockDisk(q)
	defer unlock()
	if d == nil {
		return nil, notFound("Microsoft.Compute/disks", q.rg, q.name)
	}
	return answerOK(s.diskJSON(d, now)), nil
}

// deleteDisk answers Disks_Delete: 202 with Location and
// Azure-AsyncOperation, the disk Deleting until the DiskStarter deleted it
// and Options.DiskDelay passed; 204 for a disk that does not exist; 409
// OperationNotAllowed for a disk attached to a VM (or attaching,
// detaching), as Compute refuses it.
func (s *Server) deleteDisk(q request) (*answer, error) {
	d, now, unlock := s.lockDisk(q)
	defer unlock()
	if d == nil {
		return &answer{status: http.StatusNoContent}, nil
	}
	if d.att != nil {
		return nil, &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed,
			Message: fmt.Sprintf("Disk %s is attached to VM %s.", d.name, s.resourceID(d.att.vm.rg, "Microsoft.Compute/virtualMachines", d.att.vm.name))}
	}
	if d.provisioningState(now) == StateCreating {
		return nil, &armError{Status: http.StatusConflict, Code: CodeConflict, Message: "The request failed due to conflict with a concurrent request."}
	}
	if !d.deleting {
		d.deleting, d.goneAt = true, now.Add(s.diskDelay)
		s.log.Info("disk deleting", "disk", d.name)
		if ds := s.diskStarter(); ds != nil && d.madeErr == nil {
			id := d.starterID()
			s.background(func(ctx context.Context) {
				if err := retrying(ctx, func(ctx context.Context) error { return ds.DeleteDisk(ctx, id) }); err != nil {
					s.log.Warn("the disk starter could not delete a disk", "disk", d.name, "error", err)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				d.unmade = true
			})
		} else {
			d.unmade = true
		}
	}
	op := s.newDiskOperation("disk-delete", d, now)
	return &answer{status: http.StatusAccepted, header: s.lroHeader(q.r, op, true)}, nil
}

// diskJSON renders a disk as ARM does. The caller holds s.mu.
func (s *Server) diskJSON(d *disk, now time.Time) map[string]any {
	props := map[string]any{
		"creationData":      map[string]any{"createOption": "Empty"},
		"diskSizeGB":        d.sizeGB,
		"diskSizeBytes":     int64(d.sizeGB) << 30,
		"uniqueId":          d.uniqueID,
		"provisioningState": d.provisioningState(now),
		"diskState":         d.state(),
		"timeCreated":       formatTime(d.createdAt),
		"maxShares":         1,
	}
	out := map[string]any{
		"id": s.resourceID(d.rg, "Microsoft.Compute/disks", d.name), "name": d.name, "type": "Microsoft.Compute/disks",
		"location": s.opts.Location, "sku": map[string]any{"name": d.sku, "tier": strings.SplitN(d.sku, "_", 2)[0]},
		"properties": props,
	}
	if tags, ok := d.body["tags"].(map[string]any); ok && len(tags) > 0 {
		out["tags"] = tags
	} else if tags, ok := d.body["tags"].(map[string]string); ok && len(tags) > 0 {
		out["tags"] = tags
	}
	if d.zone != "" {
		out["zones"] = []string{d.zone}
	}
	if d.att != nil {
		out["managedBy"] = s.resourceID(d.att.vm.rg, "Microsoft.Compute/virtualMachines", d.att.vm.name)
	}
	return out
}

// dataDiskSpec is one of storageProfile.dataDisks of a VM PUT or PATCH.
type dataDiskSpec struct {
	Lun          *int   `json:"lun"`
	Name         string `json:"name"`
	CreateOption string `json:"createOption"`
	Caching      string `json:"caching"`
	ManagedDisk  *struct {
		ID string `json:"id"`
	} `json:"managedDisk"`
	ToBeDetached *bool  `json:"toBeDetached"`
	DetachOption string `json:"detachOption"`
	DeleteOption string `json:"deleteOption"`
}

// diskChange is what a VM update does to its data disks: the disks to
// attach (at their LUN) and the attachments to detach.
type diskChange struct {
	attach []newAttachment
	detach []*attachment
	// flag are the attachments that toBeDetached detaches (listed while
	// they detach), a subset of detach.
	flag map[*attachment]bool
}

type newAttachment struct {
	d       *disk
	lun     int
	caching string
}

func (c *diskChange) empty() bool { return len(c.attach) == 0 && len(c.detach) == 0 }

// planDisks checks a VM update's dataDisks against the VM's attachments
// and the disks, as Compute checks them, and returns the change. The
// caller holds s.mu.
func (s *Server) planDisks(v *vm, want []dataDiskSpec, now time.Time) (*diskChange, error) {
	current := s.attachmentsOf(v)
	c := &diskChange{flag: map[*attachment]bool{}}
	seenLUN := map[int]bool{}
	kept := map[*attachment]bool{}
	for i, dd := range want {
		if err := checkDataDisk(i, dd, seenLUN); err != nil {
			return nil, err
		}
		lun := *dd.Lun
		d := s.diskByID(dd.ManagedDisk.ID, now)
		if d == nil {
			return nil, &armError{Status: http.StatusNotFound, Code: CodeNotFound, Target: dd.ManagedDisk.ID,
				Message: fmt.Sprintf("Disk %s was not found.", dd.ManagedDisk.ID)}
		}
		var mine *attachment
		if d.att != nil && d.att.vm == v {
			mine = d.att
		}
		detach := dd.ToBeDetached != nil && *dd.ToBeDetached
		switch {
		case mine != nil && mine.lun != lun:
			return nil, &armError{Status: http.StatusConflict, Code: "PropertyChangeNotAllowed", Target: "dataDisk.lun", Message: "Changing property 'dataDisk.lun' is not allowed."}
		case mine != nil:
			kept[mine] = true
			if detach {
				c.detach = append(c.detach, mine)
				c.flag[mine] = true
			}
			continue
		case detach:
			// toBeDetached on a disk the VM does not have: nothing to do.
			continue
		}
		if err := s.checkAttach(v, d, lun, current, now); err != nil {
			return nil, err
		}
		c.attach = append(c.attach, newAttachment{d: d, lun: lun, caching: cmp.Or(dd.Caching, "None")})
	}
	for _, a := range current {
		if !kept[a] {
			c.detach = append(c.detach, a)
		}
	}
	count := len(current) - len(c.detach)
	if limit := v.size.maxDataDisks(); count+len(c.attach) > limit {
		return nil, &armError{Status: http.StatusConflict, Code: CodeOperationNotAllowed, Target: "dataDisks",
			Message: fmt.Sprintf("The maximum number of data disks allowed to be attached to a VM of this size is %d.", limit)}
	}
	return c, nil
}

// checkDataDisk checks the fields of dataDisks[i], as Compute checks them,
// and records its LUN in seenLUN.
func checkDataDisk(i int, dd dataDiskSpec, seenLUN map[int]bool) error {
	if dd.Lun == nil {
		return invalidParameter(fmt.Sprintf("dataDisks[%d].lun", i), "Required parameter 'dataDisk.lun' is missing (null).")
	}
	lun := *dd.Lun
	if lun < 0 || lun > maxLUN {
		return invalidParameter("dataDisks", fmt.Sprintf("The value %d of parameter 'dataDisk.lun' is out of range: 0 to %d.", lun, maxLUN))
	}
	if seenLUN[lun] {
		return invalidParameter("dataDisks", fmt.Sprintf("A disk at LUN %d already exists.", lun))
	}
	seenLUN[lun] = true
	if dd.ManagedDisk == nil || dd.ManagedDisk.ID == "" {
		return invalidParameter(fmt.Sprintf("dataDisks[%d].managedDisk.id", i), "The simulator attaches managed disks only: dataDisk.managedDisk.id is required.")
	}
	switch dd.CreateOption {
	case "Attach":
	case "":
		return invalidParameter(fmt.Sprintf("dataDisks[%d].createOption", i), "Required parameter 'dataDisk.createOption' is missing (null).")
	default:
		return &armError{Status: http.StatusBadRequest, Code: "InvalidParameterConflictingProperties", Target: "dataDisks",
			Message: fmt.Sprintf("The property 'dataDisk.createOption' cannot have the value '%s' when property 'dataDisk.managedDisk.id' is set.", dd.CreateOption)}
	}
	switch dd.DeleteOption {
	case "", "Detach":
	case "Delete":
		return invalidParameter(fmt.Sprintf("dataDisks[%d].deleteOption", i), "The simulator detaches data disks from a deleted VM; deleteOption Delete is not modelled.")
	default:
		return invalidParameter(fmt.Sprintf("dataDisks[%d].deleteOption", i), fmt.Sprintf("The value '%s' of parameter 'deleteOption' is invalid: Delete or Detach.", dd.DeleteOption))
	}
	if dd.DetachOption != "" && dd.DetachOption != "ForceDetach" {
		return invalidParameter(fmt.Sprintf("dataDisks[%d].detachOption", i), fmt.Sprintf("The value '%s' of parameter 'detachOption' is invalid: ForceDetach.", dd.DetachOption))
	}
	if dd.Caching != "" && dd.Caching != "None" && dd.Caching != "ReadOnly" && dd.Caching != "ReadWrite" {
		return invalidParameter(fmt.Sprintf("dataDisks[%d].caching", i), fmt.Sprintf("The value '%s' of parameter 'caching' is invalid: None, ReadOnly or ReadWrite.", dd.Caching))
	}
	return nil
}

// checkAttach checks that the disk d may be attached to the VM v at lun,
// beside its current attachments. The caller holds s.mu.
func (s *Server) checkAttach(v *vm, d *disk, lun int, current []*attachment, now time.Time) error {
	if d.att != nil {
		return &armError{Status: http.StatusConflict, Code: CodeConflictingUserInput, Target: s.resourceID(d.rg, "Microsoft.Compute/disks", d.name),
			Message: fmt.Sprintf("Cannot attach the disk %s to VM %s because it is already attached to VM %s. A disk can be attached to only one VM at a time.",
				d.name, s.resourceID(v.rg, "Microsoft.Compute/virtualMachines", v.name), s.resourceID(d.att.vm.rg, "Microsoft.Compute/virtualMachines", d.att.vm.name))}
	}
	if d.provisioningState(now) != StateSucceeded {
		return &armError{Status: http.StatusConflict, Code: CodeConflict, Message: "The request failed due to conflict with a concurrent request."}
	}
	if slices.ContainsFunc(current, func(a *attachment) bool { return a.lun == lun }) {
		return invalidParameter("dataDisks", fmt.Sprintf("A disk at LUN %d already exists.", lun))
	}
	if d.zone != v.zone {
		return &armError{Status: http.StatusBadRequest, Code: CodeBadRequest,
			Message: fmt.Sprintf("Disk %s cannot be attached to the VM because it is not in the same zone as the VM. VM zone: '%s'. Disk zone: '%s'.",
				s.resourceID(d.rg, "Microsoft.Compute/disks", d.name), v.zone, d.zone)}
	}
	if slices.Contains(premiumSKUs, d.sku) && !v.size.premiumIO() {
		return invalidParameter("dataDisk.managedDisk.storageAccountType", fmt.Sprintf(
			"Requested operation cannot be performed because the VM size %s does not support the storage account type %s of disk '%s'. Consider updating the VM to a size that supports Premium storage.",
			v.size.Name, d.sku, d.name))
	}
	return nil
}

// attachmentsOf are the VM's attachments, by LUN. The caller holds s.mu.
func (s *Server) attachmentsOf(v *vm) []*attachment {
	var out []*attachment
	for _, d := range s.diskOrder {
		if d.att != nil && d.att.vm == v {
			out = append(out, d.att)
		}
	}
	slices.SortFunc(out, func(a, b *attachment) int { return cmp.Compare(a.lun, b.lun) })
	return out
}

// applyDisks starts a VM update's change: each disk attaching (the
// DiskStarter's AttachDisk in the background) or detaching (DetachDisk,
// retried while the cell holds the disk), under op, which ends when they
// all have. The caller holds s.mu.
func (s *Server) applyDisks(v *vm, c *diskChange, op *operation, now time.Time) {
	ds := s.diskStarter()
	for _, na := range c.attach {
		d := na.d
		a := &attachment{disk: d, vm: v, lun: na.lun, caching: na.caching, name: d.name, readyAt: now.Add(s.diskDelay), op: op}
		d.att = a
		s.log.Info("disk attaching", "disk", d.name, "vm", v.name, "lun", na.lun)
		if ds == nil {
			a.done = true
			continue
		}
		cell, id, path := v.cell.ID, d.starterID(), DevicePath(na.lun)
		a.attachCalled = make(chan struct{})
		s.background(func(ctx context.Context) {
			err := ds.AttachDisk(ctx, cell, id, path, false)
			close(a.attachCalled)
			s.mu.Lock()
			defer s.mu.Unlock()
			if a.detaching {
				return // the detach under way ends it
			}
			a.done = true
			if err != nil {
				// The machine could not take the disk: the update fails and
				// the disk is not attached.
				s.log.Warn("the disk starter could not attach a disk", "disk", d.name, "vm", v.name, "error", err)
				op.err = &armError{Status: http.StatusOK, Code: "InternalOperationError", Message: fmt.Sprintf("Attaching disk %s to VM %s failed: %v", d.name, v.name, err)}
				if d.att == a {
					d.att = nil
				}
			}
		})
	}
	for _, a := range c.detach {
		s.startDetach(a, !c.flag[a], op, now)
	}
}

// startDetach starts detaching a. The caller holds s.mu.
func (s *Server) startDetach(a *attachment, omitted bool, op *operation, now time.Time) {
	if a.detaching {
		return
	}
	d := a.disk
	a.detaching, a.omitted, a.done, a.readyAt, a.op = true, omitted, false, now.Add(s.diskDelay), op
	s.log.Info("disk detaching", "disk", d.name, "vm", a.vm.name, "lun", a.lun)
	ds := s.diskStarter()
	if ds == nil {
		a.done = true
		return
	}
	cell, id, attachCalled := a.vm.cell.ID, d.starterID(), a.attachCalled
	s.background(func(ctx context.Context) {
		if attachCalled != nil {
			select {
			case <-attachCalled:
			case <-ctx.Done():
				return
			}
		}
		err := retrying(ctx, func(ctx context.Context) error {
			err := ds.DetachDisk(ctx, cell, id)
			if err != nil {
				s.log.Debug("the disk is still held by its cell", "disk", d.name, "vm", a.vm.name, "error", err)
			}
			return err
		})
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil {
			a.done = true
		}
	})
}

// settleDisksLocked ends the attachments and detachments that are done:
// an attached disk stays, a detached one is free. A VM that is gone frees
// its disks once their detach is done. The caller holds s.mu.
func (s *Server) settleDisksLocked(now time.Time) {
	for _, d := range s.diskOrder {
		a := d.att
		if a == nil {
			continue
		}
		if a.vm.gone(now) && !a.detaching {
			s.startDetach(a, true, nil, now)
		}
		if a.detaching && a.settled(now) {
			d.att = nil
			s.log.Info("disk detached", "disk", d.name, "vm", a.vm.name)
		}
	}
}

// vmDisksBusy reports whether a VM's data disks are attaching or
// detaching. The caller holds s.mu.
func (s *Server) vmDisksBusy(v *vm, now time.Time) bool {
	for _, a := range s.attachmentsOf(v) {
		if !a.settled(now) {
			return true
		}
	}
	return false
}

// dataDisksJSON is a VM's storageProfile.dataDisks as ARM writes them:
// every disk attached or attaching, and those detaching with toBeDetached
// true. The caller holds s.mu.
func (s *Server) dataDisksJSON(v *vm) []any {
	out := []any{}
	for _, a := range s.attachmentsOf(v) {
		if a.omitted {
			continue
		}
		d := a.disk
		out = append(out, map[string]any{
			"lun": a.lun, "name": a.name, "createOption": "Attach", "caching": a.caching,
			"managedDisk":  map[string]any{"id": s.resourceID(d.rg, "Microsoft.Compute/disks", d.name), "storageAccountType": d.sku},
			"diskSizeGB":   d.sizeGB,
			"toBeDetached": a.detaching,
			"deleteOption": "Detach",
		})
	}
	return out
}

// detachAllLocked starts detaching every disk of a VM being deleted. The
// caller holds s.mu.
func (s *Server) detachAllLocked(v *vm, now time.Time) {
	for _, a := range s.attachmentsOf(v) {
		s.startDetach(a, true, nil, now)
	}
}

// diskSettledOp reports whether an operation on a VM's disks has ended,
// and its error. The caller holds s.mu.
func (s *Server) diskOpSettled(op *operation, now time.Time) bool {
	for _, d := range s.diskOrder {
		if a := d.att; a != nil && a.op == op && !a.settled(now) {
			return false
		}
	}
	return true
}
