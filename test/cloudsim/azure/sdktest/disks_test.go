package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/google/go-cmp/cmp"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/cloudsim/simcells"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// diskCells is a recording simcells.DiskStarter on cellstest's fake
// cells: it logs every disk call, and DetachDisk fails while the test
// says the cell holds the disk (mounted).
type diskCells struct {
	*cellstest.FakeCells
	mu    sync.Mutex
	calls []string
	held  map[string]bool // disk ID → DetachDisk fails
	// gate, when set, holds every AttachDisk until it is closed.
	gate chan struct{}
}

var _ simcells.DiskStarter = (*diskCells)(nil)

func newDiskCells() *diskCells {
	return &diskCells{FakeCells: cellstest.NewFakeCells(), held: map[string]bool{}}
}

func (d *diskCells) record(call string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call)
}

func (d *diskCells) CreateDisk(_ context.Context, id string, size int64) error {
	d.record(fmt.Sprintf("create %s %d", id, size))
	return nil
}

func (d *diskCells) DeleteDisk(_ context.Context, id string) error {
	d.record("delete " + id)
	return nil
}

func (d *diskCells) AttachDisk(ctx context.Context, instance, id, path string, readOnly bool) error {
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.record(fmt.Sprintf("attach %s %s %s %v", instance, id, path, readOnly))
	return nil
}

func (d *diskCells) DetachDisk(_ context.Context, instance, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held[id] {
		return errors.New("the disk is mounted")
	}
	d.calls = append(d.calls, fmt.Sprintf("detach %s %s", instance, id))
	return nil
}

func (d *diskCells) hold(id string, held bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[id] = held
}

func (d *diskCells) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// diskID is the ARM ID of disk name.
func diskID(name string) string {
	return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/disks/" + name
}

// beginDisk sends the PUT of an empty disk of sizeGB in zone.
func beginDisk(ctx context.Context, c clients, name, zone string, sizeGB int32) (*armcompute.DisksClientCreateOrUpdateResponse, error) {
	d := armcompute.Disk{
		Location: to.Ptr(location),
		SKU:      &armcompute.DiskSKU{Name: to.Ptr(armcompute.DiskStorageAccountTypesPremiumLRS)},
		Properties: &armcompute.DiskProperties{
			CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)},
			DiskSizeGB:   to.Ptr(sizeGB),
		},
	}
	if zone != "" {
		d.Zones = []*string{to.Ptr(zone)}
	}
	p, err := c.disks.BeginCreateOrUpdate(ctx, rg, name, d, nil)
	if err != nil {
		return nil, err
	}
	r, err := p.PollUntilDone(ctx, pollEvery)
	return &r, err
}

// armErrorOf is an ARM refusal and its error body (nil for none).
func armErrorOf(err error) (*azcore.ResponseError, armErrorBody) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return nil, armErrorBody{}
	}
	body, _ := runtime.Payload(re.RawResponse)
	var wrap struct {
		Error armErrorBody `json:"error"`
	}
	_ = json.Unmarshal(body, &wrap)
	return re, wrap.Error
}

// armErrorBody is the error object of an ARM refusal.
type armErrorBody struct {
	Code, Message, Target string
}

func mustDisk(t *testing.T, c clients, name, zone string) armcompute.Disk {
	t.Helper()
	r, err := beginDisk(t.Context(), c, name, zone, 4)
	if err != nil {
		t.Fatalf("creating disk %s: %v", name, err)
	}
	return r.Disk
}

// attachment is a data disk to set on a VM.
type attachment struct {
	disk     string
	lun      int32
	detached bool // toBeDetached
}

// setDisks PATCHes the VM's data disks to ds, with If-Match when etag is
// set, and returns the poller.
func setDisks(ctx context.Context, c clients, vm, etag string, ds ...attachment) (*pollerOf, error) {
	disks := []*armcompute.DataDisk{}
	for _, d := range ds {
		disks = append(disks, &armcompute.DataDisk{
			Lun: to.Ptr(d.lun), CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesAttach),
			ManagedDisk: &armcompute.ManagedDiskParameters{ID: to.Ptr(diskID(d.disk))}, ToBeDetached: to.Ptr(d.detached),
		})
	}
	var opts *armcompute.VirtualMachinesClientBeginUpdateOptions
	if etag != "" {
		opts = &armcompute.VirtualMachinesClientBeginUpdateOptions{IfMatch: to.Ptr(etag)}
	}
	return c.vms.BeginUpdate(ctx, rg, vm, armcompute.VirtualMachineUpdate{
		Properties: &armcompute.VirtualMachineProperties{StorageProfile: &armcompute.StorageProfile{DataDisks: disks}},
	}, opts)
}

