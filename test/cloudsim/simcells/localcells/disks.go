package localcells

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/local"
	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// The simulators' disks (simcells.DiskStarter). A simulated cloud's disk
// is a disk of the local plugin (a sparse file behind a loop device,
// plugins/local/volume.go), made and deleted in the plugin's state
// directory with local.CreateVolume and local.DeleteVolume, and attached
// to the instance's local cell with the plugin's AttachVolume, which binds
// a loop device and answers it as Device.Path (/dev/loopN).
//
// The agent must then find it at the cloud's path ("/dev/disk/azure/
// scsi1/lun0"), which udev would make on the instance. Every local cell's
// agent lives in the one mount namespace of the machine, where two
// instances may have a disk at the same cloud path, and where the path
// may even be the machine's own disk's (a test run on that cloud); so
// each instance has a directory of its own standing in for its root where
// udev makes device links, its disk path root: the agent looks a disk's
// path up there alone (kip-cell --disk-path-root, the {disks} placeholder
// of Config.AgentCommand), and AttachDisk makes the link there,
// <root>/dev/disk/azure/scsi1/lun0 → /dev/loopN. DetachDisk removes it once
// the loop device is gone, as udev removes a detached disk's links.
//
// The disk path roots are in a directory of LocalCells', which the agents
// see as LocalCells does: the local plugin must run the cells in its own
// mount namespace (no mountNamespace in PluginConfig), which is also where
// local.DeleteVolume must run.

var _ simcells.DiskStarter = (*LocalCells)(nil)

// diskAttachmentLimit is the local plugin's attachmentLimit LocalCells
// configures unless PluginConfig says otherwise: more disks than any of
// the simulated clouds attaches to one instance (Azure's largest VMs take
// 64 data disks), so that the simulator's limits are the only ones.
const diskAttachmentLimit = 128

// diskHandle is the local plugin's handle of a simulated cloud's disk,
// named by its ID or name: the same for the same id, different for
// different ones, and always a valid handle (up to 128 of [A-Za-z0-9._-],
// starting with a letter or digit), which a cloud's ID need not be (an ARM
// resource ID has slashes). It keeps the id's tail readable, where an ARM
// ID has the disk's name, and adds a hash of the whole id, so that ids
// that read the same once cleaned up stay apart.
func diskHandle(id string) string {
	clean := []byte(id)
	for i, b := range clean {
		if (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') && b != '-' {
			clean[i] = '-'
		}
	}
	name := string(clean)
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	name = strings.Trim(name, "-")
	if name == "" {
		name = "disk"
	}
	sum := sha256.Sum256([]byte(id))
	return name + "-" + hex.EncodeToString(sum[:8])
}

// DiskPathRoot is the directory standing in for the instance's root where
// udev makes its disks' device links ({disks} of the agent command): an
// attached disk's link is there at the path the simulator gave
// AttachDisk.
func (c *LocalCells) DiskPathRoot(instanceID string) string {
	return filepath.Join(c.diskRoots, instanceID)
}

// checkInstanceID refuses an instance ID that is no single file name, so
// that its disk path root is in the directory of the roots.
func checkInstanceID(instanceID string) error {
	if instanceID == "" || instanceID == "." || instanceID == ".." || strings.ContainsRune(instanceID, '/') {
		return fmt.Errorf("instance ID %q is no file name", instanceID)
	}
	return nil
}

// CreateDisk makes a blank disk of the local plugin for the simulated
// disk id, sizeBytes long (a multiple of 512 bytes, as every cloud's
// sizes are), in the plugin's zone: the simulator keeps the cloud's zones.
// Idempotent for the same size; another size is an error.
func (c *LocalCells) CreateDisk(ctx context.Context, id string, sizeBytes int64) error {
	if err := local.CreateVolume(ctx, c.stateDir, diskHandle(id), c.zone, sizeBytes); err != nil {
		return fmt.Errorf("creating disk %s: %w", id, err)
	}
	return nil
}

// DeleteDisk deletes the disk and its data. A disk still attached is
// refused (VolumeConflict in-use); one still detaching is waited for
// until ctx ends; an unknown one is already deleted.
func (c *LocalCells) DeleteDisk(ctx context.Context, id string) error {
	err := local.DeleteVolume(ctx, c.stateDir, diskHandle(id))
	if err != nil && !pluginapi.IsNotFound(err) {
		return fmt.Errorf("deleting disk %s: %w", id, err)
	}
	return nil
}

