package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The local cloud's disks. A disk is a sparse file,
// <stateDir>/volumes/<handle>.img, with its record beside it,
// <handle>.json (volumeRecord): the zone it lies in, its size, when it was
// made and, while it is attached to a cell, the attachment. Attaching it is
// binding a loop device to the file (loop.go), which the cell's agent finds
// at /dev/loopN: the agent runs in the mount namespace where the plugin
// binds it (process.go), so the node is in its /dev.
//
// The record is the plugin's memory of an attachment, written before the
// kernel is touched (an attach records its intent, attaching, before it
// binds a loop device); the kernel is the truth of it: every answer takes
// the record and the loop device that backs the file now together
// (currentAttachment), so a plugin killed half way, a loop device detached
// behind its back or a machine rebooted is answered as it is, and the next
// call that holds the disk's lock corrects the record.

// VolumeDriver is the CSI driver of the local cloud's disks, the only one
// in the plugin's GetInfoResponse.VolumeDrivers: a PersistentVolume of a
// local disk has spec.csi.driver local.csi.kipcell.io and its handle as
// spec.csi.volumeHandle.
const VolumeDriver = "local.csi.kipcell.io"

// volumeHandlePattern is a disk's handle: it is a file name in the
// volumes directory, so nothing else (a PersistentVolume's name, pvc-<uid>,
// fits).
var volumeHandlePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// sectorSize is the unit of a loop device's size: a disk's size is a
// multiple of it.
const sectorSize = 512

// File name suffixes of a disk in the volumes directory.
const (
	volumeImageSuffix  = ".img"
	volumeRecordSuffix = ".json"
	volumeLockSuffix   = ".lock"
)

// volumeRecord is what the local cloud knows of one disk.
type volumeRecord struct {
	Handle    string    `json:"handle"`
	Zone      string    `json:"zone"`
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
	// Attachment is nil while the disk is attached nowhere.
	Attachment *volumeAttachment `json:"attachment,omitempty"`
}

// volumeAttachment is the record of a disk's attachment to one cell.
type volumeAttachment struct {
	InstanceID string `json:"instanceID"`
	CellID     string `json:"cellID"`
	ReadOnly   bool   `json:"readOnly,omitempty"`
	// State is attaching from the intent to the loop device's record,
	// attached then, detaching from the intent to detach until the kernel
	// has let the device go.
	State pluginapi.AttachmentState `json:"state"`
	// Device is the loop device (/dev/loopN), once bound.
	Device string    `json:"device,omitempty"`
	Since  time.Time `json:"since"`
}

func volumesDir(stateDir string) string { return filepath.Join(stateDir, "volumes") }

func volumeImagePath(stateDir, handle string) string {
	return filepath.Join(volumesDir(stateDir), handle+volumeImageSuffix)
}

func volumeRecordPath(stateDir, handle string) string {
	return filepath.Join(volumesDir(stateDir), handle+volumeRecordSuffix)
}

func volumeLockPath(stateDir, handle string) string {
	return filepath.Join(volumesDir(stateDir), handle+volumeLockSuffix)
}

// readVolume reads a disk's record; fs.ErrNotExist when there is none (a
// handle that is no handle has none either).
func readVolume(stateDir, handle string) (*volumeRecord, error) {
	if !volumeHandlePattern.MatchString(handle) {
		return nil, fs.ErrNotExist
	}
	data, err := os.ReadFile(volumeRecordPath(stateDir, handle))
	if err != nil {
		return nil, err
	}
	v := &volumeRecord{}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("reading the record of disk %s: %w", handle, err)
	}
	return v, nil
}

// writeVolume writes a disk's record atomically (a synced temporary file
// renamed over it). The caller holds the disk's lock.
func writeVolume(stateDir string, v *volumeRecord) error {
	return writeJSONAtomic(volumeRecordPath(stateDir, v.Handle), v)
}