type pollerOf = runtime.Poller[armcompute.VirtualMachinesClientUpdateResponse]

// dataDisks are a VM's data disks as GET shows them: "lun name
// toBeDetached".
func dataDisks(t *testing.T, c clients, vm string) []string {
	t.Helper()
	r, err := c.vms.Get(t.Context(), rg, vm, nil)
	if err != nil {
		t.Fatalf("getting VM %s: %v", vm, err)
	}
	var out []string
	for _, d := range r.Properties.StorageProfile.DataDisks {
		out = append(out, fmt.Sprintf("%d %s %v %s", *d.Lun, *d.Name, *d.ToBeDetached, *d.ManagedDisk.ID))
	}
	return out
}

// TestDiskLifecycle creates a disk, attaches it to a VM, detaches it and
// deletes it, with the SDK's pollers, against a clock the test moves: the
// disk Creating, then Succeeded and Unattached; the VM Updating while its
// disk attaches, the disk Attached with managedBy; a delete of the attached
// disk refused; toBeDetached listing the disk while it detaches; the
// disk Unattached again, and deleted.
func TestDiskLifecycle(t *testing.T) {
	clock := newClock()
	sim, c := startSim(t, azuresim.Options{Now: clock.Now, DiskDelay: 10 * time.Second})
	ctx := t.Context()
	mustCreate(t, c, spec{name: "kip-disk-vm", zone: "1"})

	lifecycleCreate(ctx, t, clock, sim, c)

	// Attach at LUN 0: the VM Updating until the attach's delay.
	vm, err := c.vms.Get(ctx, rg, "kip-disk-vm", nil)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := setDisks(ctx, c, "kip-disk-vm", str(vm.Etag), attachment{disk: "data-1", lun: 0})
	if err != nil {
		t.Fatalf("attaching: %v", err)
	}
	if done, err := pollOnce(ctx, ap); err != nil || done {
		t.Fatalf("the attach before its delay: done %v, %v; want InProgress", done, err)
	}
	assertState(t, c, "kip-disk-vm", "Updating", []string{"ProvisioningState/updating", "PowerState/running"})
	if got, want := dataDisks(t, c, "kip-disk-vm"), []string{"0 data-1 false " + diskID("data-1")}; !slices.Equal(got, want) {
		t.Errorf("dataDisks while attaching %q, want %q", got, want)
	}
	clock.Advance(10 * time.Second)
	if _, err := ap.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatalf("the attach: %v", err)
	}
	assertState(t, c, "kip-disk-vm", "Succeeded", []string{"ProvisioningState/succeeded", "PowerState/running"})
	d, err := c.disks.Get(ctx, rg, "data-1", nil)
	if err != nil || *d.Properties.DiskState != armcompute.DiskStateAttached || str(d.ManagedBy) != str(vm.ID) {
		t.Errorf("the attached disk: %+v, %v; want Attached, managed by %s", d.Properties, err, str(vm.ID))
	}
	// The stale etag no longer matches.
	if _, err := setDisks(ctx, c, "kip-disk-vm", str(vm.Etag)); !isCode(err, http.StatusPreconditionFailed, "PreconditionFailed") {
		t.Errorf("a PATCH with the old etag: %v; want 412 PreconditionFailed", err)
	}
	// An attached disk cannot be deleted.
	if _, err := c.disks.BeginDelete(ctx, rg, "data-1", nil); !isCode(err, http.StatusConflict, "OperationNotAllowed") {
		t.Errorf("deleting the attached disk: %v; want 409 OperationNotAllowed", err)
	}

	// Detach with toBeDetached: listed so while it detaches.
	dp, err := setDisks(ctx, c, "kip-disk-vm", "", attachment{disk: "data-1", lun: 0, detached: true})
	if err != nil {
		t.Fatalf("detaching: %v", err)
	}
	if got, want := dataDisks(t, c, "kip-disk-vm"), []string{"0 data-1 true " + diskID("data-1")}; !slices.Equal(got, want) {
		t.Errorf("dataDisks while detaching %q, want %q", got, want)
	}
	// A second update while this one runs is refused.
	if _, err := setDisks(ctx, c, "kip-disk-vm", ""); !isCode(err, http.StatusConflict, "Conflict") {
		t.Errorf("a PATCH during the detach: %v; want 409 Conflict", err)
	}
	clock.Advance(10 * time.Second)
	if _, err := dp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatalf("the detach: %v", err)
	}
	if got := dataDisks(t, c, "kip-disk-vm"); len(got) != 0 {
		t.Errorf("dataDisks after the detach %q; want none", got)
	}
	if d, err := c.disks.Get(ctx, rg, "data-1", nil); err != nil || *d.Properties.DiskState != armcompute.DiskStateUnattached || d.ManagedBy != nil {
		t.Errorf("the detached disk: %+v, %v; want Unattached", d.Properties, err)
	}

	del, err := c.disks.BeginDelete(ctx, rg, "data-1", nil)
	if err != nil {
		t.Fatalf("deleting the disk: %v", err)
	}
	clock.Advance(10 * time.Second)
	if _, err := del.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatalf("the disk's delete: %v", err)
	}
	if _, err := c.disks.Get(ctx, rg, "data-1", nil); !is404(err) {
		t.Errorf("GET of the deleted disk: %v; want 404", err)
	}
	calls := sim.Calls()
	for _, op := range []string{"Disks_CreateOrUpdate", "Disks_Get", "Disks_Delete", "VirtualMachines_Update"} {
		if calls[op] == 0 {
			t.Errorf("no %s counted: %v", op, calls)
		}
	}
}