// AttachDisk attaches the disk to the instance's local cell (a loop
// device) and links it at path under the instance's disk path root. It is
// idempotent for the same instance, disk and path (the local plugin's
// AttachVolume answers the attachment it has). Errors: the instance has no
// local cell; the disk is attached elsewhere (VolumeConflict in-use),
// does not exist (NotFound), is attached to the instance at another path
// or read-only where readOnly is not (or the reverse), or another disk of
// the instance is at path.
func (c *LocalCells) AttachDisk(ctx context.Context, instanceID, id, path string, readOnly bool) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("attaching disk %s to %s: %q is not a clean absolute path", id, instanceID, path)
	}
	if err := checkInstanceID(instanceID); err != nil {
		return fmt.Errorf("attaching disk %s: %w", id, err)
	}
	localID, ok := c.LocalID(instanceID)
	if !ok {
		return fmt.Errorf("attaching disk %s to %s: the instance has no local cell", id, instanceID)
	}
	handle := diskHandle(id)
	c.mu.Lock()
	for h, p := range c.diskLinks[instanceID] {
		if p == path && h != handle {
			c.mu.Unlock()
			return fmt.Errorf("attaching disk %s to %s at %s: another disk (%s) is there", id, instanceID, path, h)
		}
		if h == handle && p != path {
			c.mu.Unlock()
			return fmt.Errorf("attaching disk %s to %s at %s: it is attached at %s", id, instanceID, path, p)
		}
	}
	c.mu.Unlock()
	resp, err := c.sup.Client().AttachVolume(ctx, &pluginapi.AttachVolumeRequest{
		InstanceID: localID, Driver: local.VolumeDriver, VolumeHandle: handle, ReadOnly: readOnly,
	})
	if err != nil {
		return fmt.Errorf("attaching disk %s to %s: %w", id, instanceID, err)
	}
	a := resp.Attachment
	switch {
	case a.State != pluginapi.AttachmentAttached || a.Device.Path == "":
		// The local plugin binds the device before it answers.
		return fmt.Errorf("attaching disk %s to %s: the local plugin answered it %s at %q", id, instanceID, a.State, a.Device.Path)
	case a.ReadOnly != readOnly:
		return fmt.Errorf("attaching disk %s to %s (read-only %t): it is attached with read-only %t", id, instanceID, readOnly, a.ReadOnly)
	}
	link := filepath.Join(c.DiskPathRoot(instanceID), path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := replaceSymlink(a.Device.Path, link); err != nil {
		return fmt.Errorf("attaching disk %s to %s: linking %s: %w", id, instanceID, path, err)
	}
	if c.diskLinks[instanceID] == nil {
		c.diskLinks[instanceID] = map[string]string{}
	}
	c.diskLinks[instanceID][handle] = path
	c.log.Info("disk attached", "instance", instanceID, "disk", id, "handle", handle, "path", path, "device", a.Device.Path, "read_only", readOnly)
	return nil
}

// replaceSymlink makes link a symbolic link to target, atomically (a new
// link renamed over it), with its directories.
func replaceSymlink(target, link string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil { //nolint:gosec // G301: the agent, maybe unprivileged, reads it
		return err
	}
	tmp := link + ".new-" + rand.Text()[:8]
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// DetachDisk detaches the disk from the instance's local cell and removes
// its link once the loop device is gone. While the cell still holds the
// device open (the agent has not unmounted it) the local plugin leaves it
// detaching, and the kernel lets it go at its last close: DetachDisk then
// answers an error and keeps the link, and a later DetachDisk finishes
// the detach. A disk not attached to the instance, or an instance whose
// cell is gone (terminating a local cell detaches its disks), is already
// detached.
func (c *LocalCells) DetachDisk(ctx context.Context, instanceID, id string) error {
	handle := diskHandle(id)
	if localID, ok := c.LocalID(instanceID); ok {
		_, err := c.sup.Client().DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: localID, Driver: local.VolumeDriver, VolumeHandle: handle})
		switch {
		case pluginapi.IsNotFound(err):
			// Not attached (any more).
		case err != nil:
			return fmt.Errorf("detaching disk %s from %s: %w", id, instanceID, err)
		default:
			d, err := c.sup.Client().DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{localID}})
			if err != nil {
				return fmt.Errorf("detaching disk %s from %s: %w", id, instanceID, err)
			}
			for _, a := range d.Attachments {
				if a.VolumeHandle == handle {
					return fmt.Errorf("detaching disk %s from %s: still %s: its device %s is open in the cell (mounted?)", id, instanceID, a.State, a.Device.Path)
				}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	path, ok := c.diskLinks[instanceID][handle]
	if !ok {
		return nil
	}
	if err := os.Remove(filepath.Join(c.DiskPathRoot(instanceID), path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("detaching disk %s from %s: removing the link at %s: %w", id, instanceID, path, err)
	}
	delete(c.diskLinks[instanceID], handle)
	c.log.Info("disk detached", "instance", instanceID, "disk", id, "handle", handle, "path", path)
	return nil
}

// forgetDisks removes the instance's disk path root, once its cell is
// terminated (which detached its disks).
func (c *LocalCells) forgetDisks(instanceID string) error {
	if checkInstanceID(instanceID) != nil {
		return nil // AttachDisk made no root for it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.diskLinks, instanceID)
	if err := os.RemoveAll(c.DiskPathRoot(instanceID)); err != nil {
		return fmt.Errorf("removing the disk links of %s: %w", instanceID, err)
	}
	return nil
}
