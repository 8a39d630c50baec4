package plugintest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The cases of the volume calls (pluginapi.VolumeAttacher), run for a
// plugin that reports pluginapi.CapabilityVolumes and passed by any other.
// They attach disks the plugin's harness creates (Config.CreateVolume) to
// instances the suite launches, with the plugin's first volume driver.

// unknownDriver is a CSI driver no plugin attaches.
const unknownDriver = "unknown.csi.plugintest.invalid"

// volumeEnv is what a volume case works with: the configured client, the
// driver, and whether the plugin offers volumes at all.
type volumeEnv struct {
	c      pluginapi.Client
	driver string
}

// volumes returns the case's volume environment, or nil when the plugin
// does not report CapabilityVolumes (the case then passes).
func (e *env) volumes(ctx context.Context) (*volumeEnv, error) {
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetInfo failed: %w", err)
	}
	if !info.Has(pluginapi.CapabilityVolumes) {
		return nil, nil
	}
	// The client refuses a GetInfo with the capability and no driver.
	return &volumeEnv{c: c, driver: info.VolumeDrivers[0]}, nil
}

// runningInstance launches a new cell of the suite's cluster and waits for
// it to run; the instance must say its zone, where the case creates disks.
func (e *env) runningInstance(ctx context.Context) (pluginapi.Instance, error) {
	return e.runningInstanceOf(ctx, e.cfg.InstanceType)
}

// runningInstanceOf is runningInstance of an instance of type typ.
func (e *env) runningInstanceOf(ctx context.Context, typ string) (pluginapi.Instance, error) {
	cluster := e.cfg.ClusterID
	cell := e.cell(cluster)
	inst, err := e.launchAs(ctx, cluster, cell, typ)
	if err != nil {
		return inst, err
	}
	running, err := e.waitRunning(ctx, cluster, inst.ID)
	if err != nil {
		return running, fmt.Errorf("launching cell %s: %w", cell, err)
	}
	if running.Zone == "" {
		return running, fmt.Errorf("instance %s of cell %s runs without a zone; the volume cases create disks in the instance's zone", running.ID, cell)
	}
	return running, nil
}

// newVolume creates a disk in zone through the harness and remembers it
// for clean-up.
func (e *env) newVolume(ctx context.Context, zone string) (string, error) {
	if e.cfg.CreateVolume == nil {
		return "", fmt.Errorf("the plugin reports capability %q, so its conformance test must set plugintest.Config.CreateVolume, which creates a disk in a zone of the plugin's cloud: without a disk the volume cases cannot run",
			pluginapi.CapabilityVolumes)
	}
	handle, err := e.cfg.CreateVolume(ctx, zone)
	return e.madeVolume("Config.CreateVolume", zone, handle, err)
}

// madeVolume remembers the disk a harness hook (what) made in zone for
// clean-up, or says why there is none.
func (e *env) madeVolume(what, zone, handle string, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("creating a disk in zone %s with %s: %w", zone, what, err)
	}
	if handle == "" {
		return "", fmt.Errorf("%s made a disk in zone %s without a handle", what, zone)
	}
	e.mu.Lock()
	e.disks = append(e.disks, handle)
	e.mu.Unlock()
	return handle, nil
}

// otherZone returns a zone other than zone for a disk: Config.OtherZone,
// or another zone of the catalog.
func (e *env) otherZone(ctx context.Context, v *volumeEnv, zone string) (string, error) {
	if e.cfg.OtherZone != "" {
		if e.cfg.OtherZone == zone {
			return "", fmt.Errorf("Config.OtherZone is %s, the instance's own zone; it must be another", zone)
		}
		return e.cfg.OtherZone, nil
	}
	resp, err := v.c.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		return "", fmt.Errorf("listing instance types to find a zone other than %s: %w", zone, err)
	}
	for _, t := range resp.InstanceTypes {
		for _, o := range t.Offerings {
			if o.Zone != "" && o.Zone != zone {
				return o.Zone, nil
			}
		}
	}
	return "", fmt.Errorf("the catalog offers no zone but %s; set Config.OtherZone to another zone where Config.CreateVolume can create a disk", zone)
}

// attach attaches handle to instance and checks the answer names them.
func (e *env) attach(ctx context.Context, v *volumeEnv, instance, handle string) (pluginapi.VolumeAttachment, error) {
	resp, err := v.c.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: instance, Driver: v.driver, VolumeHandle: handle})
	if err != nil {
		return pluginapi.VolumeAttachment{}, fmt.Errorf("attaching disk %s to instance %s: %w", handle, instance, err)
	}
	// The client checked that the answer is of that disk and instance, and
	// attaching or attached.
	return resp.Attachment, nil
}