// lifecycleCreate creates the disk data-1 in zone 1: Creating until the
// disk delay, then Succeeded and Unattached.
func lifecycleCreate(ctx context.Context, t *testing.T, clock *cellstest.Clock, sim *azuresim.Server, c clients) {
	t.Helper()
	p, err := c.disks.BeginCreateOrUpdate(ctx, rg, "data-1", armcompute.Disk{
		Location: to.Ptr(location), Zones: []*string{to.Ptr("1")},
		Properties: &armcompute.DiskProperties{
			CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)}, DiskSizeGB: to.Ptr[int32](8),
		},
	}, nil)
	if err != nil {
		t.Fatalf("BeginCreateOrUpdate of the disk: %v", err)
	}
	if done, err := pollOnce(ctx, p); err != nil || done {
		t.Fatalf("the disk's create before its delay: done %v, %v; want InProgress", done, err)
	}
	if d, _ := sim.Disk(rg, "data-1"); d.ProvisioningState != azuresim.StateCreating {
		t.Errorf("disk %+v; want Creating", d)
	}
	clock.Advance(10 * time.Second)
	r, err := p.PollUntilDone(ctx, pollEvery)
	if err != nil {
		t.Fatalf("the disk's create: %v", err)
	}
	got := map[string]string{
		"id": str(r.ID), "state": str(r.Properties.ProvisioningState), "diskState": string(*r.Properties.DiskState),
		"zone": *r.Zones[0], "size": fmt.Sprint(*r.Properties.DiskSizeGB), "managedBy": str(r.ManagedBy),
	}
	want := map[string]string{"id": diskID("data-1"), "state": "Succeeded", "diskState": "Unattached", "zone": "1", "size": "8", "managedBy": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the created disk (-want +got):\n%s", diff)
	}
}

