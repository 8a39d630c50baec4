package toy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The toy cloud's disks and the volume calls (pluginapi.VolumeAttacher).
//
// A disk is the file <dir>/disks/<handle>.json, its handle "vol-" and 16
// hex digits, as a PersistentVolume of driver VolumeDriver names it in
// spec.csi.volumeHandle. The file holds the disk's zone and its
// attachment, if any. The attachment's state follows from the clock, as
// an instance's does: attaching for attachDelay after AttachVolume, then
// attached; after DetachVolume detaching for detachDelay, then gone. An
// attachment to an instance that has been terminated is gone too: the
// cloud detaches a terminated instance's disks, as EC2 does.
//
// Every change to a disk reads the disks, decides and writes under one
// lock (an flock of <dir>/disks.lock), so that concurrent calls, from
// this process or another pointed at the same directory, never attach a
// disk twice or an instance past its attachmentLimit. A real cloud does
// that on its side; its plugin takes no lock.

// VolumeDriver is the CSI driver whose volumes the toy attaches: the only
// one in GetInfoResponse.VolumeDrivers.
const VolumeDriver = "toy.csi.example.com"

const (
	// attachDelay and detachDelay are how long an attachment is attaching
	// and detaching: the host must poll DescribeVolumeAttachments, as
	// with a real cloud.
	attachDelay = 500 * time.Millisecond
	detachDelay = 500 * time.Millisecond
	// attachmentLimit is how many disks one instance can have attached,
	// attaching or detaching.
	attachmentLimit = 4
)

var handlePattern = regexp.MustCompile(`^vol-[0-9a-f]{16}$`)

// disk is one disk of the toy cloud, the file <dir>/disks/<Handle>.json.
type disk struct {
	Handle string `json:"handle"`
	Zone   string `json:"zone"`
	// Attachment is nil while the disk is attached nowhere; a gone
	// attachment (see state) may stay until the next attach replaces it.
	Attachment *attachment `json:"attachment,omitempty"`
}

// attachment is a disk's attachment to one instance.
type attachment struct {
	InstanceID string    `json:"instanceID"`
	ReadOnly   bool      `json:"readOnly,omitempty"`
	AttachedAt time.Time `json:"attachedAt"`          // attaching until then
	DetachedAt time.Time `json:"detachedAt,omitzero"` // set by DetachVolume: detaching until then
}

// state is where a stays now; "" once it is gone.
func (a *attachment) state(now time.Time) pluginapi.AttachmentState {
	switch {
	case a == nil:
		return ""
	case a.DetachedAt.IsZero() && now.Before(a.AttachedAt):
		return pluginapi.AttachmentAttaching
	case a.DetachedAt.IsZero():
		return pluginapi.AttachmentAttached
	case now.Before(a.DetachedAt):
		return pluginapi.AttachmentDetaching
	}
	return ""
}

