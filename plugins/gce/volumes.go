package gce

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
)

// Persistent disks (pluginapi.VolumeAttacher). The plugin attaches the
// zonal persistent disks of the Compute Engine PD CSI driver's
// PersistentVolumes to its instances, as that driver's controller does
// (ControllerPublishVolume: instances.attachDisk with the disk's name as
// its device name, then the operation), so that a disk the driver
// provisioned reaches a cell:
//
//   - The volume handle is the driver's volume ID,
//     projects/<project>/zones/<zone>/disks/<name>. A regional disk
//     (projects/<p>/regions/<r>/disks/<name>) is Unsupported: the plugin
//     does not attach regional disks.
//   - The device name is the disk's name, so the instance's guest (Google's
//     udev rules) links the disk at /dev/disk/by-id/google-<name>, the path
//     the PD CSI node plugin looks for and the Device.Path answered. No
//     Serial is answered: a SCSI persistent disk has no serial file in
//     sysfs (its device name is in the SCSI VPD page, which the udev rules
//     read), and an NVMe one's serial is the controller's, not the disk's.
//   - A read-only attachment is offered: mode READ_ONLY, which Compute
//     Engine allows on several instances at once (never beside a
//     READ_WRITE one).
//   - attachDisk and detachDisk are zonal operations. AttachVolume and
//     DetachVolume wait for theirs for up to volumeOpWait (a few seconds
//     on Compute Engine; defaultVolumeOpWait), so that what the operation refuses (a disk in use
//     elsewhere, the attachment limit) is the call's error; an operation
//     still running then is answered attaching or detaching, and
//     remembered (pending) so that DescribeVolumeAttachments shows it so
//     until the instance does, as the contract asks. After a restart the
//     memory is gone: an attach under way is found by the next
//     AttachVolume (Compute Engine refuses a second attach of the disk to
//     the same instance, which is answered attaching), and a detach under
//     way shows as attached until it is done.

// VolumeDriver is the CSI driver whose volumes the plugin attaches: the
// Compute Engine persistent disk CSI driver.
const VolumeDriver = "pd.csi.storage.gke.io"

// defaultVolumeOpWait bounds how long AttachVolume and DetachVolume wait
// for their operation before they answer it under way; a field of
// provider (volumeOpWait) so that tests can shorten it.
const defaultVolumeOpWait = 10 * time.Second

// Compute Engine's refusals of an attach (instances.attachDisk's HTTP
// errors, or its operation's error.errors[].code).
const (
	codeInUse        = "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
	reasonInUse      = "resourceInUseByAnotherResource"
	codeLimit        = "LIMIT_EXCEEDED"
	reasonNotReady   = "resourceNotReady"
	limitMetricInMsg = "maximum_persistent_disks"
	// codeUnsupported is the operation error of an attachDisk whose disk
	// type the machine type cannot take (a pd-* disk on a Hyperdisk-only
	// series such as N4, pd-standard on C3), with the message
	// "[pd-standard] features are not compatible for creating instance"
	// (the PD CSI driver reads the same: pkg/gce-cloud-provider/compute/
	// gce-compute.go, pdDiskTypeUnsupportedPattern).
	codeUnsupported = "UNSUPPORTED_OPERATION"
)

// diskTypeUnsupportedRE reads the disk type out of an
// UNSUPPORTED_OPERATION's message.
var diskTypeUnsupportedRE = regexp.MustCompile(`\[([a-z0-9-]+)\] features are not compatible for creating instance`)

// handleRE reads a PD CSI volume handle.
var handleRE = regexp.MustCompile(`^projects/([^/]+)/(zones|regions)/([^/]+)/disks/([^/]+)$`)

// inUseByRE finds the instance a disk is in use by in Compute Engine's
// message: "The disk resource '…' is already being used by
// 'projects/p/zones/z/instances/i'".
var inUseByRE = regexp.MustCompile(`being used by '(?:.*/)?zones/([^/]+)/instances/([^/']+)'`)

