package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/pluginapi"
)

// needLoops skips a test where loop devices cannot be bound.
func needLoops(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("binding loop devices needs root")
	}
	if _, err := os.Stat(loopControl); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
}

// disk creates a disk of 16 MiB in zone in the environment's state
// directory. When the test ends, every loop device still bound to a disk
// of the state directory (where p's commands run) is unbound, and the
// test fails for each one that stays bound.
func (e *testEnv) disk(p *provider, zone string) string {
	e.t.Helper()
	handle := "disk-" + randHex(8)
	if err := CreateVolume(e.t.Context(), e.stateDir(), handle, zone, 16<<20); err != nil {
		e.t.Fatal(err)
	}
	m, dir := p.cfg.Load().machine, resolved(volumesDir(e.stateDir()))+"/"
	e.t.Cleanup(func() {
		var left []string
		m.run(func() {
			bound, err := boundLoops()
			if err != nil {
				e.t.Errorf("cleanup: %v", err)
			}
			for backing, device := range bound {
				if strings.HasPrefix(backing, dir) && strings.HasPrefix(filepath.Base(backing), handle+".") {
					if err := unbindLoopHere(device, backing); err != nil {
						e.t.Errorf("cleanup: %v", err)
					}
					left = append(left, device)
				}
			}
		})
		for _, device := range left {
			m.run(func() {
				if b, _ := backingFile(filepath.Base(device)); b != "" {
					e.t.Errorf("cleanup: %s is still bound to %s", device, b)
				}
			})
		}
	})
	return handle
}

// loopsBackedBy returns the loop devices bound to the disk's file, as the
// kernel lists them.
func loopsBackedBy(t *testing.T, stateDir, handle string) []string {
	t.Helper()
	names, err := filepath.Glob("/sys/block/loop*")
	if err != nil {
		t.Fatal(err)
	}
	want := resolved(volumeImagePath(stateDir, handle))
	var out []string
	for _, n := range names {
		if b, _ := backingFile(filepath.Base(n)); b == want {
			out = append(out, "/dev/"+filepath.Base(n))
		}
	}
	return out
}

func attachReq(instance, handle string) *pluginapi.AttachVolumeRequest {
	return &pluginapi.AttachVolumeRequest{InstanceID: instance, Driver: VolumeDriver, VolumeHandle: handle}
}

func detachReq(instance, handle string) *pluginapi.DetachVolumeRequest {
	return &pluginapi.DetachVolumeRequest{InstanceID: instance, Driver: VolumeDriver, VolumeHandle: handle}
}

// attachments returns DescribeVolumeAttachments' answer for ids.
func attachments(t *testing.T, p *provider, ids ...string) []pluginapi.VolumeAttachment {
	t.Helper()
	resp, err := p.DescribeVolumeAttachments(t.Context(), &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: ids})
	if err != nil {
		t.Fatalf("DescribeVolumeAttachments: %v", err)
	}
	return resp.Attachments
}

var loopPath = regexp.MustCompile(`^/dev/loop[0-9]+$`)

// inCell returns device's path as the agent of cellID sees it (through
// /proc/<pid>/root, in its mount namespace), and fails the test unless it
// is there the block device this process sees at device, or is a block
// device at all when it is another mount namespace's.
func (e *testEnv) inCell(cellID, device string) string {
	e.t.Helper()
	rep := e.report(cellID)
	inCell := "/proc/" + strconv.Itoa(rep.PID) + "/root" + device
	theirs, err := os.Stat(inCell)
	if err != nil {
		e.t.Fatalf("the cell's agent does not see %s: %v", device, err)
	}
	if theirs.Mode()&os.ModeDevice == 0 || theirs.Mode()&os.ModeCharDevice != 0 {
		e.t.Fatalf("%s in the cell is %v, want a block device", device, theirs.Mode())
	}
	if own, _ := os.Readlink("/proc/self/ns/mnt"); rep.Mountns != own {
		return inCell
	}
	ours, err := os.Stat(device)
	if err != nil {
		e.t.Fatal(err)
	}
	if t, o := theirs.Sys().(*syscall.Stat_t).Rdev, ours.Sys().(*syscall.Stat_t).Rdev; t != o {
		e.t.Errorf("%s in the cell is device %d, want %d", device, t, o)
	}
	return inCell
}

