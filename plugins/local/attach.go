package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The volume calls (pluginapi.VolumeAttacher): a local disk (volume.go) is
// attached to a cell by binding a loop device to its file (loop.go).
// AttachVolume binds the device before it answers, so its answer is
// attached at once; a detach is done when DetachVolume answers, unless the
// device is still mounted or open somewhere (the agent did not unmount,
// or a container still holds it): the kernel then unbinds it at the last
// close, and the attachment is detaching until then. That is EC2's
// behaviour too, where a volume detached while mounted stays "busy"
// (detaching) until the instance lets it go; the plugin forces nothing,
// as the contract asks (the host detaches once the agent unmounted).
//
// Locks: AttachVolume takes the cell's lock, then the disk's; the other
// calls that change a disk take its lock alone, Terminate takes the cell's
// and then its disks'. DescribeVolumeAttachments takes none.

// liveAttachment is a disk's attachment as it is now: its record taken
// together with the loop device that backs the disk's file.
type liveAttachment struct {
	// InstanceID is empty for a loop device no plugin recorded (someone's
	// losetup): the disk is in use, by nobody the plugin knows.
	InstanceID string
	State      pluginapi.AttachmentState
	// Device is the loop device; empty while attaching.
	Device   string
	ReadOnly bool
}

// currentAttachment is the attachment a disk has now, or nil: a (the
// record, nil for none), the loop device bound to the disk's file now
// (loop, "" for none), and whether an attach may be under way (the disk's
// lock is held by another call; false under the lock).
//
//   - a bound device is an attachment, attached (or detaching if the
//     record says the plugin asked the kernel to unbind it), whatever the
//     record says of its device: the kernel's is the device;
//   - without one, only an attach under way is (attaching): a recorded
//     attachment whose device is gone was detached behind the plugin's
//     back, or the machine restarted, and one attaching with no call
//     holding the lock was interrupted before it bound a device.
func currentAttachment(a *volumeAttachment, loop string, inProgress bool) *liveAttachment {
	switch {
	case a == nil && loop == "":
		return nil
	case a == nil:
		return &liveAttachment{State: pluginapi.AttachmentAttached, Device: loop}
	case loop != "" && a.State == pluginapi.AttachmentDetaching:
		return &liveAttachment{InstanceID: a.InstanceID, State: pluginapi.AttachmentDetaching, Device: loop, ReadOnly: a.ReadOnly}
	case loop != "":
		return &liveAttachment{InstanceID: a.InstanceID, State: pluginapi.AttachmentAttached, Device: loop, ReadOnly: a.ReadOnly}
	case a.State == pluginapi.AttachmentAttaching && inProgress:
		return &liveAttachment{InstanceID: a.InstanceID, State: pluginapi.AttachmentAttaching, ReadOnly: a.ReadOnly}
	}
	return nil
}

// contract is l as the contract shows it, for disk handle.
func (l *liveAttachment) contract(handle string) pluginapi.VolumeAttachment {
	return pluginapi.VolumeAttachment{
		InstanceID:   l.InstanceID,
		Driver:       VolumeDriver,
		VolumeHandle: handle,
		State:        l.State,
		ReadOnly:     l.ReadOnly,
		// A loop device has no serial; its name is stable while it is
		// bound, and the agent's mount namespace is the one it was made
		// in (process.go).
		Device: pluginapi.VolumeDevice{Path: l.Device},
	}
}

// checkVolumeDriver answers a volume call for another driver than
// VolumeDriver as the SDK's server does before it gets here.
func checkVolumeDriver(driver string) error {
	return info().CheckVolumeDriver(driver)
}