// diskRef is a zonal disk named by its handle.
type diskRef struct{ project, zone, name string }

func (d diskRef) handle() string {
	return "projects/" + d.project + "/zones/" + d.zone + "/disks/" + d.name
}

// parseHandle reads a volume handle: NotFound for one of no known shape
// (it names no disk), Unsupported for a regional disk.
func parseHandle(h string) (diskRef, error) {
	m := handleRE.FindStringSubmatch(h)
	switch {
	case m == nil:
		return diskRef{}, pluginapi.NewNotFound("disk %q: a %s volume handle is projects/<project>/zones/<zone>/disks/<name>", h, VolumeDriver)
	case m[2] == "regions":
		return diskRef{}, pluginapi.NewUnsupported("disk %s is a regional persistent disk; the plugin attaches zonal disks", h)
	}
	return diskRef{project: m[1], zone: m[3], name: m[4]}, nil
}

// diskOfSource is the disk an attached disk's source URL names, or false.
func diskOfSource(source string) (diskRef, bool) {
	i := strings.Index(source, "projects/")
	if i < 0 {
		return diskRef{}, false
	}
	m := handleRE.FindStringSubmatch(source[i:])
	if m == nil || m[2] != "zones" {
		return diskRef{}, false
	}
	return diskRef{project: m[1], zone: m[3], name: m[4]}, true
}

// devicePath is where the instance's guest links a disk attached with
// deviceName.
func devicePath(deviceName string) string { return "/dev/disk/by-id/google-" + deviceName }

func checkDriver(driver string) error {
	if driver != VolumeDriver {
		return pluginapi.NewUnsupportedField(pluginapi.FieldVolumeDriver, "driver %q: the plugin attaches %s volumes", driver, VolumeDriver)
	}
	return nil
}

// volumeInstance checks what AttachVolume and DetachVolume check first:
// the configuration, the driver (Unsupported but VolumeDriver) and the
// instance ID, whose zone and name it returns (NotFound when malformed:
// no instance has it).
func (p *provider) volumeInstance(driver, instanceID string) (*config, string, string, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, "", "", err
	}
	if err := checkDriver(driver); err != nil {
		return nil, "", "", err
	}
	zone, name, ok := parseID(instanceID)
	if !ok {
		return nil, "", "", pluginapi.NewNotFound("instance %q", instanceID)
	}
	return cfg, zone, name, nil
}

// pendingKey names an attachment under way: instance ID and handle.
type pendingKey struct{ instance, handle string }

// pendingOp is an attach or detach answered before its operation was
// DONE.
type pendingOp struct {
	detach   bool
	zone, op string
	readOnly bool
	at       time.Time
	doneAt   time.Time // zero until the operation was seen DONE
	failed   bool
}

// pendingOps are the attaches and detaches under way that this process
// answered.
type pendingOps struct {
	mu  sync.Mutex
	ops map[pendingKey]*pendingOp
}

func newPendingOps() *pendingOps { return &pendingOps{ops: map[pendingKey]*pendingOp{}} }

func (p *pendingOps) get(k pendingKey) (pendingOp, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	op, ok := p.ops[k]
	if !ok {
		return pendingOp{}, false
	}
	return *op, true
}

func (p *pendingOps) put(k pendingKey, op pendingOp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ops[k] = &op
}

func (p *pendingOps) drop(k pendingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ops, k)
}

// of returns the pending operations of an instance.
func (p *pendingOps) of(instance string) map[pendingKey]pendingOp {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[pendingKey]pendingOp{}
	for k, op := range p.ops {
		if k.instance == instance {
			out[k] = *op
		}
	}
	return out
}

// settle records what an operation list said of the pending operation k.
func (p *pendingOps) settle(k pendingKey, op *computepb.Operation, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.ops[k]
	if cur == nil || cur.op != op.GetName() || op.GetStatus() != computepb.Operation_DONE {
		return
	}
	if cur.doneAt.IsZero() {
		cur.doneAt = now
	}
	cur.failed = opError(op.GetName(), op) != nil
}

