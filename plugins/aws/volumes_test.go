package aws

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// volumeFixture is a configured provider with a running instance in
// us-east-1a and an available volume there.
type volumeFixture struct {
	f        *fakeEC2
	p        *provider
	instance string
	volume   string
}

func newVolumeFixture(t *testing.T) *volumeFixture {
	t.Helper()
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	launched, err := p.Launch(t.Context(), launchRequest("cell-vol"))
	if err != nil {
		t.Fatal(err)
	}
	f.setState(launched.Instance.ID, "running", "")
	return &volumeFixture{f: f, p: p, instance: launched.Instance.ID, volume: f.addVolume("us-east-1a")}
}

func (x *volumeFixture) attach(t *testing.T, instance, volume string) (*pluginapi.AttachVolumeResponse, error) {
	return x.p.AttachVolume(t.Context(), &pluginapi.AttachVolumeRequest{InstanceID: instance, Driver: VolumeDriver, VolumeHandle: volume})
}

// The answer tells the agent the NVMe serial and the by-id path; a second
// AttachVolume describes, finds the attachment and answers it without
// asking EC2 to attach again (EC2 would refuse with VolumeInUse).
func TestAttachVolumeAnswersTheDeviceAndIsIdempotent(t *testing.T) {
	x := newVolumeFixture(t)
	first, err := x.attach(t, x.instance, x.volume)
	if err != nil {
		t.Fatal(err)
	}
	serial := "vol" + x.volume[len("vol-"):]
	want := pluginapi.VolumeAttachment{
		InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: x.volume, State: pluginapi.AttachmentAttaching,
		Device: pluginapi.VolumeDevice{Serial: serial, Path: "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + serial},
	}
	if diff := cmp.Diff(want, first.Attachment); diff != "" {
		t.Errorf("AttachVolume (-want +got):\n%s", diff)
	}
	if got := x.f.volume(x.volume).device; got != "/dev/xvdaa" {
		t.Errorf("attached at %s, want the first free name /dev/xvdaa", got)
	}
	again, err := x.attach(t, x.instance, x.volume)
	if err != nil {
		t.Fatal(err)
	}
	if again.Attachment.Device != first.Attachment.Device {
		t.Errorf("second AttachVolume answered %+v, first %+v", again.Attachment.Device, first.Attachment.Device)
	}
	if n := x.f.callCount("AttachVolume"); n != 1 {
		t.Errorf("EC2 AttachVolume called %d times, want once", n)
	}
}

// The device name: the first of the plugin's names free on the instance;
// after EC2 calls one in use, the next, and that one is kept for last.
func TestAttachVolumeDeviceNames(t *testing.T) {
	x := newVolumeFixture(t)
	root := x.f.addVolume("us-east-1a")
	x.f.attachRoot(x.instance, root)
	taken := x.f.addVolume("us-east-1a")
	if _, err := x.attach(t, x.instance, taken); err != nil {
		t.Fatal(err)
	}
	// As EC2 answers a name a detached volume left busy.
	x.f.failWith("AttachVolume", codeInvalidParameter, "Invalid value '/dev/xvdab' for unixDevice. Attachment point /dev/xvdab is already in use")
	if _, err := x.attach(t, x.instance, x.volume); err != nil {
		t.Fatalf("AttachVolume after one name in use: %v; want it to try another", err)
	}
	tried := []string{}
	for _, form := range x.f.requests("AttachVolume") {
		tried = append(tried, form.Get("Device"))
	}
	if diff := cmp.Diff([]string{"/dev/xvdaa", "/dev/xvdab", "/dev/xvdac"}, tried); diff != "" {
		t.Errorf("device names tried (-want +got):\n%s", diff)
	}
	if _, bad := x.p.cfg.Load().badDevices.Load("/dev/xvdab"); !bad {
		t.Errorf("/dev/xvdab, refused as in use, is not kept for last")
	}
	if got := x.p.cfg.Load().freeDevice(map[string]bool{"/dev/xvdaa": true}); got != "/dev/xvdac" {
		t.Errorf("next free name %s, want /dev/xvdac (skipping the one in use and the likely bad one)", got)
	}
	used := map[string]bool{}
	for _, n := range deviceNames {
		used[n] = true
	}
	delete(used, "/dev/xvdab")
	if got := x.p.cfg.Load().freeDevice(used); got != "/dev/xvdab" {
		t.Errorf("with only the likely bad name free: %q, want it as the last resort", got)
	}
	if len(deviceNames) != 76 || deviceNames[0] != "/dev/xvdaa" || deviceNames[75] != "/dev/xvddx" {
		t.Errorf("deviceNames: %d names from %s to %s; want 76, /dev/xvdaa to /dev/xvddx", len(deviceNames), deviceNames[0], deviceNames[len(deviceNames)-1])
	}
}

// The host attaches a pod's volumes in parallel: each gets its own name at
// the first try.
func TestParallelAttachesChooseDifferentNames(t *testing.T) {
	x := newVolumeFixture(t)
	vols := []string{x.volume}
	for range 4 {
		vols = append(vols, x.f.addVolume("us-east-1a"))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(vols))
	for i, v := range vols {
		wg.Go(func() { _, errs[i] = x.attach(t, x.instance, v) })
	}
	wg.Wait()
	devices := map[string]bool{}
	for i, v := range vols {
		if errs[i] != nil {
			t.Errorf("attaching %s: %v", v, errs[i])
		}
		devices[x.f.volume(v).device] = true
	}
	if len(devices) != len(vols) || x.f.callCount("AttachVolume") != len(vols) {
		t.Errorf("%d volumes at %d names with %d AttachVolume calls; want each at its own name at the first try", len(vols), len(devices), x.f.callCount("AttachVolume"))
	}
}

// EC2's refusals reach the host as the contract's kinds, and nothing stays
// attached.
func TestAttachVolumeErrors(t *testing.T) {
	conflict := func(reason pluginapi.VolumeConflictReason) func(error) bool {
		return func(err error) bool {
			var c *pluginapi.VolumeConflictError
			return errors.As(err, &c) && c.Reason == reason
		}
	}
	cases := []struct {
		code   string
		status int
		is     func(error) bool
	}{
		{codeVolumeInUse, 400, conflict(pluginapi.ConflictInUse)},
		{codeZoneMismatch, 400, conflict(pluginapi.ConflictWrongZone)},
		{codeAttachmentLimit, 400, conflict(pluginapi.ConflictAttachmentLimit)},
		{codeInstanceNotFound, 400, pluginapi.IsNotFound},
		{codeVolumeNotFound, 400, pluginapi.IsNotFound},
		{codeIncorrectState, 400, pluginapi.IsTransient},
		{codeRequestLimitExceeded, 503, pluginapi.IsThrottled},
		{"InternalError", 500, pluginapi.IsTransient},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			x := newVolumeFixture(t)
			x.f.fail("AttachVolume", c.code, c.status, 1)
			_, err := x.attach(t, x.instance, x.volume)
			if err == nil || !c.is(err) {
				t.Errorf("AttachVolume with %s injected = %v (%T)", c.code, err, errors.Unwrap(err))
			}
			if v := x.f.volume(x.volume); v.instance != "" {
				t.Errorf("the refused volume is attached to %s", v.instance)
			}
		})
	}
}

