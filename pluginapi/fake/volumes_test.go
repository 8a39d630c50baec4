package fake_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

// running launches cell on p and returns its instance, running.
func running(t *testing.T, p *fake.Provider, cell string) pluginapi.Instance {
	t.Helper()
	l, err := p.Launch(t.Context(), launchReq(cell))
	if err != nil {
		t.Fatalf("launching %s: %v", cell, err)
	}
	return l.Instance
}

func attachReq(instance, handle string) *pluginapi.AttachVolumeRequest {
	return &pluginapi.AttachVolumeRequest{InstanceID: instance, Driver: fake.VolumeDriver, VolumeHandle: handle}
}

func detachReq(instance, handle string) *pluginapi.DetachVolumeRequest {
	return &pluginapi.DetachVolumeRequest{InstanceID: instance, Driver: fake.VolumeDriver, VolumeHandle: handle}
}

// conflict checks for a VolumeConflictError with reason and other instance.
func conflict(reason pluginapi.VolumeConflictReason, handle, other string) func(error) bool {
	return func(err error) bool {
		var c *pluginapi.VolumeConflictError
		return errors.As(err, &c) && c.Reason == reason && c.VolumeHandle == handle && c.InstanceID == other
	}
}

// wrongDiskType checks for a VolumeConflictError with ConflictWrongType
// naming the disk and its type.
func wrongDiskType(handle, diskType string) func(error) bool {
	return func(err error) bool {
		var c *pluginapi.VolumeConflictError
		return errors.As(err, &c) && c.Reason == pluginapi.ConflictWrongType && c.VolumeHandle == handle && c.DiskType == diskType
	}
}

// A typed disk is refused only by the types it names.
func TestTypedVolumeAttachesElsewhere(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store))
	inst := running(t, p, "c-1") // fake.small
	vol := store.CreateTypedVolume(fake.DefaultZone, "pd-extreme", "fake.large")
	if _, err := p.AttachVolume(t.Context(), attachReq(inst.ID, vol)); err != nil {
		t.Errorf("attaching %s, refused by fake.large only, to a fake.small: %v", vol, err)
	}
}

func TestGetInfoReportsTheVolumeDriver(t *testing.T) {
	tests := []struct {
		name        string
		opts        []fake.Option
		wantDrivers []string
	}{
		{name: "default capabilities", wantDrivers: []string{fake.VolumeDriver}},
		{name: "volumes", opts: []fake.Option{fake.WithCapabilities(pluginapi.CapabilityVolumes)}, wantDrivers: []string{fake.VolumeDriver}},
		{name: "without volumes", opts: []fake.Option{fake.WithCapabilities(pluginapi.CapabilitySpot)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := fake.New(tt.opts...).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(info.VolumeDrivers, tt.wantDrivers) {
				t.Errorf("VolumeDrivers = %q, want %q", info.VolumeDrivers, tt.wantDrivers)
			}
			if err := pluginapi.ValidateInfo(info); err != nil {
				t.Errorf("GetInfo answer is invalid: %v", err)
			}
		})
	}
}