// attachment is the contract's view of an instance's attached disk.
func attachment(instanceID string, d *computepb.AttachedDisk, ref diskRef, state pluginapi.AttachmentState) pluginapi.VolumeAttachment {
	return pluginapi.VolumeAttachment{
		InstanceID: instanceID, Driver: VolumeDriver, VolumeHandle: ref.handle(), State: state,
		ReadOnly: d.GetMode() == computepb.AttachedDisk_READ_ONLY.String(),
		Device:   pluginapi.VolumeDevice{Path: devicePath(d.GetDeviceName())},
	}
}

// attachedDisk is the instance's attached disk ref, or nil.
func attachedDisk(in *computepb.Instance, ref diskRef) *computepb.AttachedDisk {
	for _, d := range in.GetDisks() {
		if got, ok := diskOfSource(d.GetSource()); ok && !d.GetBoot() && got == ref {
			return d
		}
	}
	return nil
}

// AttachVolume attaches a zonal persistent disk to an instance with
// instances.attachDisk (device name: the disk's name; mode READ_ONLY when
// asked) and waits up to volumeOpWait for its operation. Idempotent: a
// disk the instance shows, or one whose attach this process answered,
// is answered as it is. A disk of another zone than the instance's is
// refused (wrong-zone) without an attachDisk.
func (p *provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	cfg, zone, name, err := p.volumeInstance(req.Driver, req.InstanceID)
	if err != nil {
		return nil, err
	}
	ref, err := parseHandle(req.VolumeHandle)
	if err != nil {
		return nil, err
	}
	log := p.Log.With("instance", req.InstanceID, "disk", req.VolumeHandle)
	in, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: zone, Instance: name})
	if err != nil {
		return nil, fmt.Errorf("attaching disk %s: %w", req.VolumeHandle, mapError("instances.get", err))
	}
	if ref.zone != zone {
		// Compute Engine refuses it too (400 invalid, "same zone"); said
		// here without the call.
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, req.VolumeHandle, "",
			fmt.Sprintf("disk %s is in zone %s, instance %s in zone %s", req.VolumeHandle, ref.zone, req.InstanceID, zone))
	}
	key := pendingKey{req.InstanceID, req.VolumeHandle}
	pending, isPending := cfg.volumes.get(key)
	if d := attachedDisk(in, ref); d != nil {
		if isPending && pending.detach && !pending.failed {
			return nil, pluginapi.NewTransient("disk %s is detaching from instance %s; attach it again once it is detached", req.VolumeHandle, req.InstanceID)
		}
		cfg.volumes.drop(key)
		return &pluginapi.AttachVolumeResponse{Attachment: attachment(req.InstanceID, d, ref, pluginapi.AttachmentAttached)}, nil
	}
	attaching := pluginapi.VolumeAttachment{
		InstanceID: req.InstanceID, Driver: VolumeDriver, VolumeHandle: req.VolumeHandle, State: pluginapi.AttachmentAttaching,
		ReadOnly: req.ReadOnly, Device: pluginapi.VolumeDevice{Path: devicePath(ref.name)},
	}
	if isPending && !pending.detach && !pending.failed {
		attaching.ReadOnly = pending.readOnly
		return &pluginapi.AttachVolumeResponse{Attachment: attaching}, nil
	}

	mode := computepb.AttachedDisk_READ_WRITE.String()
	if req.ReadOnly {
		mode = computepb.AttachedDisk_READ_ONLY.String()
	}
	op, err := cfg.clients.instances.AttachDisk(ctx, &computepb.AttachDiskInstanceRequest{
		Project: cfg.project, Zone: zone, Instance: name,
		AttachedDiskResource: &computepb.AttachedDisk{
			Source: proto.String(ref.handle()), DeviceName: proto.String(ref.name), Mode: proto.String(mode),
			// The disk outlives the instance: the PV's reclaim policy, not
			// the cell's end, decides when it goes.
			AutoDelete: proto.Bool(false), Type: proto.String(computepb.AttachedDisk_PERSISTENT.String()),
		},
	})
	if err != nil {
		if attachingAlready(err, req.InstanceID) {
			cfg.volumes.put(key, p.attachFound(zone, req.ReadOnly))
			return &pluginapi.AttachVolumeResponse{Attachment: attaching}, nil
		}
		return nil, attachError(err, req)
	}
	cfg.volumes.put(key, pendingOp{zone: zone, op: op.Name(), readOnly: req.ReadOnly, at: p.Now()})
	log.Info("attaching disk", "operation", op.Name(), "mode", mode)
	done, err := p.waitVolumeOp(ctx, cfg, zone, op.Name())
	switch {
	case err != nil:
		return nil, fmt.Errorf("attaching disk %s: waiting for operation %s: %w", req.VolumeHandle, op.Name(), err)
	case done == nil:
		return &pluginapi.AttachVolumeResponse{Attachment: attaching}, nil
	}
	if err := opError("instances.attachDisk", done); err != nil {
		cfg.volumes.drop(key)
		if attachingAlready(err, req.InstanceID) {
			cfg.volumes.put(key, p.attachFound(zone, req.ReadOnly))
			return &pluginapi.AttachVolumeResponse{Attachment: attaching}, nil
		}
		return nil, attachError(err, req)
	}
	cfg.volumes.settle(key, done, p.Now())
	attaching.State = pluginapi.AttachmentAttached
	return &pluginapi.AttachVolumeResponse{Attachment: attaching}, nil
}