// What the fake itself refuses, as EC2 does: the volume attached to
// another instance (naming it), a volume of another zone, an unknown
// volume or instance, read-only, another driver.
func TestAttachVolumeRefusals(t *testing.T) {
	x := newVolumeFixture(t)
	other, err := x.p.Launch(t.Context(), launchRequest("cell-other"))
	if err != nil {
		t.Fatal(err)
	}
	x.f.setState(other.Instance.ID, "running", "")
	if _, err := x.attach(t, other.Instance.ID, x.volume); err != nil {
		t.Fatal(err)
	}
	elsewhere := x.f.addVolume("us-east-1b")
	var c *pluginapi.VolumeConflictError
	if _, err := x.attach(t, x.instance, x.volume); !errors.As(err, &c) || c.Reason != pluginapi.ConflictInUse || c.InstanceID != other.Instance.ID {
		t.Errorf("attaching a volume attached elsewhere: %v; want in-use naming %s", err, other.Instance.ID)
	}
	if _, err := x.attach(t, x.instance, elsewhere); !errors.As(err, &c) || c.Reason != pluginapi.ConflictWrongZone {
		t.Errorf("attaching a volume of another zone: %v; want wrong-zone", err)
	}
	if _, err := x.attach(t, x.instance, "vol-0000000000000dead"); !pluginapi.IsNotFound(err) {
		t.Errorf("attaching an unknown volume: %v; want NotFound", err)
	}
	if _, err := x.attach(t, "i-0000000000000dead", elsewhere); !pluginapi.IsNotFound(err) {
		t.Errorf("attaching to an unknown instance: %v; want NotFound", err)
	}
	var u *pluginapi.UnsupportedError
	_, err = x.p.AttachVolume(t.Context(), &pluginapi.AttachVolumeRequest{InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: elsewhere, ReadOnly: true})
	if !errors.As(err, &u) || u.Field != pluginapi.FieldReadOnly {
		t.Errorf("read-only: %v; want Unsupported naming %s", err, pluginapi.FieldReadOnly)
	}
	_, err = x.p.AttachVolume(t.Context(), &pluginapi.AttachVolumeRequest{InstanceID: x.instance, Driver: "pd.csi.storage.gke.io", VolumeHandle: elsewhere})
	if !errors.As(err, &u) || u.Field != pluginapi.FieldVolumeDriver {
		t.Errorf("another driver: %v; want Unsupported naming %s", err, pluginapi.FieldVolumeDriver)
	}
	if n := x.f.callCount("AttachVolume"); n != 3 {
		t.Errorf("EC2 AttachVolume called %d times; want 3 (the first attach, wrong zone, unknown instance)", n)
	}
}