// AttachVolume binds a loop device to the disk's file for a running cell
// and answers the attachment, attached, with the device as its Path
// (/dev/loopN). Idempotent: a disk attached to the same cell answers that
// attachment, as it was made (read-only or not), and never binds a second
// device; a bound device an interrupted attach left is adopted. Errors:
// NotFound for an unknown or terminated instance or an unknown disk;
// Transient for a pending one, or a disk still detaching from it;
// VolumeConflict in-use (a disk attached to another cell, or bound to a
// loop device by someone else), wrong-zone (a disk of another zone than
// the cell's), attachment-limit (the cell has attachmentLimit disks).
func (p *provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	if err := checkVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	found, err := findRecord(cfg.stateDir, req.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	if found == nil {
		return nil, pluginapi.NewNotFound("instance %s", req.InstanceID)
	}
	if err := attachableCell(cfg, found); err != nil {
		return nil, err
	}
	if _, err := readVolume(cfg.stateDir, req.VolumeHandle); errors.Is(err, fs.ErrNotExist) {
		return nil, pluginapi.NewNotFound("disk %s", req.VolumeHandle)
	}

	unlockCell, err := p.cellLock(ctx, cfg, found.CellID)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	defer unlockCell()
	// Terminated, or given up, while this call waited.
	r, err := readRecord(cfg.stateDir, found.CellID)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && r.ID != req.InstanceID:
		return nil, pluginapi.NewNotFound("instance %s", req.InstanceID)
	case err != nil:
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	if r.PID == 0 || r.GaveUp {
		// Under the cell's lock, a launch without an agent is one that
		// did not complete (cellState would call it pending: the lock is
		// held, by this call).
		return nil, pluginapi.NewNotFound("instance %s ended", req.InstanceID)
	}
	unlockVolume, err := lockVolume(ctx, &p.locks, cfg.stateDir, req.VolumeHandle)
	if err != nil {
		return nil, fmt.Errorf("attaching: %w", err)
	}
	defer unlockVolume()
	v, err := readVolume(cfg.stateDir, req.VolumeHandle)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, pluginapi.NewNotFound("disk %s", req.VolumeHandle)
	}
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, err)
	}
	a, err := p.attach(ctx, cfg, r, v, req.ReadOnly)
	if err != nil {
		return nil, err
	}
	return &pluginapi.AttachVolumeResponse{Attachment: a.contract(v.Handle)}, nil
}

// attachableCell is nil for a running cell, else the error AttachVolume
// answers for it. Not under the cell's lock, whose holder it takes for a
// Launch under way.
func attachableCell(cfg *config, r *record) error {
	switch state, reason := cellState(cfg.stateDir, r); state {
	case pluginapi.StateRunning:
		return nil
	case pluginapi.StatePending:
		return pluginapi.NewTransient("instance %s is pending; a disk attaches to a running instance", r.ID)
	default:
		return pluginapi.NewNotFound("instance %s is %s (%s)", r.ID, state, reason)
	}
}

// attach attaches disk v to the cell of r, or answers the attachment it
// has. The caller holds the cell's lock and the disk's.
func (p *provider) attach(ctx context.Context, cfg *config, r *record, v *volumeRecord, readOnly bool) (*liveAttachment, error) {
	log := p.log.With("disk", v.Handle, "cell", r.CellID, "instance", r.ID)
	file := volumeImagePath(cfg.stateDir, v.Handle)
	loops, err := loopsOf(cfg.machine, file)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", v.Handle, err)
	}
	cur := currentAttachment(v.Attachment, loops[file], false)
	switch {
	case cur != nil && cur.InstanceID == "":
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, v.Handle, "",
			fmt.Sprintf("disk %s is bound to loop device %s, which the plugin did not bind", v.Handle, cur.Device))
	case cur != nil && cur.InstanceID != r.ID:
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, v.Handle, cur.InstanceID,
			fmt.Sprintf("disk %s is %s to instance %s as %s", v.Handle, cur.State, cur.InstanceID, cur.Device))
	case cur != nil && cur.State == pluginapi.AttachmentDetaching:
		return nil, pluginapi.NewTransient("disk %s is detaching from instance %s (%s is still open); attach it again once it is detached", v.Handle, r.ID, cur.Device)
	case cur != nil:
		if v.Attachment.State != pluginapi.AttachmentAttached || v.Attachment.Device != cur.Device {
			// An attach interrupted after it bound the device: adopt it.
			v.Attachment.State, v.Attachment.Device = pluginapi.AttachmentAttached, cur.Device
			if err := writeVolume(cfg.stateDir, v); err != nil {
				return nil, fmt.Errorf("attaching disk %s: recording device %s: %w", v.Handle, cur.Device, err)
			}
			log.Info("disk attached by an earlier call, recorded now", "device", cur.Device)
		}
		return cur, nil
	case v.Zone != r.Zone:
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, v.Handle, "",
			fmt.Sprintf("disk %s lies in zone %s, instance %s runs in zone %s", v.Handle, v.Zone, r.ID, r.Zone))
	}
	n, err := attachedTo(cfg, r.ID, v.Handle)
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", v.Handle, err)
	}
	if n >= cfg.attachmentLimit {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, v.Handle, "",
			fmt.Sprintf("instance %s has %d disks attached, its limit (attachmentLimit)", r.ID, n))
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the last chance to give up before there is a device
	}

	// The intent first: a device bound by a call that then dies is
	// found, and adopted or unbound, by the next.
	v.Attachment = &volumeAttachment{InstanceID: r.ID, CellID: r.CellID, ReadOnly: readOnly, State: pluginapi.AttachmentAttaching, Since: time.Now().UTC()}
	if err := writeVolume(cfg.stateDir, v); err != nil {
		return nil, fmt.Errorf("attaching disk %s: recording the attachment: %w", v.Handle, err)
	}
	device, err := bindLoop(cfg.machine, file, readOnly)
	if err == nil {
		v.Attachment.State, v.Attachment.Device = pluginapi.AttachmentAttached, device
		if err = writeVolume(cfg.stateDir, v); err != nil {
			err = fmt.Errorf("recording device %s: %w", device, err)
			if _, uerr := unbindLoop(context.WithoutCancel(ctx), cfg.machine, device, file); uerr != nil {
				log.Error("unbinding the loop device of a failed attach", "device", device, "error", uerr)
			}
		}
	}
	if err != nil {
		// A refused attach attaches nothing: forget the intent (if this
		// fails too, the intent is stale and ignored).
		v.Attachment = nil
		if werr := writeVolume(cfg.stateDir, v); werr != nil {
			log.Warn("forgetting the intent of a failed attach", "error", werr)
		}
		return nil, fmt.Errorf("attaching disk %s: %w", v.Handle, err)
	}
	log.Info("disk attached", "device", device, "read_only", readOnly)
	return &liveAttachment{InstanceID: r.ID, State: pluginapi.AttachmentAttached, Device: device, ReadOnly: readOnly}, nil
}