func TestAttachVolumeErrors(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store))
	other := configured(t, "cl-other", fake.WithStore(store))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	second := running(t, p, "c-2")
	foreign := running(t, other, "c-1")
	free := store.CreateVolume(fake.DefaultZone)
	elsewhere := store.CreateVolume("fake-b")
	taken := store.CreateVolume(fake.DefaultZone)
	wrongType := store.CreateTypedVolume(fake.DefaultZone, "pd-standard", "fake.large", "fake.small")
	if _, err := p.AttachVolume(ctx, attachReq(second.ID, taken)); err != nil {
		t.Fatalf("attaching %s to %s: %v", taken, second.ID, err)
	}

	tests := []struct {
		name string
		req  *pluginapi.AttachVolumeRequest
		want func(error) bool
		what string
	}{
		{"unknown instance", attachReq("i-99999999", free), pluginapi.IsNotFound, "NotFound"},
		{"another cluster's instance", attachReq(foreign.ID, free), pluginapi.IsNotFound, "NotFound"},
		{"unknown disk", attachReq(inst.ID, "vol-99999999"), pluginapi.IsNotFound, "NotFound"},
		{"a disk attached elsewhere", attachReq(inst.ID, taken), conflict(pluginapi.ConflictInUse, taken, second.ID), "VolumeConflict in-use naming " + second.ID},
		{"a disk in another zone", attachReq(inst.ID, elsewhere), conflict(pluginapi.ConflictWrongZone, elsewhere, ""), "VolumeConflict wrong-zone"},
		{"a disk the instance's type cannot take", attachReq(inst.ID, wrongType), wrongDiskType(wrongType, "pd-standard"), "VolumeConflict wrong-type naming pd-standard"},
		{
			"another driver", &pluginapi.AttachVolumeRequest{InstanceID: inst.ID, Driver: "ebs.csi.aws.com", VolumeHandle: free},
			unsupported(pluginapi.FieldVolumeDriver), "Unsupported driver",
		},
		{
			"read-only", &pluginapi.AttachVolumeRequest{InstanceID: inst.ID, Driver: fake.VolumeDriver, VolumeHandle: free, ReadOnly: true},
			unsupported(pluginapi.FieldReadOnly), "Unsupported read_only",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := store.VolumeAttachments()
			_, err := p.AttachVolume(ctx, tt.req)
			if !tt.want(err) {
				t.Errorf("AttachVolume(%+v) = %v, want %s", tt.req, err, tt.what)
			}
			if after := store.VolumeAttachments(); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused AttachVolume changed the attachments from %+v to %+v", before, after)
			}
		})
	}
}

func TestAttachVolumeToAPendingInstance(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store), fake.WithBootDelay(time.Hour))
	inst := running(t, p, "c-1") // pending for an hour
	vol := store.CreateVolume(fake.DefaultZone)
	if _, err := p.AttachVolume(t.Context(), attachReq(inst.ID, vol)); !pluginapi.IsTransient(err) {
		t.Errorf("attaching to a pending instance = %v, want Transient", err)
	}
}

func TestAttachmentLimit(t *testing.T) {
	store := fake.NewStore()
	store.SetAttachmentLimit(2)
	p := configured(t, "cl", fake.WithStore(store))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	vols := []string{store.CreateVolume(fake.DefaultZone), store.CreateVolume(fake.DefaultZone), store.CreateVolume(fake.DefaultZone)}
	for _, v := range vols[:2] {
		if _, err := p.AttachVolume(ctx, attachReq(inst.ID, v)); err != nil {
			t.Fatalf("attaching %s within the limit: %v", v, err)
		}
	}
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vols[2])); !conflict(pluginapi.ConflictAttachmentLimit, vols[2], "")(err) {
		t.Errorf("a third disk past a limit of 2 = %v, want VolumeConflict attachment-limit", err)
	}
	// An attached disk again is no new slot.
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vols[1])); err != nil {
		t.Errorf("attaching an attached disk again at the limit = %v, want its attachment", err)
	}
}