// readVolumes reads every disk's record.
func readVolumes(stateDir string) ([]*volumeRecord, error) {
	entries, err := os.ReadDir(volumesDir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*volumeRecord
	for _, e := range entries {
		handle, isRecord := strings.CutSuffix(e.Name(), volumeRecordSuffix)
		if !isRecord || e.IsDir() {
			continue
		}
		v, err := readVolume(stateDir, handle)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// lockVolume takes the lock of one disk: held by every call that changes
// its record or binds or unbinds its loop device. It comes after the
// cell's lock where a call takes both (AttachVolume, Terminate).
func lockVolume(ctx context.Context, l *locker, stateDir, handle string) (unlock, error) {
	if err := os.MkdirAll(volumesDir(stateDir), 0o700); err != nil {
		return nil, fmt.Errorf("locking disk %s: %w", handle, err)
	}
	u, err := l.lock(ctx, "volume/"+handle, volumeLockPath(stateDir, handle))
	if err != nil {
		return nil, fmt.Errorf("locking disk %s: %w", handle, err)
	}
	return u, nil
}

// CreateVolume creates a disk of the local cloud in stateDir (the
// plugin's configured stateDir): a sparse file of sizeBytes (a multiple of
// 512) named by handle (a PersistentVolume's spec.csi.volumeHandle, up to
// 128 of [A-Za-z0-9._-]), lying in zone, attached nowhere. It is how a
// disk comes to exist in the local cloud, as a cloud's CreateVolume call
// makes one: kip-local-provisioner (package localprov) and the
// conformance test create their disks with it. The zone need
// not be the plugin's: a disk of another zone is one a cell of this zone
// cannot attach (VolumeConflict wrong-zone).
//
// Creating a disk that exists with the same zone and size succeeds and
// leaves it as it is (its data with it); with another zone or size it is
// an error.
func CreateVolume(ctx context.Context, stateDir, handle, zone string, sizeBytes int64) error {
	switch {
	case !filepath.IsAbs(stateDir):
		return fmt.Errorf("creating disk %s: state directory %q is not an absolute path", handle, stateDir)
	case !volumeHandlePattern.MatchString(handle):
		return fmt.Errorf("creating disk %q: a handle is up to 128 of [A-Za-z0-9._-], starting with a letter or digit", handle)
	case zone == "":
		return fmt.Errorf("creating disk %s: no zone", handle)
	case sizeBytes <= 0 || sizeBytes%sectorSize != 0:
		return fmt.Errorf("creating disk %s: size %d is not a positive multiple of %d bytes", handle, sizeBytes, sectorSize)
	}
	var l locker
	unlock, err := lockVolume(ctx, &l, stateDir, handle)
	if err != nil {
		return fmt.Errorf("creating disk: %w", err)
	}
	defer unlock()
	switch v, err := readVolume(stateDir, handle); {
	case err == nil && v.Zone == zone && v.SizeBytes == sizeBytes:
		return nil
	case err == nil:
		return fmt.Errorf("creating disk %s of %d bytes in zone %s: it exists with %d bytes in zone %s", handle, sizeBytes, zone, v.SizeBytes, v.Zone)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("creating disk %s: %w", handle, err)
	}
	// The image first, the record last: a disk exists once it has a
	// record, whole.
	img, err := os.OpenFile(volumeImagePath(stateDir, handle), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("creating disk %s: %w", handle, err)
	}
	err = img.Truncate(sizeBytes) // sparse: no block is written
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = writeVolume(stateDir, &volumeRecord{Handle: handle, Zone: zone, SizeBytes: sizeBytes, CreatedAt: time.Now().UTC()})
	}
	if err != nil {
		return fmt.Errorf("creating disk %s: %w", handle, err)
	}
	return nil
}

// DeleteVolume deletes a disk CreateVolume made, with its data. A disk
// attached or attaching to a cell is refused with a VolumeConflictError
// (pluginapi.ConflictInUse, naming the instance), as a cloud refuses to
// delete a disk in use; one that is detaching is waited for until ctx
// ends. An unknown handle is a NotFoundError. It looks at the loop devices
// where it runs, so it must run in the mount namespace of the plugin's
// cells (the plugin's own unless its mountNamespace is set).
func DeleteVolume(ctx context.Context, stateDir, handle string) error {
	var l locker
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		detaching, err := deleteVolume(ctx, &l, stateDir, handle)
		if !detaching {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deleting disk %s: it is still detaching: %w", handle, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// deleteVolume is one attempt of DeleteVolume; it reports whether the
// disk was detaching, and so left to a later attempt.
func deleteVolume(ctx context.Context, l *locker, stateDir, handle string) (detaching bool, err error) {
	if _, err := readVolume(stateDir, handle); errors.Is(err, fs.ErrNotExist) {
		return false, pluginapi.NewNotFound("disk %s", handle)
	}
	unlock, err := lockVolume(ctx, l, stateDir, handle)
	if err != nil {
		return false, fmt.Errorf("deleting disk: %w", err)
	}
	defer unlock()
	v, err := readVolume(stateDir, handle)
	if errors.Is(err, fs.ErrNotExist) {
		return false, pluginapi.NewNotFound("disk %s", handle)
	}
	if err != nil {
		return false, fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	loops, err := boundLoops()
	if err != nil {
		return false, fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	if a := currentAttachment(v.Attachment, loops[resolved(volumeImagePath(stateDir, handle))], false); a != nil {
		if a.State == pluginapi.AttachmentDetaching {
			return true, nil
		}
		return false, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, handle, a.InstanceID,
			fmt.Sprintf("disk %s is %s to instance %s (device %s); detach it first", handle, a.State, a.InstanceID, a.Device))
	}
	// The record first: without it the disk does not exist, whatever
	// a crash leaves of its files.
	for _, path := range []string{volumeRecordPath(stateDir, handle), volumeImagePath(stateDir, handle), volumeLockPath(stateDir, handle)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("deleting disk %s: %w", handle, err)
		}
	}
	return false, nil
}
