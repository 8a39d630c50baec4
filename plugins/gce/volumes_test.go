package gce

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"

	"github.com/kipcell/kip/pluginapi"
)

func TestParseHandle(t *testing.T) {
	for _, tc := range []struct {
		handle string
		want   diskRef
		kind   func(error) bool
	}{
		{handle: "projects/p/zones/us-central1-a/disks/pvc-1", want: diskRef{"p", "us-central1-a", "pvc-1"}},
		{handle: "projects/p/regions/us-central1/disks/pvc-1", kind: pluginapi.IsUnsupported},
		{handle: "pvc-1", kind: pluginapi.IsNotFound},
		{handle: "zones/us-central1-a/disks/pvc-1", kind: pluginapi.IsNotFound},
		{handle: "projects/p/zones/us-central1-a/disks/pvc-1/extra", kind: pluginapi.IsNotFound},
	} {
		got, err := parseHandle(tc.handle)
		switch {
		case tc.kind == nil && err != nil:
			t.Errorf("parseHandle(%q): %v", tc.handle, err)
		case tc.kind != nil && !tc.kind(err):
			t.Errorf("parseHandle(%q) = %v, %v; want an error of its kind", tc.handle, got, err)
		case got != tc.want:
			t.Errorf("parseHandle(%q) = %+v; want %+v", tc.handle, got, tc.want)
		}
		if tc.kind == nil && got.handle() != tc.handle {
			t.Errorf("handle() of %q = %q", tc.handle, got.handle())
		}
	}
	if got, ok := diskOfSource("https://www.googleapis.com/compute/v1/projects/p/zones/z/disks/d"); !ok || got != (diskRef{"p", "z", "d"}) {
		t.Errorf("diskOfSource of a full URL = %+v, %v", got, ok)
	}
}