// writeAt writes data at off of the block device path and syncs it.
func writeAt(path string, off int64, data []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readAt reads n bytes at off of path.
func readAt(path string, off int64, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	return b, err
}

// A disk attached to a running cell is a loop device bound to its file,
// which the cell's agent sees at the answered path; what is written
// through it is in the disk. A restarted plugin knows the attachment
// (Describe, an idempotent Attach with the same device, never a second
// device) and detaches it: the loop device is unbound. Attached again,
// the disk still holds its data.
func TestAttachVolume(t *testing.T) {
	t.Parallel()
	needLoops(t)
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-v1")
	handle := e.disk(p, "local")

	resp, err := p.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil {
		t.Fatalf("AttachVolume: %v", err)
	}
	a := resp.Attachment
	if a.InstanceID != inst.ID || a.VolumeHandle != handle || a.Driver != VolumeDriver || a.State != pluginapi.AttachmentAttached ||
		a.ReadOnly || a.Device.Serial != "" || !loopPath.MatchString(a.Device.Path) {
		t.Fatalf("AttachVolume answered %+v; want %s attached to %s as /dev/loopN", a, handle, inst.ID)
	}
	if got := loopsBackedBy(t, e.stateDir(), handle); len(got) != 1 || got[0] != a.Device.Path {
		t.Fatalf("loop devices bound to the disk: %q, want %s", got, a.Device.Path)
	}

	// The agent sees the device at that path, in its mount namespace.
	inCell := e.inCell(inst.CellID, a.Device.Path)

	// Written through the cell's device, read back through it and from
	// the disk's file.
	data := []byte("written through " + a.Device.Path + " by " + t.Name())
	if err := writeAt(inCell, 1<<20, data); err != nil {
		t.Fatalf("writing through the device: %v", err)
	}
	if got, err := readAt(inCell, 1<<20, len(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back through the device %q, %v; want %q", got, err, data)
	}
	if got, err := readAt(volumeImagePath(e.stateDir(), handle), 1<<20, len(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read from the disk's file %q, %v; want %q", got, err, data)
	}

	// A restarted plugin knows the attachment, attaches nothing twice,
	// and detaches it.
	restartedPluginDetaches(t, e, p, a)

	// Attached again, it holds what was written.
	resp, err = p.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil {
		t.Fatalf("attaching again: %v", err)
	}
	if got, err := readAt(resp.Attachment.Device.Path, 1<<20, len(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read through the disk attached again %q, %v; want %q", got, err, data)
	}
}

// restartedPluginDetaches checks that a plugin process started after p
// knows attachment a (DescribeVolumeAttachments, AttachVolume answering
// it again, one loop device), then detaches it through that process: the
// loop device is unbound, no call shows the attachment and DetachVolume
// answers NotFound.
func restartedPluginDetaches(t *testing.T, e *testEnv, p *provider, a pluginapi.VolumeAttachment) {
	t.Helper()
	instance, handle := a.InstanceID, a.VolumeHandle
	q := e.provider()
	if got := attachments(t, q, instance, "local-00000000dead"); len(got) != 1 || got[0] != a {
		t.Errorf("after a restart, DescribeVolumeAttachments = %+v, want [%+v]", got, a)
	}
	for _, c := range []*provider{p, q} {
		again, err := c.AttachVolume(t.Context(), attachReq(instance, handle))
		if err != nil || again.Attachment != a {
			t.Errorf("AttachVolume again = %+v, %v; want %+v", again, err, a)
		}
	}
	if got := loopsBackedBy(t, e.stateDir(), handle); len(got) != 1 {
		t.Errorf("loop devices bound to the disk after attaching again: %q, want one", got)
	}

	// The restarted plugin detaches it.
	if _, err := q.DetachVolume(t.Context(), detachReq(instance, handle)); err != nil {
		t.Fatalf("DetachVolume: %v", err)
	}
	if got := loopsBackedBy(t, e.stateDir(), handle); len(got) != 0 {
		t.Errorf("loop devices bound to the detached disk: %q", got)
	}
	if b, err := backingFile(filepath.Base(a.Device.Path)); err != nil || b != "" {
		t.Errorf("%s is still bound to %q (%v)", a.Device.Path, b, err)
	}
	if got := attachments(t, p, instance); len(got) != 0 {
		t.Errorf("after DetachVolume, DescribeVolumeAttachments = %+v, want none", got)
	}
	if v, err := readVolume(e.stateDir(), handle); err != nil || v.Attachment != nil {
		t.Errorf("the detached disk's record: %+v, %v; want no attachment", v, err)
	}
	for _, c := range []*provider{p, q} {
		if _, err := c.DetachVolume(t.Context(), detachReq(instance, handle)); !pluginapi.IsNotFound(err) {
			t.Errorf("DetachVolume of a detached disk = %v, want NotFound", err)
		}
	}
}

// AttachVolume refuses, attaching nothing: a disk attached to another
// cell (in-use, naming it), one of another zone (wrong-zone), one past
// the cell's attachmentLimit, an unknown disk or instance, another
// driver. A read-only attachment takes no writes.
func TestAttachVolumeRefuses(t *testing.T) {
	t.Parallel()
	needLoops(t)
	e := newTestEnv(t)
	e.config["attachmentLimit"] = 1
	p := e.provider()
	a := e.launch(p, "cell-v2")
	b := e.launch(p, "cell-v3")
	d1, d2, far := e.disk(p, "local"), e.disk(p, "local"), e.disk(p, "elsewhere")
	first, err := p.AttachVolume(t.Context(), attachReq(a.ID, d1))
	if err != nil {
		t.Fatal(err)
	}

	conflict := func(reason pluginapi.VolumeConflictReason, other string) func(error) error {
		return func(err error) error {
			var c *pluginapi.VolumeConflictError
			if !errors.As(err, &c) || c.Reason != reason || c.InstanceID != other {
				return fmt.Errorf("got %w, want VolumeConflict %s naming instance %q", err, reason, other)
			}
			return nil
		}
	}
	notFound := func(err error) error {
		if !pluginapi.IsNotFound(err) {
			return fmt.Errorf("got %w, want NotFound", err)
		}
		return nil
	}
	tests := []struct {
		name string
		req  *pluginapi.AttachVolumeRequest
		want func(error) error
	}{
		{"attached to another cell", attachReq(b.ID, d1), conflict(pluginapi.ConflictInUse, a.ID)},
		{"another zone", attachReq(a.ID, far), conflict(pluginapi.ConflictWrongZone, "")},
		{"past the limit", attachReq(a.ID, d2), conflict(pluginapi.ConflictAttachmentLimit, "")},
		{"unknown disk", attachReq(a.ID, "disk-none"), notFound},
		{"not a handle", attachReq(a.ID, "../cells"), notFound},
		{"unknown instance", attachReq("local-00000000dead", d2), notFound},
		{"another driver", &pluginapi.AttachVolumeRequest{InstanceID: a.ID, Driver: "ebs.csi.aws.com", VolumeHandle: d2}, func(err error) error {
			var u *pluginapi.UnsupportedError
			if !errors.As(err, &u) || u.Field != pluginapi.FieldVolumeDriver {
				return fmt.Errorf("got %w, want Unsupported naming %s", err, pluginapi.FieldVolumeDriver)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.AttachVolume(t.Context(), tt.req)
			if err := tt.want(err); err != nil {
				t.Error(err)
			}
		})
	}
	for _, h := range []string{d2, far} {
		if got := loopsBackedBy(t, e.stateDir(), h); len(got) != 0 {
			t.Errorf("refused attaches bound %s to %q", h, got)
		}
	}
	if got := attachments(t, p, a.ID, b.ID); len(got) != 1 || got[0] != first.Attachment {
		t.Errorf("after the refusals, DescribeVolumeAttachments = %+v, want only %+v", got, first.Attachment)
	}

	// Read-only: the device takes no writes.
	req := attachReq(b.ID, d2)
	req.ReadOnly = true
	ro, err := p.AttachVolume(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !ro.Attachment.ReadOnly {
		t.Errorf("read-only AttachVolume answered %+v", ro.Attachment)
	}
	if err := writeAt(ro.Attachment.Device.Path, 0, []byte("x")); err == nil {
		t.Errorf("writing to the read-only device %s succeeded", ro.Attachment.Device.Path)
	}
}

// Terminate detaches the cell's disks, as EC2 detaches a terminated
// instance's volumes; so does the end of a cell whose agent kept exiting.
func TestEndOfACellDetachesItsDisks(t *testing.T) {
	t.Parallel()
	needLoops(t)
	tests := []struct {
		name string
		exit bool // the agent exits at once, until the cell is given up
		end  func(t *testing.T, p *provider, inst pluginapi.Instance)
	}{
		{"terminated", false, func(t *testing.T, p *provider, inst pluginapi.Instance) {
			if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
				t.Fatal(err)
			}
		}},
		{"given up", true, func(t *testing.T, p *provider, inst pluginapi.Instance) {
			eventually(t, 60*time.Second, func() error {
				// Terminated once given up, ended once its record is gone.
				if got, ok := describe(t, p, inst.ID); !ok || got.State != pluginapi.StateTerminated {
					return fmt.Errorf("cell is %s (%s)", got.State, got.StateReason)
				}
				switch _, err := readRecord(p.cfg.Load().stateDir, inst.CellID); {
				case err == nil:
					return errors.New("the cell given up still has its record")
				case !errors.Is(err, os.ErrNotExist):
					return err
				}
				return nil
			})
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			if tt.exit {
				e.config["agentCommand"] = []string{os.Args[0], testAgentArg, "{bootstrap}", "exit"}
			}
			p := e.provider()
			inst := e.launch(p, "cell-e"+strconv.Itoa(i))
			handles := []string{e.disk(p, "local"), e.disk(p, "local")}
			for _, h := range handles {
				if _, err := p.AttachVolume(t.Context(), attachReq(inst.ID, h)); err != nil {
					t.Fatal(err)
				}
			}
			tt.end(t, p, inst)
			for _, h := range handles {
				if got := loopsBackedBy(t, e.stateDir(), h); len(got) != 0 {
					t.Errorf("disk %s is still bound to %q", h, got)
				}
				if err := DeleteVolume(t.Context(), e.stateDir(), h); err != nil {
					t.Errorf("deleting disk %s of the ended cell: %v", h, err)
				}
			}
			if got := attachments(t, p, inst.ID); len(got) != 0 {
				t.Errorf("the ended cell has attachments %+v", got)
			}
		})
	}
}

// Detached while its device is open (mounted, in real life), a disk is
// detaching until the device is closed, when the kernel unbinds it:
// DetachVolume succeeds again meanwhile, AttachVolume to the same cell is
// Transient and DeleteVolume waits. Then it is gone.
func TestDetachWhileOpenIsDetaching(t *testing.T) {
	t.Parallel()
	needLoops(t)
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-v4")
	handle := e.disk(p, "local")
	resp, err := p.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil {
		t.Fatal(err)
	}
	device := resp.Attachment.Device.Path
	fd, err := unix.Open(device, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			unix.Close(fd)
		}
	})

	for range 2 {
		if _, err := p.DetachVolume(t.Context(), detachReq(inst.ID, handle)); err != nil {
			t.Fatalf("DetachVolume of a disk whose device is open: %v, want success (detaching)", err)
		}
	}
	want := resp.Attachment
	want.State = pluginapi.AttachmentDetaching
	if got := attachments(t, p, inst.ID); len(got) != 1 || got[0] != want {
		t.Errorf("DescribeVolumeAttachments = %+v, want [%+v]", got, want)
	}
	if _, err := p.AttachVolume(t.Context(), attachReq(inst.ID, handle)); !pluginapi.IsTransient(err) {
		t.Errorf("AttachVolume of a detaching disk = %v, want Transient", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := DeleteVolume(ctx, e.stateDir(), handle); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeleteVolume of a detaching disk = %v, want it to wait until its context ends", err)
	}

	unix.Close(fd)
	closed = true
	eventually(t, 10*time.Second, func() error {
		if got := attachments(t, p, inst.ID); len(got) != 0 {
			return fmt.Errorf("after the device was closed, DescribeVolumeAttachments = %+v, want none", got)
		}
		return nil
	})
	if _, err := p.DetachVolume(t.Context(), detachReq(inst.ID, handle)); !pluginapi.IsNotFound(err) {
		t.Errorf("DetachVolume once the kernel unbound the device = %v, want NotFound", err)
	}
	if err := DeleteVolume(t.Context(), e.stateDir(), handle); err != nil {
		t.Errorf("DeleteVolume once detached: %v", err)
	}
}

// A plugin killed after it bound a loop device, before it recorded it,
// left an attaching record and a bound device: the next plugin shows it
// attached and adopts it, never binding a second. A record whose device
// vanished (a machine restart) is no attachment, and the disk attaches
// afresh.
func TestInterruptedAndVanishedAttachments(t *testing.T) {
	t.Parallel()
	needLoops(t)
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-v5")
	handle := e.disk(p, "local")
	cfg := p.cfg.Load()

	// Killed after the bind.
	v, err := readVolume(e.stateDir(), handle)
	if err != nil {
		t.Fatal(err)
	}
	v.Attachment = &volumeAttachment{InstanceID: inst.ID, CellID: inst.CellID, State: pluginapi.AttachmentAttaching, Since: time.Now().UTC()}
	if err := writeVolume(e.stateDir(), v); err != nil {
		t.Fatal(err)
	}
	device, err := bindLoop(cfg.machine, volumeImagePath(e.stateDir(), handle), false)
	if err != nil {
		t.Fatal(err)
	}
	q := e.provider()
	want := pluginapi.VolumeAttachment{InstanceID: inst.ID, Driver: VolumeDriver, VolumeHandle: handle, State: pluginapi.AttachmentAttached, Device: pluginapi.VolumeDevice{Path: device}}
	if got := attachments(t, q, inst.ID); len(got) != 1 || got[0] != want {
		t.Errorf("DescribeVolumeAttachments of an interrupted attach = %+v, want [%+v]", got, want)
	}
	resp, err := q.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil || resp.Attachment != want {
		t.Errorf("AttachVolume after an interrupted attach = %+v, %v; want %+v", resp, err, want)
	}
	if got := loopsBackedBy(t, e.stateDir(), handle); len(got) != 1 {
		t.Errorf("loop devices bound to the disk: %q, want one", got)
	}

	// The device vanishes behind the plugin's back.
	cfg.machine.run(func() { err = unbindLoopHere(device, volumeImagePath(e.stateDir(), handle)) })
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if got := attachments(t, q, inst.ID); len(got) != 0 {
			return fmt.Errorf("DescribeVolumeAttachments of a vanished device = %+v, want none", got)
		}
		return nil
	})
	resp, err = q.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil || resp.Attachment.State != pluginapi.AttachmentAttached {
		t.Fatalf("AttachVolume after the device vanished = %+v, %v; want attached", resp, err)
	}
	if got := loopsBackedBy(t, e.stateDir(), handle); len(got) != 1 || got[0] != resp.Attachment.Device.Path {
		t.Errorf("loop devices bound to the disk: %q, want %s", got, resp.Attachment.Device.Path)
	}
}

// With mountNamespace, the loop device is bound there and its node is made
// in that namespace's /dev when it is no devtmpfs (here a tmpfs with only
// null and loop-control), where the cell's agent finds it.
func TestAttachVolumeInTheMountNamespace(t *testing.T) {
	t.Parallel()
	needLoops(t)
	e := newTestEnv(t)
	ns := otherMountNamespace(t)
	inMountNamespace(t, ns, "mount", "-t", "tmpfs", "-o", "mode=755", "kip-test-dev", "/dev")
	inMountNamespace(t, ns, "mknod", "-m", "666", "/dev/null", "c", "1", "3")
	inMountNamespace(t, ns, "mknod", "-m", "600", loopControl, "c", "10", "237")
	e.config["mountNamespace"] = ns
	p := e.provider()
	inst := e.launch(p, "cell-v6")
	handle := e.disk(p, "local")
	resp, err := p.AttachVolume(t.Context(), attachReq(inst.ID, handle))
	if err != nil {
		t.Fatalf("AttachVolume: %v", err)
	}
	inCell := e.inCell(inst.CellID, resp.Attachment.Device.Path)
	data := []byte("through the mount namespace")
	if err := writeAt(inCell, 4096, data); err != nil {
		t.Fatal(err)
	}
	if got, err := readAt(volumeImagePath(e.stateDir(), handle), 4096, len(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read from the disk's file %q, %v; want %q", got, err, data)
	}
	if got := attachments(t, p, inst.ID); len(got) != 1 || got[0] != resp.Attachment {
		t.Errorf("DescribeVolumeAttachments = %+v, want [%+v]", got, resp.Attachment)
	}
	if _, err := p.DetachVolume(t.Context(), detachReq(inst.ID, handle)); err != nil {
		t.Fatal(err)
	}
	if got := attachments(t, p, inst.ID); len(got) != 0 {
		t.Errorf("after DetachVolume, DescribeVolumeAttachments = %+v", got)
	}
}