// Attach goes attaching → attached after the attach delay; detach goes
// detaching → gone; both idempotent, detach NotFound once gone.
func TestAttachAndDetachOverTime(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store), fake.WithClock(clock), fake.WithAttachDelay(10*time.Second))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	vol := store.CreateVolume(fake.DefaultZone)
	want := func(state pluginapi.AttachmentState) []pluginapi.VolumeAttachment {
		return []pluginapi.VolumeAttachment{{
			InstanceID: inst.ID, Driver: fake.VolumeDriver, VolumeHandle: vol, State: state,
			Device: pluginapi.VolumeDevice{Serial: "vol00000001"},
		}}
	}
	describe := func(when string, want []pluginapi.VolumeAttachment) {
		t.Helper()
		resp, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{inst.ID, "i-unknown"}})
		if err != nil {
			t.Fatalf("%s: DescribeVolumeAttachments: %v", when, err)
		}
		if !reflect.DeepEqual(resp.Attachments, want) {
			t.Errorf("%s: DescribeVolumeAttachments = %+v, want %+v", when, resp.Attachments, want)
		}
	}

	first, err := p.AttachVolume(ctx, attachReq(inst.ID, vol))
	if err != nil || !reflect.DeepEqual(first.Attachment, want(pluginapi.AttachmentAttaching)[0]) {
		t.Fatalf("AttachVolume = %+v, %v; want %+v", first, err, want(pluginapi.AttachmentAttaching)[0])
	}
	again, err := p.AttachVolume(ctx, attachReq(inst.ID, vol))
	if err != nil || !reflect.DeepEqual(again.Attachment, first.Attachment) {
		t.Errorf("AttachVolume again while attaching = %+v, %v; want the same attachment", again, err)
	}
	advance(9 * time.Second)
	describe("9s into a 10s attach", want(pluginapi.AttachmentAttaching))
	advance(time.Second)
	describe("after the attach delay", want(pluginapi.AttachmentAttached))
	if again, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); err != nil || again.Attachment.State != pluginapi.AttachmentAttached {
		t.Errorf("AttachVolume again once attached = %+v, %v; want it attached", again, err)
	}

	for i := range 2 {
		if _, err := p.DetachVolume(ctx, detachReq(inst.ID, vol)); err != nil {
			t.Fatalf("DetachVolume (call %d) = %v, want success", i+1, err)
		}
	}
	describe("just detached", want(pluginapi.AttachmentDetaching))
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); !pluginapi.IsTransient(err) {
		t.Errorf("AttachVolume while detaching = %v, want Transient", err)
	}
	advance(10 * time.Second)
	describe("after the detach delay", nil)
	if _, err := p.DetachVolume(ctx, detachReq(inst.ID, vol)); !pluginapi.IsNotFound(err) {
		t.Errorf("DetachVolume once gone = %v, want NotFound", err)
	}
}

func TestDetachVolumeErrors(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	second := running(t, p, "c-2")
	vol := store.CreateVolume(fake.DefaultZone)
	if _, err := p.AttachVolume(ctx, attachReq(second.ID, vol)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *pluginapi.DetachVolumeRequest
		want func(error) bool
	}{
		{"unknown instance", detachReq("i-99999999", vol), pluginapi.IsNotFound},
		{"unknown disk", detachReq(inst.ID, "vol-99999999"), pluginapi.IsNotFound},
		{"a disk attached to another instance", detachReq(inst.ID, vol), pluginapi.IsNotFound},
		{"another driver", &pluginapi.DetachVolumeRequest{InstanceID: second.ID, Driver: "x", VolumeHandle: vol}, unsupported(pluginapi.FieldVolumeDriver)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.DetachVolume(ctx, tt.req); !tt.want(err) {
				t.Errorf("DetachVolume(%+v) = %v", tt.req, err)
			}
			if got := store.VolumeAttachments(); len(got) != 1 || got[0].InstanceID != second.ID {
				t.Errorf("a refused DetachVolume left attachments %+v, want %s still on %s", got, vol, second.ID)
			}
		})
	}
}

// A terminated instance's disks are detached with it, whichever way it
// ended, and can then be attached elsewhere.
func TestTerminationDetaches(t *testing.T) {
	tests := map[string]func(context.Context, *fake.Provider, string) error{
		"Terminate": func(ctx context.Context, p *fake.Provider, id string) error {
			_, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
			return err
		},
		"the cloud": func(_ context.Context, p *fake.Provider, id string) error {
			return p.Store().SetState(id, pluginapi.StateTerminated, "reclaimed")
		},
	}
	for name, end := range tests {
		t.Run(name, func(t *testing.T) {
			store := fake.NewStore()
			p := configured(t, "cl", fake.WithStore(store), fake.WithAttachDelay(time.Hour))
			ctx := t.Context()
			inst := running(t, p, "c-1")
			vol := store.CreateVolume(fake.DefaultZone)
			if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); err != nil {
				t.Fatal(err)
			}
			if err := end(ctx, p, inst.ID); err != nil {
				t.Fatal(err)
			}
			if got := store.VolumeAttachments(); len(got) != 0 {
				t.Errorf("after the instance ended the store has attachments %+v, want none", got)
			}
			if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); !pluginapi.IsNotFound(err) {
				t.Errorf("attaching to the ended instance = %v, want NotFound", err)
			}
			next := running(t, p, "c-2")
			if _, err := p.AttachVolume(ctx, attachReq(next.ID, vol)); err != nil {
				t.Errorf("attaching the freed disk to another instance = %v, want success", err)
			}
		})
	}
}