// attachment returns instance's attachment of handle as
// DescribeVolumeAttachments shows it, or nil.
func (e *env) attachment(ctx context.Context, v *volumeEnv, instance, handle string) (*pluginapi.VolumeAttachment, error) {
	resp, err := v.c.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{instance}})
	if err != nil {
		return nil, fmt.Errorf("describing the volume attachments of instance %s: %w", instance, err)
	}
	for i := range resp.Attachments {
		if a := &resp.Attachments[i]; a.VolumeHandle == handle {
			return a, nil
		}
	}
	return nil, nil
}

// waitAttachment describes instance's attachments until done says the
// attachment of handle (nil once gone) is what the case waits for, or
// ReadyTimeout passes. ok checks every attachment seen on the way.
func (e *env) waitAttachment(ctx context.Context, v *volumeEnv, instance, handle, what string,
	done func(*pluginapi.VolumeAttachment) bool, ok func(*pluginapi.VolumeAttachment) error,
) (*pluginapi.VolumeAttachment, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ReadyTimeout)
	defer cancel()
	last := "never described"
	delay := 20 * time.Millisecond
	for {
		a, err := e.attachment(ctx, v, instance, handle)
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		case err == nil:
			if err := ok(a); err != nil {
				return a, err
			}
			if done(a) {
				return a, nil
			}
			last = "absent"
			if a != nil {
				last = string(a.State)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("disk %s on instance %s was not %s within %s; last seen %s", handle, instance, what, e.cfg.ReadyTimeout, last)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// waitAttached waits for handle to be attached to instance; on the way it
// must show attaching or attached, never absent or detaching.
func (e *env) waitAttached(ctx context.Context, v *volumeEnv, instance, handle string) (*pluginapi.VolumeAttachment, error) {
	return e.waitAttachment(ctx, v, instance, handle, "attached",
		func(a *pluginapi.VolumeAttachment) bool { return a != nil && a.State == pluginapi.AttachmentAttached },
		func(a *pluginapi.VolumeAttachment) error {
			switch {
			case a == nil:
				return fmt.Errorf("after AttachVolume of disk %s to instance %s answered, DescribeVolumeAttachments does not show it; the attachment stays in the answer, attaching, until the cloud shows it", handle, instance)
			case a.State == pluginapi.AttachmentDetaching:
				return fmt.Errorf("after AttachVolume, DescribeVolumeAttachments shows disk %s on instance %s detaching; want attaching, then attached", handle, instance)
			}
			return nil
		})
}

// attached launches an instance, creates a disk in its zone, attaches it
// and waits for it to be attached.
func (e *env) attached(ctx context.Context, v *volumeEnv) (pluginapi.Instance, string, error) {
	inst, err := e.runningInstance(ctx)
	if err != nil {
		return inst, "", err
	}
	handle, err := e.newVolume(ctx, inst.Zone)
	if err != nil {
		return inst, "", err
	}
	if _, err := e.attach(ctx, v, inst.ID, handle); err != nil {
		return inst, handle, err
	}
	_, err = e.waitAttached(ctx, v, inst.ID, handle)
	return inst, handle, err
}

// checkVolumeAttach: AttachVolume answers the disk attaching or attached;
// again, the same attachment with the same device; DescribeVolumeAttachments
// shows it attaching, then attached with a device (the same one), and
// nothing for an unknown instance.
func checkVolumeAttach(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	inst, err := e.runningInstance(ctx)
	if err != nil {
		return err
	}
	handle, err := e.newVolume(ctx, inst.Zone)
	if err != nil {
		return err
	}
	first, err := e.attach(ctx, v, inst.ID, handle)
	if err != nil {
		return err
	}
	var errs []error
	second, err := e.attach(ctx, v, inst.ID, handle)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("attaching again: %w; AttachVolume is idempotent and answers the attachment it made", err))
	case first.Device != (pluginapi.VolumeDevice{}) && second.Device != first.Device:
		errs = append(errs, fmt.Errorf("attaching disk %s to instance %s twice answered devices %+v, then %+v; want the same device", handle, inst.ID, first.Device, second.Device))
	}
	a, err := e.waitAttached(ctx, v, inst.ID, handle)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if first.Device != (pluginapi.VolumeDevice{}) && a.Device != first.Device {
		errs = append(errs, fmt.Errorf("disk %s attached to instance %s with device %+v; AttachVolume answered %+v", handle, inst.ID, a.Device, first.Device))
	}
	if again, err := e.attach(ctx, v, inst.ID, handle); err != nil {
		errs = append(errs, fmt.Errorf("attaching once attached: %w; AttachVolume is idempotent", err))
	} else if again.Device != a.Device {
		errs = append(errs, fmt.Errorf("attaching disk %s to instance %s once attached answered device %+v; it is attached as %+v", handle, inst.ID, again.Device, a.Device))
	}
	resp, err := v.c.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{e.cfg.UnknownInstanceID}})
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("describing the volume attachments of unknown instance %s failed with %w (%s); an unknown instance has none", e.cfg.UnknownInstanceID, err, kindOf(err)))
	case len(resp.Attachments) > 0:
		errs = append(errs, fmt.Errorf("unknown instance %s has %d volume attachments; want none", e.cfg.UnknownInstanceID, len(resp.Attachments)))
	}
	return errors.Join(errs...)
}