// DetachVolume: success, again while detaching (without asking EC2), then
// NotFound; NotFound for a volume never attached there, and when EC2 says
// the volume is no longer attached.
func TestDetachVolume(t *testing.T) {
	x := newVolumeFixture(t)
	req := &pluginapi.DetachVolumeRequest{InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: x.volume}
	if _, err := x.p.DetachVolume(t.Context(), req); !pluginapi.IsNotFound(err) {
		t.Errorf("detaching a volume never attached: %v; want NotFound", err)
	}
	if _, err := x.attach(t, x.instance, x.volume); err != nil {
		t.Fatal(err)
	}
	if _, err := x.p.DetachVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := x.p.DetachVolume(t.Context(), req); err != nil {
		t.Errorf("detaching a detaching volume: %v; want success", err)
	}
	if n := x.f.callCount("DetachVolume"); n != 1 {
		t.Errorf("EC2 DetachVolume called %d times, want once", n)
	}
	x.f.settleVolumes()
	if _, err := x.p.DetachVolume(t.Context(), req); !pluginapi.IsNotFound(err) {
		t.Errorf("detaching a detached volume: %v; want NotFound", err)
	}

	other := x.f.addVolume("us-east-1a")
	if _, err := x.attach(t, x.instance, other); err != nil {
		t.Fatal(err)
	}
	x.f.fail("DetachVolume", codeIncorrectState, http.StatusBadRequest, 1)
	if _, err := x.p.DetachVolume(t.Context(), &pluginapi.DetachVolumeRequest{InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: other}); !pluginapi.IsNotFound(err) {
		t.Errorf("EC2 answering IncorrectState: %v; want NotFound", err)
	}
	if _, err := x.p.DetachVolume(t.Context(), &pluginapi.DetachVolumeRequest{InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: "vol-0000000000000dead"}); !pluginapi.IsNotFound(err) {
		t.Errorf("an unknown volume: %v; want NotFound", err)
	}
	root := x.f.addVolume("us-east-1a")
	x.f.attachRoot(x.instance, root)
	before := x.f.callCount("DetachVolume")
	_, err := x.p.DetachVolume(t.Context(), &pluginapi.DetachVolumeRequest{InstanceID: x.instance, Driver: VolumeDriver, VolumeHandle: root})
	if err == nil || pluginapi.IsNotFound(err) || x.f.callCount("DetachVolume") != before {
		t.Errorf("detaching the root volume: %v, DetachVolume calls %d; want a refusal without a call", err, x.f.callCount("DetachVolume")-before)
	}
}