// attachedTo counts the disks but except attached, attaching or detaching
// to instance, as the kernel has them now.
func attachedTo(cfg *config, instance, except string) (int, error) {
	vols, err := readVolumes(cfg.stateDir)
	if err != nil {
		return 0, err
	}
	var mine []*volumeRecord
	var files []string
	for _, v := range vols {
		if v.Handle != except && v.Attachment != nil && v.Attachment.InstanceID == instance {
			mine = append(mine, v)
			files = append(files, volumeImagePath(cfg.stateDir, v.Handle))
		}
	}
	loops, err := loopsOf(cfg.machine, files...)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, v := range mine {
		if currentAttachment(v.Attachment, loops[files[i]], lockHeld(volumeLockPath(cfg.stateDir, v.Handle))) != nil {
			n++
		}
	}
	return n, nil
}

// DetachVolume unbinds the disk's loop device. It answers once the
// kernel has unbound it, or, while the device is still mounted or open
// somewhere, once the kernel has been asked to unbind it at its last
// close: detaching until then (the package comment of attach.go). Again
// while detaching, it succeeds; once the disk is not attached to the
// instance, or for an unknown disk, NotFound.
func (p *provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	if err := checkVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	notAttached := pluginapi.NewNotFound("disk %s is not attached to instance %s", req.VolumeHandle, req.InstanceID)
	v, err := readVolume(cfg.stateDir, req.VolumeHandle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, pluginapi.NewNotFound("disk %s", req.VolumeHandle)
	case err != nil:
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, err)
	case v.Attachment == nil || v.Attachment.InstanceID != req.InstanceID:
		return nil, notAttached
	}
	unlock, err := lockVolume(ctx, &p.locks, cfg.stateDir, req.VolumeHandle)
	if err != nil {
		return nil, fmt.Errorf("detaching: %w", err)
	}
	defer unlock()
	v, err = readVolume(cfg.stateDir, req.VolumeHandle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, pluginapi.NewNotFound("disk %s", req.VolumeHandle)
	case err != nil:
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, err)
	case v.Attachment == nil || v.Attachment.InstanceID != req.InstanceID:
		return nil, notAttached
	}
	attached, err := p.detach(ctx, cfg, v)
	if err != nil {
		return nil, err
	}
	if !attached {
		return nil, notAttached
	}
	return &pluginapi.DetachVolumeResponse{}, nil
}