// checkVolumeInUse: attaching a disk attached to another instance answers
// VolumeConflict in-use, naming that instance if anything, and attaches
// nothing.
func checkVolumeInUse(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	owner, handle, err := e.attached(ctx, v)
	if err != nil {
		return err
	}
	other, err := e.runningInstance(ctx)
	if err != nil {
		return err
	}
	if other.Zone != owner.Zone {
		return fmt.Errorf("instances %s and %s of the same launch request run in zones %s and %s; the case needs both in one zone", owner.ID, other.ID, owner.Zone, other.Zone)
	}
	return e.refused(ctx, v, other.ID, handle, pluginapi.ConflictInUse, owner.ID,
		fmt.Sprintf("attaching disk %s, attached to instance %s, to instance %s", handle, owner.ID, other.ID))
}

// refused attaches handle to instance, which must answer VolumeConflict
// reason (naming other, if an instance) and attach nothing; what says
// what was tried.
func (e *env) refused(ctx context.Context, v *volumeEnv, instance, handle string, reason pluginapi.VolumeConflictReason, other, what string) error {
	_, err := v.c.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: instance, Driver: v.driver, VolumeHandle: handle})
	var errs []error
	if err := wantConflict(err, reason, handle, other); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	if a, err := e.attachment(ctx, v, instance, handle); err != nil || a != nil {
		errs = append(errs, errors.Join(err, refusedAttached(a)))
	}
	return errors.Join(errs...)
}

// checkVolumeWrongZone: attaching a disk of another zone answers
// VolumeConflict wrong-zone and attaches nothing.
func checkVolumeWrongZone(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	inst, err := e.runningInstance(ctx)
	if err != nil {
		return err
	}
	zone, err := e.otherZone(ctx, v, inst.Zone)
	if err != nil {
		return err
	}
	handle, err := e.newVolume(ctx, zone)
	if err != nil {
		return err
	}
	return e.refused(ctx, v, inst.ID, handle, pluginapi.ConflictWrongZone, "",
		fmt.Sprintf("attaching disk %s of zone %s to instance %s of zone %s", handle, zone, inst.ID, inst.Zone))
}

// checkVolumeWrongType: attaching a disk the instance's type cannot take
// (Config.IncompatibleVolume) answers VolumeConflict wrong-type and
// attaches nothing. A plugin whose cloud has no such disk says why
// (Config.NoIncompatibleVolume), and the case is skipped with it.
func checkVolumeWrongType(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	if e.cfg.IncompatibleVolume == nil {
		if e.cfg.NoIncompatibleVolume != "" {
			return &notApplicable{reason: e.cfg.NoIncompatibleVolume}
		}
		return fmt.Errorf("the plugin reports capability %q, so its conformance test must set plugintest.Config.IncompatibleVolume, which creates a disk an instance type cannot take, or say in Config.NoIncompatibleVolume why its cloud has none",
			pluginapi.CapabilityVolumes)
	}
	typ := e.cfg.IncompatibleInstanceType
	if typ == "" {
		typ = e.cfg.InstanceType
	}
	inst, err := e.runningInstanceOf(ctx, typ)
	if err != nil {
		return err
	}
	handle, err := e.cfg.IncompatibleVolume(ctx, inst.Zone, typ)
	if handle, err = e.madeVolume("Config.IncompatibleVolume", inst.Zone, handle, err); err != nil {
		return err
	}
	return e.refused(ctx, v, inst.ID, handle, pluginapi.ConflictWrongType, "",
		fmt.Sprintf("attaching disk %s, which type %s cannot take, to instance %s", handle, typ, inst.ID))
}