// attachFound is the pending attach of a disk Compute Engine says is
// already attaching to the instance (an attach an earlier process
// started): its operation is not known, so it is shown attaching for
// ConsistencyWindow, as one seen DONE now, and the host's next
// AttachVolume finds it again if it takes longer.
func (p *provider) attachFound(zone string, readOnly bool) pendingOp {
	now := p.Now()
	return pendingOp{zone: zone, readOnly: readOnly, at: now, doneAt: now}
}

// waitVolumeOp waits up to volumeOpWait for a zone operation: the
// operation once DONE, nil if it still runs then, or ctx's error.
func (p *provider) waitVolumeOp(ctx context.Context, cfg *config, zone, name string) (*computepb.Operation, error) {
	wctx, cancel := context.WithTimeout(ctx, p.volumeOpWait)
	defer cancel()
	op, err := p.wait(wctx, cfg, zone, name)
	switch {
	case err == nil:
		return op, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case wctx.Err() != nil:
		return nil, nil
	}
	return nil, mapError("zoneOperations.wait", err)
}

// attachingAlready reports whether Compute Engine refused an attach
// because the disk is attaching (or attached) to that very instance: in
// use by it, or its device name (the disk's name) taken on it.
func attachingAlready(err error, instanceID string) bool {
	if other, ok := inUseBy(err); ok {
		return other == instanceID
	}
	ge, reason, ok := apiError(err)
	return ok && ge.Code == 400 && reason == "invalid" && strings.Contains(ge.Message, "deviceName") && strings.Contains(ge.Message, "already in use")
}

// inUseBy reports whether err says the disk is in use, and by which
// instance (its ID; "" when the message does not say).
func inUseBy(err error) (string, bool) {
	var msg string
	var oe *operationError
	if errors.As(err, &oe) && oe.code == codeInUse {
		msg = oe.message
	} else if ge, reason, ok := apiError(err); ok && reason == reasonInUse {
		msg = ge.Message
	} else {
		return "", false
	}
	if m := inUseByRE.FindStringSubmatch(msg); m != nil {
		return instanceID(m[1], m[2]), true
	}
	return "", true
}