// TestAttachRefusals: what Compute refuses when a VM update attaches
// disks, with its status and code, and that a refused update attaches
// nothing.
func TestAttachRefusals(t *testing.T) {
	_, c := startSim(t, azuresim.Options{})
	ctx := t.Context()
	mustCreate(t, c, spec{name: "kip-a", zone: "1"})
	mustCreate(t, c, spec{name: "kip-b", zone: "1"})
	mustCreate(t, c, spec{name: "kip-small", size: "Standard_B1s", zone: "1"})
	mustCreate(t, c, spec{name: "kip-std", size: "Standard_D2_v3", zone: "1"}) // no premium storage
	for _, name := range []string{"d-a", "d-1", "d-2", "d-3"} {
		mustDisk(t, c, name, "1")
	}
	mustDisk(t, c, "d-zone2", "2")
	p, err := setDisks(ctx, c, "kip-a", "", attachment{disk: "d-a", lun: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		vm     string
		disks  []attachment
		status int
		code   string
	}{
		{"attached to another VM", "kip-b", []attachment{{disk: "d-a", lun: 0}}, http.StatusConflict, "ConflictingUserInput"},
		{"in another zone", "kip-b", []attachment{{disk: "d-zone2", lun: 0}}, http.StatusBadRequest, "BadRequest"},
		{"the same LUN twice", "kip-b", []attachment{{disk: "d-1", lun: 1}, {disk: "d-2", lun: 1}}, http.StatusBadRequest, "InvalidParameter"},
		{"a LUN out of range", "kip-b", []attachment{{disk: "d-1", lun: 64}}, http.StatusBadRequest, "InvalidParameter"},
		{"no such disk", "kip-b", []attachment{{disk: "d-nowhere", lun: 0}}, http.StatusNotFound, "NotFound"},
		{"more than the size takes (Standard_B1s: 2)", "kip-small", []attachment{{disk: "d-1", lun: 0}, {disk: "d-2", lun: 1}, {disk: "d-3", lun: 2}}, http.StatusConflict, "OperationNotAllowed"},
		{"a LUN another disk of the VM holds", "kip-a", []attachment{{disk: "d-a", lun: 0}, {disk: "d-1", lun: 0}}, http.StatusBadRequest, "InvalidParameter"},
		{"no such VM", "kip-nowhere", []attachment{{disk: "d-1", lun: 0}}, http.StatusNotFound, "ResourceNotFound"},
		{"a Premium_LRS disk on a size without premium storage", "kip-std", []attachment{{disk: "d-1", lun: 0}}, http.StatusBadRequest, "InvalidParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := setDisks(ctx, c, tt.vm, "", tt.disks...)
			if !isCode(err, tt.status, tt.code) {
				t.Errorf("got %v; want %d %s", err, tt.status, tt.code)
			}
		})
	}
	_, err = setDisks(ctx, c, "kip-std", "", attachment{disk: "d-1", lun: 0})
	if re, ae := armErrorOf(err); re == nil || ae.Target != "dataDisk.managedDisk.storageAccountType" || !strings.Contains(ae.Message,
		"the VM size Standard_D2_v3 does not support the storage account type Premium_LRS of disk 'd-1'") {
		t.Errorf("a Premium_LRS disk on a Standard_D2_v3: %v (target %q); want Compute's refusal naming the size, the SKU and the disk", err, ae.Target)
	}
	for _, vm := range []string{"kip-b", "kip-small", "kip-std"} {
		if got := dataDisks(t, c, vm); len(got) != 0 {
			t.Errorf("the refused updates left disks on %s: %q", vm, got)
		}
	}
	if got, want := dataDisks(t, c, "kip-a"), []string{"0 d-a false " + diskID("d-a")}; !slices.Equal(got, want) {
		t.Errorf("kip-a's disks %q after the refusals; want %q", got, want)
	}
	// Two disks on two VMs may each be at LUN 0; two at a limit of two fit.
	p, err = setDisks(ctx, c, "kip-small", "", attachment{disk: "d-1", lun: 0}, attachment{disk: "d-2", lun: 1})
	if err != nil {
		t.Fatalf("attaching two disks to a Standard_B1s: %v", err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	// A whole-model PUT that lists no data disk detaches them all.
	vp, err := begin(ctx, c, spec{name: "kip-small", size: "Standard_B1s", zone: "1"})
	if err != nil {
		t.Fatalf("PUT of kip-small without data disks: %v", err)
	}
	if _, err := vp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	if got := dataDisks(t, c, "kip-small"); len(got) != 0 {
		t.Errorf("kip-small's disks after a PUT without them: %q", got)
	}
	skus, err := c.skus.NewListPager(nil).NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skus.Value {
		for _, cp := range s.Capabilities {
			switch name, value := str(cp.Name), str(cp.Value); {
			case str(s.Name) == "Standard_B1s" && name == "MaxDataDiskCount" && value != "2":
				t.Errorf("Standard_B1s' MaxDataDiskCount is %s; want 2", value)
			case str(s.Name) == "Standard_D2_v3" && name == "PremiumIO" && value != "False":
				t.Errorf("Standard_D2_v3's PremiumIO is %s; want False", value)
			case str(s.Name) == "Standard_D2s_v3" && name == "PremiumIO" && value != "True":
				t.Errorf("Standard_D2s_v3's PremiumIO is %s; want True", value)
			}
		}
	}
}

// TestDisksOnCells: with a DiskStarter, a disk's create, attach, detach
// and delete reach the machine (the path the Azure udev rule makes for the
// LUN, the cell named after the VM); a detach stays under way, the VM
// Updating, while the cell holds the disk; a deleted VM's disks are
// detached.
func TestDisksOnCells(t *testing.T) {
	cells := newDiskCells()
	sim, c := startSim(t, azuresim.Options{Cells: cells})
	ctx := t.Context()
	mustCreate(t, c, spec{name: "kip-cell-a", zone: "2"})
	mustDisk(t, c, "data-a", "2")
	mustDisk(t, c, "data-b", "2")
	a, _ := sim.Disk(rg, "data-a")
	b, _ := sim.Disk(rg, "data-b")

	p, err := setDisks(ctx, c, "kip-cell-a", "", attachment{disk: "data-a", lun: 0}, attachment{disk: "data-b", lun: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	cells.hold(a.UniqueID, true)
	// Detach data-a by leaving it out; data-b stays.
	p, err = setDisks(ctx, c, "kip-cell-a", "", attachment{disk: "data-b", lun: 3})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // DetachDisk is asked, and refused, a few times
	if done, err := pollOnce(ctx, p); err != nil || done {
		t.Fatalf("the detach of a held disk: done %v, %v; want InProgress", done, err)
	}
	if d, _ := sim.Disk(rg, "data-a"); d.DiskState != azuresim.DiskAttached || !d.Detaching {
		t.Errorf("the held disk %+v; want Attached, detaching", d)
	}
	cells.hold(a.UniqueID, false)
	if _, err := p.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	if err := remove(ctx, c, "kip-cell-a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "data-b to be free", func() bool { d, _ := sim.Disk(rg, "data-b"); return d.DiskState == azuresim.DiskUnattached })
	dp, err := c.disks.BeginDelete(ctx, rg, "data-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, pollEvery); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create " + a.UniqueID + " 4294967296", "create " + b.UniqueID + " 4294967296",
		"attach kip-cell-a " + a.UniqueID + " /dev/disk/azure/scsi1/lun0 false",
		"attach kip-cell-a " + b.UniqueID + " /dev/disk/azure/scsi1/lun3 false",
		"detach kip-cell-a " + a.UniqueID, "detach kip-cell-a " + b.UniqueID, "delete " + a.UniqueID,
	}
	got := cells.log()
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the DiskStarter's calls (-want +got):\n%s", diff)
	}
}

// TestVMDeletedWhileItsDiskAttaches: a VM deleted while the machine is
// still taking its disk detaches it only once the attach returned, so the
// machine is not left holding a disk the cloud calls free.
func TestVMDeletedWhileItsDiskAttaches(t *testing.T) {
	cells := newDiskCells()
	sim, c := startSim(t, azuresim.Options{Cells: cells})
	ctx := t.Context()
	mustCreate(t, c, spec{name: "kip-gone", zone: "1"})
	mustDisk(t, c, "data-g", "1")
	d, _ := sim.Disk(rg, "data-g")
	gate := make(chan struct{})
	cells.mu.Lock()
	cells.gate = gate
	cells.mu.Unlock()
	if _, err := setDisks(ctx, c, "kip-gone", "", attachment{disk: "data-g", lun: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.vms.BeginDelete(ctx, rg, "kip-gone", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := cells.log(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "detach") }) {
		t.Errorf("DetachDisk called while AttachDisk is in flight: %q", got)
	}
	close(gate)
	eventually(t, "the disk to be free", func() bool { d, _ := sim.Disk(rg, "data-g"); return d.DiskState == azuresim.DiskUnattached })
	want := []string{"attach kip-gone " + d.UniqueID + " /dev/disk/azure/scsi1/lun0 false", "detach kip-gone " + d.UniqueID}
	if got := cells.log()[1:]; !slices.Equal(got, want) {
		t.Errorf("the DiskStarter's calls after the create: %q; want %q", got, want)
	}
}