// checkVolumeDetach: DetachVolume of an attached disk succeeds, and again
// (success while detaching, NotFound once detached); the attachment goes,
// detaching on the way; then DetachVolume answers NotFound.
func checkVolumeDetach(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	inst, handle, err := e.attached(ctx, v)
	if err != nil {
		return err
	}
	req := &pluginapi.DetachVolumeRequest{InstanceID: inst.ID, Driver: v.driver, VolumeHandle: handle}
	if _, err := v.c.DetachVolume(ctx, req); err != nil {
		return fmt.Errorf("detaching attached disk %s from instance %s failed: %w (%s)", handle, inst.ID, err, kindOf(err))
	}
	var errs []error
	if _, err := v.c.DetachVolume(ctx, req); err != nil && !pluginapi.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("detaching disk %s from instance %s a second time answered %w (%s); want success while it detaches, NotFound once it is detached",
			handle, inst.ID, err, kindOf(err)))
	}
	_, err = e.waitAttachment(ctx, v, inst.ID, handle, "detached",
		func(a *pluginapi.VolumeAttachment) bool { return a == nil },
		func(a *pluginapi.VolumeAttachment) error {
			if a != nil && a.State != pluginapi.AttachmentDetaching {
				return fmt.Errorf("after DetachVolume, DescribeVolumeAttachments shows disk %s on instance %s %s; want detaching, then absent", handle, inst.ID, a.State)
			}
			return nil
		})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if _, err := v.c.DetachVolume(ctx, req); !pluginapi.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("detaching disk %s from instance %s once detached answered %s (%s); want NotFound", handle, inst.ID, errText(err), kindOf(err)))
	}
	return errors.Join(errs...)
}

// checkVolumeRefusals: a volume call for a driver the plugin does not
// attach answers Unsupported naming the field FieldVolumeDriver, and one
// for an unknown instance NotFound.
func checkVolumeRefusals(ctx context.Context, e *env) error {
	v, err := e.volumes(ctx)
	if v == nil || err != nil {
		return err
	}
	var errs []error
	_, err = v.c.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: e.cfg.UnknownInstanceID, Driver: unknownDriver, VolumeHandle: probeVolume})
	if err := wantUnsupportedField(err, pluginapi.FieldVolumeDriver); err != nil {
		errs = append(errs, fmt.Errorf("AttachVolume for driver %s: %w", unknownDriver, err))
	}
	_, err = v.c.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: e.cfg.UnknownInstanceID, Driver: unknownDriver, VolumeHandle: probeVolume})
	if err := wantUnsupportedField(err, pluginapi.FieldVolumeDriver); err != nil {
		errs = append(errs, fmt.Errorf("DetachVolume for driver %s: %w", unknownDriver, err))
	}
	inst, err := e.runningInstance(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	handle, err := e.newVolume(ctx, inst.Zone)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	_, err = v.c.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: e.cfg.UnknownInstanceID, Driver: v.driver, VolumeHandle: handle})
	if !pluginapi.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("attaching disk %s to unknown instance %s answered %s (%s); want NotFound", handle, e.cfg.UnknownInstanceID, errText(err), kindOf(err)))
	}
	_, err = v.c.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: inst.ID, Driver: v.driver, VolumeHandle: handle})
	if !pluginapi.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("detaching disk %s from instance %s it was never attached to answered %s (%s); want NotFound", handle, inst.ID, errText(err), kindOf(err)))
	}
	return errors.Join(errs...)
}

// wantConflict checks that err is a VolumeConflict with reason, naming
// handle (if it names a disk) and other (if it names an instance).
func wantConflict(err error, reason pluginapi.VolumeConflictReason, handle, other string) error {
	var c *pluginapi.VolumeConflictError
	switch {
	case err == nil:
		return fmt.Errorf("it succeeded; want VolumeConflict %s", reason)
	case !errors.As(err, &c):
		return fmt.Errorf("it answered %w (%s); want VolumeConflict %s", err, kindOf(err), reason)
	case c.Reason != reason:
		return fmt.Errorf("it answered VolumeConflict %s (%w); want %s", c.Reason, err, reason)
	case c.VolumeHandle != "" && c.VolumeHandle != handle:
		return fmt.Errorf("it answered a VolumeConflict of disk %q (%w); want disk %s", c.VolumeHandle, err, handle)
	case c.InstanceID != "" && c.InstanceID != other:
		return fmt.Errorf("it answered a VolumeConflict naming instance %q (%w); want %q or none", c.InstanceID, err, other)
	}
	return nil
}

func wantUnsupportedField(err error, field string) error {
	var u *pluginapi.UnsupportedError
	switch {
	case err == nil:
		return fmt.Errorf("it succeeded; want Unsupported naming field %q", field)
	case !errors.As(err, &u):
		return fmt.Errorf("it answered %w (%s); want Unsupported naming field %q", err, kindOf(err), field)
	case u.Field != field:
		return fmt.Errorf("it answered Unsupported naming field %q (%w); want field %q", u.Field, err, field)
	}
	return nil
}

// refusedAttached is the failure of a refused AttachVolume that left an
// attachment, or nil.
func refusedAttached(a *pluginapi.VolumeAttachment) error {
	if a == nil {
		return nil
	}
	return fmt.Errorf("the refused AttachVolume left disk %s on instance %s %s; a refused AttachVolume attaches nothing", a.VolumeHandle, a.InstanceID, a.State)
}