// detach unbinds the loop device of v's recorded attachment and forgets
// the attachment once the kernel has let the device go; it reports
// whether the disk was attached (or detaching) at all. A stale record
// (currentAttachment) is forgotten. The caller holds the disk's lock.
func (p *provider) detach(ctx context.Context, cfg *config, v *volumeRecord) (attached bool, err error) {
	a := v.Attachment
	log := p.log.With("disk", v.Handle, "cell", a.CellID, "instance", a.InstanceID)
	file := volumeImagePath(cfg.stateDir, v.Handle)
	loops, err := loopsOf(cfg.machine, file)
	if err != nil {
		return false, fmt.Errorf("detaching disk %s: %w", v.Handle, err)
	}
	cur := currentAttachment(a, loops[file], false)
	if cur == nil {
		v.Attachment = nil
		if err := writeVolume(cfg.stateDir, v); err != nil {
			return false, fmt.Errorf("detaching disk %s: forgetting an attachment whose device is gone: %w", v.Handle, err)
		}
		log.Info("forgot an attachment whose loop device is gone", "device", a.Device, "state", a.State)
		return false, nil
	}
	if a.State != pluginapi.AttachmentDetaching || a.Device != cur.Device {
		a.State, a.Device, a.Since = pluginapi.AttachmentDetaching, cur.Device, time.Now().UTC()
		if err := writeVolume(cfg.stateDir, v); err != nil {
			return true, fmt.Errorf("detaching disk %s: recording the detach: %w", v.Handle, err)
		}
	}
	gone, err := unbindLoop(ctx, cfg.machine, cur.Device, file)
	if err != nil {
		return true, fmt.Errorf("detaching disk %s: %w", v.Handle, err)
	}
	if !gone {
		log.Info("disk detaching: its loop device is still open (mounted?); the kernel unbinds it at its last close", "device", cur.Device)
		return true, nil
	}
	v.Attachment = nil
	if err := writeVolume(cfg.stateDir, v); err != nil {
		return true, fmt.Errorf("detaching disk %s: forgetting the attachment: %w", v.Handle, err)
	}
	log.Info("disk detached", "device", cur.Device)
	return true, nil
}

// detachAll detaches every disk attached to the cell of r: Terminate's,
// and that of a cell given up (destroy), as EC2 detaches a terminated
// instance's volumes. A disk whose device stays open elsewhere is left
// detaching. The caller holds the cell's lock.
func (p *provider) detachAll(ctx context.Context, cfg *config, r *record) error {
	vols, err := readVolumes(cfg.stateDir)
	if err != nil {
		return fmt.Errorf("detaching the cell's disks: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if v.Attachment == nil || v.Attachment.InstanceID != r.ID {
			continue
		}
		errs = append(errs, p.detachOne(ctx, cfg, r, v.Handle))
	}
	return errors.Join(errs...)
}

// detachOne is detachAll's for one disk.
func (p *provider) detachOne(ctx context.Context, cfg *config, r *record, handle string) error {
	unlock, err := lockVolume(ctx, &p.locks, cfg.stateDir, handle)
	if err != nil {
		return fmt.Errorf("detaching the cell's disks: %w", err)
	}
	defer unlock()
	v, err := readVolume(cfg.stateDir, handle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("detaching the cell's disks: %w", err)
	case v.Attachment == nil || v.Attachment.InstanceID != r.ID:
		return nil
	}
	_, err = p.detach(ctx, cfg, v)
	return err
}

// DescribeVolumeAttachments returns the attachments of the disks to the
// given instances as the records and the kernel have them now
// (currentAttachment): a recorded attachment whose loop device is gone is
// not shown. It takes no locks and changes nothing.
func (p *provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, id := range req.InstanceIDs {
		asked[id] = true
	}
	vols, err := readVolumes(cfg.stateDir)
	if err != nil {
		return nil, fmt.Errorf("describing volume attachments: %w", err)
	}
	var mine []*volumeRecord
	var files []string
	for _, v := range vols {
		if v.Attachment != nil && asked[v.Attachment.InstanceID] {
			mine = append(mine, v)
			files = append(files, volumeImagePath(cfg.stateDir, v.Handle))
		}
	}
	loops, err := loopsOf(cfg.machine, files...)
	if err != nil {
		return nil, fmt.Errorf("describing volume attachments: %w", err)
	}
	resp := &pluginapi.DescribeVolumeAttachmentsResponse{}
	for i, v := range mine {
		cur := currentAttachment(v.Attachment, loops[files[i]], lockHeld(volumeLockPath(cfg.stateDir, v.Handle)))
		if cur != nil && cur.InstanceID == v.Attachment.InstanceID {
			resp.Attachments = append(resp.Attachments, cur.contract(v.Handle))
		}
	}
	return resp, nil
}