// DescribeVolumeAttachments: the plugin's attachments of the named
// instances only (not the root volume, not another instance's), with
// their states, 200 instances a DescribeVolumes call.
func TestDescribeVolumeAttachments(t *testing.T) {
	x := newVolumeFixture(t)
	root := x.f.addVolume("us-east-1a")
	x.f.attachRoot(x.instance, root)
	other, err := x.p.Launch(t.Context(), launchRequest("cell-other"))
	if err != nil {
		t.Fatal(err)
	}
	x.f.setState(other.Instance.ID, "running", "")
	onOther := x.f.addVolume("us-east-1a")
	for _, a := range [][2]string{{x.instance, x.volume}, {other.Instance.ID, onOther}} {
		if _, err := x.attach(t, a[0], a[1]); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{x.instance}
	for i := range 250 {
		ids = append(ids, fmt.Sprintf("i-%017x", 0xdead0000+i))
	}
	before := x.f.callCount("DescribeVolumes")
	resp, err := x.p.DescribeVolumeAttachments(t.Context(), &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if n := x.f.callCount("DescribeVolumes") - before; n != 2 {
		t.Errorf("%d DescribeVolumes calls for 251 instances, want 2", n)
	}
	var got []string
	for _, a := range resp.Attachments {
		got = append(got, a.InstanceID+" "+a.VolumeHandle)
	}
	if diff := cmp.Diff([]string{x.instance + " " + x.volume}, got); diff != "" {
		t.Errorf("attachments (-want +got):\n%s", diff)
	}
	resp, err = x.p.DescribeVolumeAttachments(t.Context(), &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{x.instance}})
	if err != nil || len(resp.Attachments) != 1 || resp.Attachments[0].State != pluginapi.AttachmentAttached {
		t.Errorf("described again: %+v, %v; want the volume attached", resp, err)
	}
}

// An attachment AttachVolume answered stays in DescribeVolumeAttachments,
// attaching, until EC2 shows it or the consistency window passes; a
// detach forgets it.
func TestRecentAttachments(t *testing.T) {
	var r recentAttachments
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	a := pluginapi.VolumeAttachment{InstanceID: "i-1", Driver: VolumeDriver, VolumeHandle: "vol-1", State: pluginapi.AttachmentAttaching}
	b := pluginapi.VolumeAttachment{InstanceID: "i-2", Driver: VolumeDriver, VolumeHandle: "vol-2", State: pluginapi.AttachmentAttaching}
	r.add(a, t0)
	r.add(b, t0)
	wanted := map[string]bool{"i-1": true}
	if got := r.merge(nil, wanted, t0.Add(time.Second), 30*time.Second); len(got) != 1 || got[0] != a {
		t.Errorf("not shown by EC2 yet: %+v, want %+v", got, a)
	}
	attached := a
	attached.State = pluginapi.AttachmentAttached
	if got := r.merge([]pluginapi.VolumeAttachment{attached}, wanted, t0.Add(2*time.Second), 30*time.Second); len(got) != 1 || got[0] != attached {
		t.Errorf("shown by EC2: %+v, want EC2's alone", got)
	}
	if got := r.merge(nil, wanted, t0.Add(3*time.Second), 30*time.Second); len(got) != 0 {
		t.Errorf("once EC2 showed it, it is EC2's to report: %+v", got)
	}
	if got := r.merge(nil, map[string]bool{"i-2": true}, t0.Add(31*time.Second), 30*time.Second); len(got) != 0 {
		t.Errorf("after the window: %+v, want none", got)
	}
	r.add(a, t0)
	r.remove("i-1", "vol-1")
	if got := r.merge(nil, wanted, t0, 30*time.Second); len(got) != 0 {
		t.Errorf("after a detach: %+v, want none", got)
	}
}

// GetInfo reports the capability and the driver.
func TestGetInfoReportsVolumes(t *testing.T) {
	info, err := newProvider().GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Has(pluginapi.CapabilityVolumes) || !cmp.Equal(info.VolumeDrivers, []string{"ebs.csi.aws.com"}) {
		t.Errorf("capabilities %v, drivers %v; want %s and ebs.csi.aws.com", info.Capabilities, info.VolumeDrivers, pluginapi.CapabilityVolumes)
	}
}