// CreateDisk makes a disk in zone, attached nowhere, in the toy cloud at
// dir, and returns its handle. It is the toy's stand-in for a cloud's
// CreateVolume (a CSI provisioner's job): the conformance test creates
// its disks with it. Only disks in the toy's zone, toy-1a, can be
// attached, since its instances all run there.
func CreateDisk(ctx context.Context, dir, zone string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if zone == "" {
		return "", errors.New("creating a disk: no zone")
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	d := disk{Handle: "vol-" + hex.EncodeToString(b[:]), Zone: zone}
	if err := os.MkdirAll(filepath.Join(dir, "disks"), 0o700); err != nil {
		return "", fmt.Errorf("creating disk %s: %w", d.Handle, err)
	}
	if err := writeDisk(dir, d); err != nil {
		return "", fmt.Errorf("creating disk %s: %w", d.Handle, err)
	}
	return d.Handle, nil
}

// DeleteDisk deletes a disk of the toy cloud at dir: NotFound if it does
// not exist, VolumeConflict in-use while it is attached, attaching or
// detaching, as EC2's DeleteVolume refuses a volume in use.
func DeleteDisk(ctx context.Context, dir, handle string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := lockDisks(dir)
	if err != nil {
		return fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	defer unlock()
	d, err := readDisk(dir, handle)
	if err != nil {
		return fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	if a := d.Attachment; live(dir, a, time.Now()) {
		return pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, handle, a.InstanceID,
			fmt.Sprintf("disk %s is %s to instance %s", handle, a.state(time.Now()), a.InstanceID))
	}
	if err := os.Remove(diskPath(dir, handle)); err != nil {
		return fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	return nil
}

// AttachVolume attaches a disk to a running instance of the cluster and
// answers the attachment, attaching. Idempotent: a disk attaching or
// attached to the same instance answers that attachment, as it was made.
// Errors: NotFound for an unknown instance or disk; Transient for a
// pending instance or a disk still detaching from this one; VolumeConflict
// in-use (attached to another instance), wrong-zone (the disk is not in
// the instance's zone), attachment-limit (attachmentLimit disks already).
func (p *provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	// The SDK's server refuses other drivers before the call gets here;
	// this answers a direct call the same way.
	if err := info().CheckVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	r, err := cfg.find(req.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	if cfg.instance(r).State != pluginapi.StateRunning {
		return nil, pluginapi.NewTransient("instance %s is pending; a disk attaches to a running instance", r.ID)
	}
	unlock, err := lockDisks(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	defer unlock()
	d, err := readDisk(cfg.dir, req.VolumeHandle)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	now := time.Now()
	if a := d.Attachment; live(cfg.dir, a, now) {
		switch {
		case a.InstanceID != r.ID:
			return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, d.Handle, a.InstanceID,
				fmt.Sprintf("disk %s is %s to instance %s", d.Handle, a.state(now), a.InstanceID))
		case a.state(now) == pluginapi.AttachmentDetaching:
			return nil, pluginapi.NewTransient("disk %s is detaching from instance %s; attach it again once it is detached", d.Handle, r.ID)
		}
		return &pluginapi.AttachVolumeResponse{Attachment: d.contract(now)}, nil
	}
	if d.Zone != zone {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, d.Handle, "",
			fmt.Sprintf("disk %s lies in zone %s, instance %s runs in zone %s", d.Handle, d.Zone, r.ID, zone))
	}
	disks, err := readDisks(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	n := 0
	for _, o := range disks {
		if live(cfg.dir, o.Attachment, now) && o.Attachment.InstanceID == r.ID {
			n++
		}
	}
	if n >= attachmentLimit {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, d.Handle, "",
			fmt.Sprintf("instance %s has %d disks, its limit", r.ID, n))
	}
	d.Attachment = &attachment{InstanceID: r.ID, ReadOnly: req.ReadOnly, AttachedAt: now.Add(attachDelay).UTC()}
	if err := writeDisk(cfg.dir, d); err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", d.Handle, err)
	}
	p.log.Info("attaching disk", "disk", d.Handle, "instance", r.ID, "cell", r.CellID, "read_only", req.ReadOnly)
	return &pluginapi.AttachVolumeResponse{Attachment: d.contract(now)}, nil
}

// DetachVolume starts detaching a disk from an instance: it is detaching
// for detachDelay, then gone. Detaching a disk that is detaching
// succeeds; NotFound once the disk is not attached to that instance, or
// for an unknown disk or instance.
func (p *provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	if err := info().CheckVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	if _, err := cfg.find(req.InstanceID); err != nil {
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, err)
	}
	unlock, err := lockDisks(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, err)
	}
	defer unlock()
	d, err := readDisk(cfg.dir, req.VolumeHandle)
	if err != nil {
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, err)
	}
	now := time.Now()
	a := d.Attachment
	switch {
	case !live(cfg.dir, a, now) || a.InstanceID != req.InstanceID:
		return nil, pluginapi.NewNotFound("disk %s is not attached to instance %s", d.Handle, req.InstanceID)
	case a.state(now) == pluginapi.AttachmentDetaching:
		return &pluginapi.DetachVolumeResponse{}, nil
	}
	a.DetachedAt = now.Add(detachDelay).UTC()
	if err := writeDisk(cfg.dir, d); err != nil {
		return nil, fmt.Errorf("detaching disk %s: %w", d.Handle, err)
	}
	p.log.Info("detaching disk", "disk", d.Handle, "instance", req.InstanceID)
	return &pluginapi.DetachVolumeResponse{}, nil
}