func TestDescribeVolumeAttachmentsSeesOnlyItsCluster(t *testing.T) {
	store := fake.NewStore()
	a := configured(t, "cl-a", fake.WithStore(store))
	b := configured(t, "cl-b", fake.WithStore(store))
	ctx := t.Context()
	inst := running(t, a, "c-1")
	vol := store.CreateVolume(fake.DefaultZone)
	if _, err := a.AttachVolume(ctx, attachReq(inst.ID, vol)); err != nil {
		t.Fatal(err)
	}
	resp, err := b.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{inst.ID}})
	if err != nil || len(resp.Attachments) != 0 {
		t.Errorf("another cluster's DescribeVolumeAttachments = %+v, %v; want none", resp, err)
	}
}

func TestDeleteVolume(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	vol := store.CreateVolume(fake.DefaultZone)
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteVolume(vol); !conflict(pluginapi.ConflictInUse, vol, inst.ID)(err) {
		t.Errorf("deleting an attached disk = %v, want VolumeConflict in-use", err)
	}
	if _, err := p.DetachVolume(ctx, detachReq(inst.ID, vol)); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteVolume(vol); err != nil {
		t.Errorf("deleting a detached disk = %v", err)
	}
	if err := store.DeleteVolume(vol); !pluginapi.IsNotFound(err) {
		t.Errorf("deleting it again = %v, want NotFound", err)
	}
	if got := store.Volumes(); len(got) != 0 {
		t.Errorf("Volumes() = %q after the delete, want none", got)
	}
}

func TestVolumeCallsWithoutTheCapability(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store), fake.WithCapabilities(pluginapi.CapabilityWatchEvents))
	ctx := t.Context()
	inst := running(t, p, "c-1")
	vol := store.CreateVolume(fake.DefaultZone)
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); !unsupported("")(err) {
		t.Errorf("AttachVolume without the capability = %v, want Unsupported for the whole call", err)
	}
	if _, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{inst.ID}}); !unsupported("")(err) {
		t.Errorf("DescribeVolumeAttachments without the capability = %v, want Unsupported", err)
	}
}

// The disks and attachments survive a restart of the plugin process.
func TestVolumesSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	ctx := t.Context()
	p := configured(t, "cl", fake.WithStateFile(path))
	inst := running(t, p, "c-1")
	vol := p.Store().CreateVolume(fake.DefaultZone)
	spare := p.Store().CreateVolume("fake-b")
	if _, err := p.AttachVolume(ctx, attachReq(inst.ID, vol)); err != nil {
		t.Fatal(err)
	}
	restarted := configured(t, "cl", fake.WithStateFile(path))
	resp, err := restarted.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{inst.ID}})
	if err != nil || len(resp.Attachments) != 1 || resp.Attachments[0].VolumeHandle != vol || resp.Attachments[0].State != pluginapi.AttachmentAttached {
		t.Errorf("after restart DescribeVolumeAttachments = %+v, %v; want %s attached", resp, err, vol)
	}
	if got := restarted.Store().Volumes(); !reflect.DeepEqual(got, []string{vol, spare}) {
		t.Errorf("after restart Volumes() = %q, want %q", got, []string{vol, spare})
	}
	if fresh := restarted.Store().CreateVolume(fake.DefaultZone); fresh == vol || fresh == spare {
		t.Errorf("a disk created after restart got the old handle %s", fresh)
	}
}