// Compute Engine's refusals of an attach, as HTTP errors and as failed
// operations, and the contract's kinds they are.
func TestAttachErrorKinds(t *testing.T) {
	req := &pluginapi.AttachVolumeRequest{InstanceID: "us-central1-a/cell-1", Driver: VolumeDriver, VolumeHandle: "projects/p/zones/us-central1-a/disks/d"}
	inUseBy := func(instance string) string {
		return "The disk resource 'projects/p/zones/us-central1-a/disks/d' is already being used by 'projects/p/zones/us-central1-a/instances/" + instance + "'"
	}
	httpErr := func(code int, reason, msg string) error {
		return &googleapi.Error{Code: code, Message: msg, Errors: []googleapi.ErrorItem{{Reason: reason, Message: msg}}}
	}
	conflict := func(reason pluginapi.VolumeConflictReason, other string) func(error) string {
		return func(err error) string {
			var c *pluginapi.VolumeConflictError
			if !errors.As(err, &c) || c.Reason != reason || c.InstanceID != other {
				return "want VolumeConflict " + string(reason) + " naming " + other
			}
			return ""
		}
	}
	kind := func(is func(error) bool, name string) func(error) string {
		return func(err error) string {
			if !is(err) {
				return "want " + name
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name      string
		err       error
		attaching bool // the disk is attaching to this very instance
		check     func(error) string
	}{
		{"in use elsewhere (operation)", &operationError{op: "instances.attachDisk", code: codeInUse, message: inUseBy("cell-2")}, false,
			conflict(pluginapi.ConflictInUse, "us-central1-a/cell-2")},
		{"in use elsewhere (HTTP)", httpErr(400, reasonInUse, inUseBy("cell-2")), false, conflict(pluginapi.ConflictInUse, "us-central1-a/cell-2")},
		{"in use by itself", &operationError{code: codeInUse, message: inUseBy("cell-1")}, true, nil},
		{"device name taken on itself", httpErr(400, "invalid", "Invalid value for field 'resource.deviceName': 'd'. Device name 'd' is already in use on instance 'cell-1'."), true, nil},
		{"attachment limit", &operationError{code: codeLimit, message: "Exceeded limit 'maximum_persistent_disks' on resource 'cell-1'. Limit: 16.0"}, false,
			conflict(pluginapi.ConflictAttachmentLimit, "")},
		{"a disk type the machine type cannot take", &operationError{code: codeUnsupported, message: "[pd-standard] features are not compatible for creating instance."}, false,
			func(err error) string {
				var c *pluginapi.VolumeConflictError
				if !errors.As(err, &c) || c.Reason != pluginapi.ConflictWrongType || c.DiskType != "pd-standard" {
					return "want VolumeConflict wrong-type naming pd-standard"
				}
				return ""
			}},
		{"another unsupported operation", &operationError{code: codeUnsupported, message: "Maximum hyperdisk-balanced disks count should be less than or equal to [16], Requested : [17]"}, false,
			func(err error) string {
				var c *pluginapi.VolumeConflictError
				if errors.As(err, &c) && c.Reason == pluginapi.ConflictWrongType {
					return "want no wrong-type: the message names no disk type"
				}
				return ""
			}},
		{"another zone", httpErr(400, "invalid", "Invalid value for field 'resource.source': 'x'. Disk must be in the same zone as the instance ('us-central1-a')."), false,
			conflict(pluginapi.ConflictWrongZone, "")},
		{"disk not ready", httpErr(400, reasonNotReady, "The resource 'projects/p/zones/us-central1-a/disks/d' is not ready"), false, kind(pluginapi.IsTransient, "Transient")},
		{"no such disk", httpErr(404, "notFound", "The resource 'projects/p/zones/us-central1-a/disks/d' was not found"), false, kind(pluginapi.IsNotFound, "NotFound")},
		{"throttled", httpErr(403, "rateLimitExceeded", "Quota exceeded"), false, kind(pluginapi.IsThrottled, "Throttled")},
	} {
		if got := attachingAlready(tc.err, req.InstanceID); got != tc.attaching {
			t.Errorf("%s: attachingAlready = %v; want %v", tc.name, got, tc.attaching)
		}
		if tc.check == nil {
			continue
		}
		if why := tc.check(attachError(tc.err, req)); why != "" {
			t.Errorf("%s: attachError = %v; %s", tc.name, attachError(tc.err, req), why)
		}
	}
}

// An attach whose operation runs past volumeOpWait is answered attaching
// and shown attaching until the instance shows the disk; a detach likewise
// detaching, and a second DetachVolume meanwhile calls nothing.
func TestVolumeOperationsUnderWay(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f), func(p *provider) { p.volumeOpWait = 50 * time.Millisecond })
	inst, err := p.Launch(ctx, launchRequest("kip-vol"))
	if err != nil {
		t.Fatal(err)
	}
	id := inst.Instance.ID
	handle := f.addDisk("us-central1-a", "data")
	describe := func() []pluginapi.VolumeAttachment {
		t.Helper()
		resp, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{id}})
		if err != nil {
			t.Fatalf("DescribeVolumeAttachments: %v", err)
		}
		return resp.Attachments
	}
	want := func(state pluginapi.AttachmentState) []pluginapi.VolumeAttachment {
		return []pluginapi.VolumeAttachment{{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle, State: state,
			ReadOnly: true, Device: pluginapi.VolumeDevice{Path: "/dev/disk/by-id/google-data"}}}
	}
	hold := func(on bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.holdOps = on
	}

	hold(true)
	resp, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle, ReadOnly: true})
	if err != nil {
		t.Fatalf("AttachVolume: %v", err)
	}
	if diff := cmp.Diff(want(pluginapi.AttachmentAttaching)[0], resp.Attachment); diff != "" {
		t.Errorf("AttachVolume under way (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want(pluginapi.AttachmentAttaching), describe()); diff != "" {
		t.Errorf("described while the attach runs (-want +got):\n%s", diff)
	}
	attaches := f.callCount("instances.attachDisk")
	if _, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle, ReadOnly: true}); err != nil {
		t.Fatalf("AttachVolume again: %v", err)
	}
	if got := f.callCount("instances.attachDisk"); got != attaches {
		t.Errorf("AttachVolume again called attachDisk (%d calls, was %d); the attach under way is answered", got, attaches)
	}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle}); !pluginapi.IsTransient(err) {
		t.Errorf("DetachVolume while attaching: %v; want Transient", err)
	}
	// A restarted plugin knows nothing of the attach: Compute Engine's
	// refusal of a second one says it is under way.
	restarted := configured(t, testConfig(f), func(p *provider) { p.volumeOpWait = 50 * time.Millisecond })
	resp, err = restarted.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle, ReadOnly: true})
	if err != nil || resp.Attachment.State != pluginapi.AttachmentAttaching {
		t.Errorf("AttachVolume by a restarted plugin = %+v, %v; want attaching", resp, err)
	}
	if got, err := restarted.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{id}}); err != nil ||
		!cmp.Equal(got.Attachments, want(pluginapi.AttachmentAttaching)) {
		t.Errorf("described by the restarted plugin: %+v, %v; want it attaching", got, err)
	}
	hold(false)
	describe() // lists the operation, which ends it
	if diff := cmp.Diff(want(pluginapi.AttachmentAttached), describe()); diff != "" {
		t.Errorf("described once attached (-want +got):\n%s", diff)
	}

	hold(true)
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle}); err != nil {
		t.Fatalf("DetachVolume: %v", err)
	}
	if diff := cmp.Diff(want(pluginapi.AttachmentDetaching), describe()); diff != "" {
		t.Errorf("described while the detach runs (-want +got):\n%s", diff)
	}
	detaches := f.callCount("instances.detachDisk")
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle}); err != nil {
		t.Errorf("DetachVolume again while detaching: %v; want success", err)
	}
	if got := f.callCount("instances.detachDisk"); got != detaches {
		t.Errorf("DetachVolume again called detachDisk (%d calls, was %d)", got, detaches)
	}
	if _, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle}); !pluginapi.IsTransient(err) {
		t.Errorf("AttachVolume while detaching: %v; want Transient", err)
	}
	hold(false)
	describe()
	if got := describe(); len(got) != 0 {
		t.Errorf("described once detached: %+v; want none", got)
	}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: handle}); !pluginapi.IsNotFound(err) {
		t.Errorf("DetachVolume once detached: %v; want NotFound", err)
	}
}

// A regional disk is not attached; the drivers are the PD CSI driver's.
func TestVolumeRefusals(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f))
	info, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil || !info.Has(pluginapi.CapabilityVolumes) || !cmp.Equal(info.VolumeDrivers, []string{"pd.csi.storage.gke.io"}) {
		t.Errorf("GetInfo = %v, %v; want capability volumes with driver pd.csi.storage.gke.io", info, err)
	}
	inst, err := p.Launch(ctx, launchRequest("kip-vol"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: inst.Instance.ID, Driver: VolumeDriver, VolumeHandle: "projects/kip-test/regions/us-central1/disks/r"})
	if !pluginapi.IsUnsupported(err) {
		t.Errorf("attaching a regional disk: %v; want Unsupported", err)
	}
	_, err = p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: inst.Instance.ID, Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"})
	var u *pluginapi.UnsupportedError
	if !errors.As(err, &u) || u.Field != pluginapi.FieldVolumeDriver {
		t.Errorf("attaching an EBS volume: %v; want Unsupported naming %s", err, pluginapi.FieldVolumeDriver)
	}
}
