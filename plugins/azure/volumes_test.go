package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

func TestParseDiskID(t *testing.T) {
	tests := map[string]struct {
		id   string
		want diskRef
		ok   bool
	}{
		"as ARM writes it": {id: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/disks/pv-1", want: diskRef{"s1", "rg", "pv-1"}, ok: true},
		"segments in any case": {
			id: "/SUBSCRIPTIONS/s1/resourcegroups/RG/providers/microsoft.compute/Disks/pv-1", want: diskRef{"s1", "RG", "pv-1"}, ok: true,
		},
		"a VM":             {id: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"},
		"a snapshot":       {id: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/snapshots/pv-1"},
		"a name alone":     {id: "pv-1"},
		"empty":            {},
		"no name":          {id: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/disks/"},
		"a path below it":  {id: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/disks/pv-1/x"},
		"no resourceGroup": {id: "/subscriptions/s1/resourceGroup/rg/providers/Microsoft.Compute/disks/pv-1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := parseDiskID(tt.id)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseDiskID(%q) = %+v, %v; want %+v, %v", tt.id, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestFreeLUN(t *testing.T) {
	at := func(luns ...int32) []*armcompute.DataDisk {
		var out []*armcompute.DataDisk
		for _, l := range luns {
			out = append(out, &armcompute.DataDisk{Lun: ptr(l)})
		}
		return out
	}
	full := make([]int32, 0, maxLUN+1)
	for l := range int32(maxLUN + 1) {
		full = append(full, l)
	}
	tests := map[string]struct {
		disks []*armcompute.DataDisk
		want  int32
		ok    bool
	}{
		"none":            {want: 0, ok: true},
		"a gap":           {disks: at(0, 2, 1, 4), want: 3, ok: true},
		"not from zero":   {disks: at(1, 2), want: 0, ok: true},
		"nil entries":     {disks: []*armcompute.DataDisk{nil, {}}, want: 0, ok: true},
		"every LUN taken": {disks: at(full...), ok: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := freeLUN(tt.disks)
			if got != tt.want || ok != tt.ok {
				t.Errorf("freeLUN = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// armErr is an ARM error answer as the SDK returns it.
func armErr(status int, code, message string) error {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message}})
	return runtime.NewResponseError(&http.Response{
		StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)),
		Request: httptest.NewRequest(http.MethodPatch, "https://management.azure.com/vm", nil),
	})
}

// Compute's refusals of an attaching update, as its docs and the SDKs'
// issues quote them, map to the contract's kinds.
func TestMapAttachError(t *testing.T) {
	const handle = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/pv-1"
	conflict := func(r pluginapi.VolumeConflictReason) func(error) bool {
		return func(err error) bool {
			var c *pluginapi.VolumeConflictError
			return errors.As(err, &c) && c.Reason == r && c.VolumeHandle == handle
		}
	}
	tests := map[string]struct {
		err  error
		want func(error) bool
	}{
		"attached elsewhere": {armErr(409, "ConflictingUserInput", "Cannot attach the disk pv-1 to VM a because it is already attached to VM b."), conflict(pluginapi.ConflictInUse)},
		"owned elsewhere":    {armErr(409, "ConflictingUserInput", "Disk 'pv-1' cannot be attached as the disk is already owned by VM 'b'."), conflict(pluginapi.ConflictInUse)},
		"another zone": {armErr(400, "BadRequest", "Disk pv-1 cannot be attached to the VM because it is not in the same zone as the VM. VM zone: '1'. Disk zone: '2'."),
			conflict(pluginapi.ConflictWrongZone)},
		"a premium disk on a size without premium storage": {armErr(400, "InvalidParameter",
			"Requested operation cannot be performed because the VM size Standard_D2_v3 does not support the storage account type Premium_LRS of disk 'pv-1'. Consider updating the VM to a size that supports Premium storage."),
			func(err error) bool {
				var c *pluginapi.VolumeConflictError
				return errors.As(err, &c) && c.Reason == pluginapi.ConflictWrongType && c.VolumeHandle == handle && c.DiskType == "Premium_LRS"
			}},
		"the size's limit": {armErr(409, "OperationNotAllowed", "The maximum number of data disks allowed to be attached to a VM of this size is 4."),
			conflict(pluginapi.ConflictAttachmentLimit)},
		"no such disk":   {armErr(404, "NotFound", "Disk pv-1 was not found."), pluginapi.IsNotFound},
		"another update": {armErr(409, "Conflict", "The request failed due to conflict with a concurrent request."), pluginapi.IsTransient},
		"throttled":      {armErr(429, "OperationNotAllowed", "too many requests"), pluginapi.IsThrottled},
		"a LUN taken": {armErr(400, "InvalidParameter", "A disk at LUN 0 already exists."), func(err error) bool {
			return !pluginapi.IsVolumeConflict(err) && strings.Contains(err.Error(), "LUN 0")
		}},
		"not an answer at all": {errors.New("connection reset"), func(err error) bool { return strings.Contains(err.Error(), "connection reset") }},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := mapAttachError(tt.err, handle); !tt.want(got) {
				t.Errorf("mapAttachError(%v) = %v (%T)", tt.err, got, got)
			}
		})
	}
}

func TestAttachmentState(t *testing.T) {
	vmIn := func(state string) *armcompute.VirtualMachine {
		return &armcompute.VirtualMachine{Properties: &armcompute.VirtualMachineProperties{ProvisioningState: ptr(state)}}
	}
	listed := &armcompute.DataDisk{Lun: ptr[int32](2)}
	flagged := &armcompute.DataDisk{Lun: ptr[int32](2), ToBeDetached: ptr(true)}
	tests := []struct {
		vm   string
		disk *armcompute.DataDisk
		want pluginapi.AttachmentState
	}{
		{"Succeeded", listed, pluginapi.AttachmentAttached},
		{"Updating", listed, pluginapi.AttachmentAttaching},
		{"Creating", listed, pluginapi.AttachmentAttaching},
		{"Deleting", listed, pluginapi.AttachmentDetaching},
		{"Succeeded", flagged, pluginapi.AttachmentDetaching},
		{"Updating", flagged, pluginapi.AttachmentDetaching},
		{"Failed", listed, pluginapi.AttachmentAttached},
	}
	for _, tt := range tests {
		if got := attachmentState(vmIn(tt.vm), tt.disk); got != tt.want {
			t.Errorf("a disk (toBeDetached %v) of a VM %s is %s; want %s", deref(tt.disk.ToBeDetached), tt.vm, got, tt.want)
		}
	}
}

// AttachVolume takes the lowest free LUN, a LUN freed by a detach
// included, and answers its path; the VM's model is the record that
// DescribeVolumeAttachments reads.
func TestAttachTakesTheLowestFreeLUN(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	ctx := t.Context()
	launched, err := p.Launch(ctx, launchRequest("kip-luns"))
	if err != nil {
		t.Fatal(err)
	}
	vm := launched.Instance.ID
	d1, d2, d3 := f.addDisk("pv-1", "1"), f.addDisk("pv-2", "1"), f.addDisk("pv-3", "1")
	attach := func(h string) string {
		t.Helper()
		r, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: h})
		if err != nil {
			t.Fatalf("attaching %s: %v", h, err)
		}
		return r.Attachment.Device.Path
	}
	got := []string{attach(d1), attach(d2)}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: d1}); err != nil {
		t.Fatal(err)
	}
	got = append(got, attach(d3), attach(d2))
	want := []string{"/dev/disk/azure/scsi1/lun0", "/dev/disk/azure/scsi1/lun1", "/dev/disk/azure/scsi1/lun0", "/dev/disk/azure/scsi1/lun1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices of the attaches (-want +got):\n%s", diff)
	}
	r, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{vm, vm, "kip-never-launched", "Not a VM name"}})
	if err != nil {
		t.Fatal(err)
	}
	wantAs := []pluginapi.VolumeAttachment{
		{InstanceID: vm, Driver: volumeDriver, VolumeHandle: d2, State: pluginapi.AttachmentAttached, Device: pluginapi.VolumeDevice{Path: "/dev/disk/azure/scsi1/lun1"}},
		{InstanceID: vm, Driver: volumeDriver, VolumeHandle: d3, State: pluginapi.AttachmentAttached, Device: pluginapi.VolumeDevice{Path: "/dev/disk/azure/scsi1/lun0"}},
	}
	if diff := cmp.Diff(wantAs, r.Attachments); diff != "" {
		t.Errorf("DescribeVolumeAttachments (-want +got):\n%s", diff)
	}
	// The PATCH sends the VM's data disks back with the new one.
	body := f.body("VirtualMachines_Update", 3)
	disks := body["properties"].(map[string]any)["storageProfile"].(map[string]any)["dataDisks"].([]any)
	if len(disks) != 2 || disks[1].(map[string]any)["createOption"] != "Attach" || disks[1].(map[string]any)["deleteOption"] != "Detach" {
		t.Errorf("the last attach's PATCH sent dataDisks %v; want the VM's disk and the new one, createOption Attach, deleteOption Detach", disks)
	}
}