// attachError maps a refused attach to the contract's kinds.
func attachError(err error, req *pluginapi.AttachVolumeRequest) error {
	if other, ok := inUseBy(err); ok {
		return pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, req.VolumeHandle, other, err.Error())
	}
	var oe *operationError
	if errors.As(err, &oe) && (oe.code == codeLimit || strings.Contains(oe.message, limitMetricInMsg)) {
		return pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, req.VolumeHandle, "", err.Error())
	}
	if errors.As(err, &oe) && oe.code == codeUnsupported {
		if m := diskTypeUnsupportedRE.FindStringSubmatch(oe.message); m != nil {
			return pluginapi.NewVolumeWrongType(req.VolumeHandle, m[1], err.Error())
		}
	}
	return volumeCallError(err, fmt.Sprintf("attaching disk %s to instance %s", req.VolumeHandle, req.InstanceID), "instances.attachDisk",
		func(message string) error {
			if strings.Contains(message, "same zone") {
				return pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, req.VolumeHandle, "", err.Error())
			}
			return nil
		})
}

// volumeCallError maps the HTTP refusal of an attachDisk or detachDisk
// (what says which) that attachError and detachError do not read
// themselves: a 400 invalid that invalid maps (nil: not one it knows), a
// disk still being created or an instance busy with another operation
// (resourceNotReady) Transient, for the host to retry; anything else as
// mapError maps call's errors.
func volumeCallError(err error, what, call string, invalid func(message string) error) error {
	if ge, reason, ok := apiError(err); ok {
		if reason == "invalid" {
			if kind := invalid(ge.Message); kind != nil {
				return kind
			}
		}
		if reason == reasonNotReady {
			return pluginapi.NewTransient("%s: %s", what, ge.Message)
		}
	}
	return fmt.Errorf("%s: %w", what, mapError(call, err))
}

// DetachVolume detaches a disk with instances.detachDisk (by the device
// name the instance shows for it) and waits up to volumeOpWait for its
// operation. A detach this process answered and that still runs succeeds
// again without a call; a disk the instance does not show is NotFound,
// unless this process is attaching it (Transient: detach it once
// attached).
func (p *provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	cfg, zone, name, err := p.volumeInstance(req.Driver, req.InstanceID)
	if err != nil {
		return nil, err
	}
	ref, err := parseHandle(req.VolumeHandle)
	if err != nil {
		if pluginapi.IsUnsupported(err) {
			// A regional disk was never attached by this plugin.
			return nil, pluginapi.NewNotFound("%v", err)
		}
		return nil, err
	}
	in, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: zone, Instance: name})
	if err != nil {
		return nil, fmt.Errorf("detaching disk %s: %w", req.VolumeHandle, mapError("instances.get", err))
	}
	key := pendingKey{req.InstanceID, req.VolumeHandle}
	pending, isPending := cfg.volumes.get(key)
	d := attachedDisk(in, ref)
	switch {
	case d == nil && isPending && !pending.detach && !pending.failed:
		return nil, pluginapi.NewTransient("disk %s is attaching to instance %s; detach it once it is attached", req.VolumeHandle, req.InstanceID)
	case d == nil:
		cfg.volumes.drop(key)
		return nil, pluginapi.NewNotFound("disk %s is not attached to instance %s", req.VolumeHandle, req.InstanceID)
	case isPending && pending.detach && !pending.failed:
		return &pluginapi.DetachVolumeResponse{}, nil
	}
	op, err := cfg.clients.instances.DetachDisk(ctx, &computepb.DetachDiskInstanceRequest{Project: cfg.project, Zone: zone, Instance: name, DeviceName: d.GetDeviceName()})
	if err != nil {
		return nil, detachError(err, req)
	}
	cfg.volumes.put(key, pendingOp{detach: true, zone: zone, op: op.Name(), at: p.Now()})
	p.Log.Info("detaching disk", "instance", req.InstanceID, "disk", req.VolumeHandle, "operation", op.Name())
	done, err := p.waitVolumeOp(ctx, cfg, zone, op.Name())
	switch {
	case err != nil:
		return nil, fmt.Errorf("detaching disk %s: waiting for operation %s: %w", req.VolumeHandle, op.Name(), err)
	case done == nil:
		return &pluginapi.DetachVolumeResponse{}, nil
	}
	if err := opError("instances.detachDisk", done); err != nil {
		cfg.volumes.drop(key)
		return nil, detachError(err, req)
	}
	cfg.volumes.settle(key, done, p.Now())
	return &pluginapi.DetachVolumeResponse{}, nil
}