// DescribeVolumeAttachments answers the attachments of the named
// instances of the cluster that exist; the others have none.
func (p *provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	// Read without the lock: each disk's file is replaced whole
	// (writeDisk), so a reader sees it before or after a change.
	disks, err := readDisks(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("describing volume attachments: %w", err)
	}
	resp := &pluginapi.DescribeVolumeAttachmentsResponse{}
	now := time.Now()
	for _, id := range req.InstanceIDs {
		if _, err := cfg.find(id); pluginapi.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("describing volume attachments of instance %s: %w", id, err)
		}
		for _, d := range disks {
			if live(cfg.dir, d.Attachment, now) && d.Attachment.InstanceID == id {
				resp.Attachments = append(resp.Attachments, d.contract(now))
			}
		}
	}
	return resp, nil
}

// contract is d's attachment as the contract shows it; d must have one.
func (d disk) contract(now time.Time) pluginapi.VolumeAttachment {
	return pluginapi.VolumeAttachment{
		InstanceID: d.Attachment.InstanceID, Driver: VolumeDriver, VolumeHandle: d.Handle,
		State: d.Attachment.state(now), ReadOnly: d.Attachment.ReadOnly,
		// Where the instance's udev would link the disk, as Compute
		// Engine's /dev/disk/by-id/google-<device name>: the agent
		// waits for this path.
		Device: pluginapi.VolumeDevice{Path: "/dev/disk/by-id/toy-" + d.Handle},
	}
}

// live reports whether a is an attachment now: not gone, and to an
// instance that has not been terminated (the cloud detaches its disks).
func live(dir string, a *attachment, now time.Time) bool {
	if a.state(now) == "" {
		return false
	}
	r, err := (&config{dir: dir}).read(a.InstanceID) // read needs only the directory
	return err == nil && !r.Terminated
}

func diskPath(dir, handle string) string {
	return filepath.Join(dir, "disks", handle+".json")
}

// readDisk reads disk handle; NotFound if there is none.
func readDisk(dir, handle string) (disk, error) {
	var d disk
	if !handlePattern.MatchString(handle) {
		return d, pluginapi.NewNotFound("disk %s: not a toy disk handle", handle)
	}
	data, err := os.ReadFile(diskPath(dir, handle))
	if errors.Is(err, fs.ErrNotExist) {
		return d, pluginapi.NewNotFound("disk %s does not exist", handle)
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("reading disk %s: %w", handle, err)
	}
	return d, nil
}

// readDisks reads every disk of the cloud.
func readDisks(dir string) ([]disk, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "disks", "vol-*.json"))
	if err != nil {
		return nil, err
	}
	var disks []disk
	for _, path := range paths {
		d, err := readDisk(dir, strings.TrimSuffix(filepath.Base(path), ".json"))
		switch {
		case pluginapi.IsNotFound(err): // deleted meanwhile
		case err != nil:
			return nil, err
		default:
			disks = append(disks, d)
		}
	}
	return disks, nil
}

// writeDisk replaces d's file whole (writeWhole), as config.write does an
// instance's.
func writeDisk(dir string, d disk) error {
	return writeWhole(d, diskPath(dir, d.Handle), os.Rename)
}

// lockDisks takes the cloud's disk lock, for this process and every other
// on the directory, and returns its release. It is held for a few file
// reads and one write, so it does not watch a context. (flock(2) is
// Linux's and the BSDs', where kip runs; not Windows'.)
func lockDisks(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "disks.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the disks: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the disks: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}