// The refusals every volume call makes before it asks Azure.
func TestVolumeRefusals(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	ctx := t.Context()
	launched, err := p.Launch(ctx, launchRequest("kip-refusals"))
	if err != nil {
		t.Fatal(err)
	}
	vm := launched.Instance.ID
	disk := f.addDisk("pv-r", "1")
	f.set(vm, func(v *fakeVM) {}) // the VM as launched
	unsupported := func(field string) func(error) bool {
		return func(err error) bool {
			var u *pluginapi.UnsupportedError
			return errors.As(err, &u) && u.Field == field
		}
	}
	tests := map[string]struct {
		req  pluginapi.AttachVolumeRequest
		want func(error) bool
	}{
		"another driver":       {pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: "ebs.csi.aws.com", VolumeHandle: disk}, unsupported(pluginapi.FieldVolumeDriver)},
		"read-only":            {pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: disk, ReadOnly: true}, unsupported(pluginapi.FieldReadOnly)},
		"not a disk ID":        {pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: "pv-r"}, pluginapi.IsNotFound},
		"another subscription": {pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: strings.Replace(disk, fakeSub, "11111111-0000-0000-0000-000000000000", 1)}, pluginapi.IsNotFound},
		"no such instance":     {pluginapi.AttachVolumeRequest{InstanceID: "kip-nowhere", Driver: volumeDriver, VolumeHandle: disk}, pluginapi.IsNotFound},
		"not an instance ID":   {pluginapi.AttachVolumeRequest{InstanceID: "Not/a/VM", Driver: volumeDriver, VolumeHandle: disk}, pluginapi.IsNotFound},
		"no such disk":         {pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: fakeDiskID("pv-nowhere")}, pluginapi.IsNotFound},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := p.AttachVolume(ctx, &tt.req); !tt.want(err) {
				t.Errorf("AttachVolume: %v (%T)", err, err)
			}
		})
	}
	if n := f.callCount("VirtualMachines_Update"); n != 0 {
		t.Errorf("the refused attaches updated the VM %d times", n)
	}
	// A VM of another cluster is refused, and shows no attachment.
	f.set(vm, func(v *fakeVM) { v.body["tags"] = map[string]any{tagCluster: "another", tagCell: vm} })
	_, err = p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: volumeDriver, VolumeHandle: disk})
	if err == nil || pluginapi.IsNotFound(err) || !strings.Contains(err.Error(), "another") {
		t.Errorf("attaching to another cluster's VM: %v; want a refusal naming its cluster", err)
	}
	if r, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{vm}}); err != nil || len(r.Attachments) != 0 {
		t.Errorf("describing another cluster's VM: %+v, %v; want none", r, err)
	}
}

// The per-VM lock serialises, ends with the waiter's context, and is
// forgotten once free.
func TestVMLocks(t *testing.T) {
	var l vmLocks
	unlock, err := l.lock(t.Context(), "kip-a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "KIP-A"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second lock of the same VM (names without case): %v; want it to wait until its context ends", err)
	}
	other, err := l.lock(t.Context(), "kip-b")
	if err != nil {
		t.Fatalf("another VM's lock: %v", err)
	}
	other()
	unlock()
	again, err := l.lock(t.Context(), "kip-a")
	if err != nil {
		t.Fatalf("the lock once free: %v", err)
	}
	again()
	if len(l.locks) != 0 {
		t.Errorf("%d locks remembered after every one was freed", len(l.locks))
	}
}