// detachError maps a refused detach to the contract's kinds: no such
// device on the instance is NotFound (detached already), an instance busy
// with another operation (an attach or detach under way) Transient.
func detachError(err error, req *pluginapi.DetachVolumeRequest) error {
	return volumeCallError(err, fmt.Sprintf("detaching disk %s from instance %s", req.VolumeHandle, req.InstanceID), "instances.detachDisk",
		func(message string) error {
			if strings.Contains(message, "No attached disk") {
				return pluginapi.NewNotFound("disk %s is not attached to instance %s: %s", req.VolumeHandle, req.InstanceID, message)
			}
			return nil
		})
}

// DescribeVolumeAttachments reads each instance with instances.get: its
// disks other than the boot disk are attached, or detaching while a
// detach this process answered runs; the attaches this process answered
// that the instance does not show yet are attaching, until their
// operation failed, or ConsistencyWindow after it was DONE. An operation
// under way is read with one zoneOperations.list per instance.
func (p *provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	out := &pluginapi.DescribeVolumeAttachmentsResponse{}
	for _, id := range req.InstanceIDs {
		zone, name, ok := parseID(id)
		if !ok {
			continue
		}
		in, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: zone, Instance: name})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describing the disks of instance %s: %w", id, mapError("instances.get", err))
		}
		pending := cfg.volumes.of(id)
		if err := p.settlePending(ctx, cfg, zone, pending); err != nil {
			return nil, fmt.Errorf("describing the disks of instance %s: %w", id, err)
		}
		pending = cfg.volumes.of(id)
		shown := map[string]bool{}
		for _, d := range in.GetDisks() {
			ref, ok := diskOfSource(d.GetSource())
			if d.GetBoot() || !ok {
				continue
			}
			key := pendingKey{id, ref.handle()}
			shown[key.handle] = true
			state := pluginapi.AttachmentAttached
			switch op, ok := pending[key]; {
			case ok && op.detach && !op.failed:
				state = pluginapi.AttachmentDetaching
			case ok && !op.detach:
				cfg.volumes.drop(key) // the instance shows it
			}
			out.Attachments = append(out.Attachments, attachment(id, d, ref, state))
		}
		for key, op := range pending {
			switch {
			case shown[key.handle]:
			case op.detach || op.failed || !op.doneAt.IsZero() && p.Now().Sub(op.doneAt) > p.ConsistencyWindow:
				cfg.volumes.drop(key)
			default:
				ref, _ := parseHandle(key.handle)
				out.Attachments = append(out.Attachments, pluginapi.VolumeAttachment{
					InstanceID: id, Driver: VolumeDriver, VolumeHandle: key.handle, State: pluginapi.AttachmentAttaching,
					ReadOnly: op.readOnly, Device: pluginapi.VolumeDevice{Path: devicePath(ref.name)},
				})
			}
		}
	}
	return out, nil
}

// settlePending reads the operations of pending not yet seen DONE with
// one zoneOperations.list.
func (p *provider) settlePending(ctx context.Context, cfg *config, zone string, pending map[pendingKey]pendingOp) error {
	var names []string
	byName := map[string]pendingKey{}
	for k, op := range pending {
		if op.doneAt.IsZero() {
			names = append(names, op.op)
			byName[op.op] = k
		}
	}
	if len(names) == 0 {
		return nil
	}
	ops, err := p.listOps(ctx, cfg, zone, names)
	if err != nil {
		return mapError("zoneOperations.list", err)
	}
	for _, op := range ops {
		if k, ok := byName[op.GetName()]; ok {
			cfg.volumes.settle(k, op, p.Now())
		}
	}
	return nil
}
