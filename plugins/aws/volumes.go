package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/kipcell/kip/pluginapi"
)

// VolumeDriver is the CSI driver whose volumes the plugin attaches: EBS
// volumes, whose PersistentVolume handle is the volume ID.
const VolumeDriver = "ebs.csi.aws.com"

// EBS error codes the volume calls tell apart (errors-overview.html).
const (
	codeVolumeNotFound     = "InvalidVolume.NotFound"
	codeVolumeMalformed    = "InvalidVolumeID.Malformed"
	codeVolumeInUse        = "VolumeInUse"
	codeZoneMismatch       = "InvalidVolume.ZoneMismatch"
	codeAttachmentLimit    = "AttachmentLimitExceeded"
	codeIncorrectState     = "IncorrectState"
	codeAttachmentNotFound = "InvalidAttachment.NotFound"
	codeInvalidParameter   = "InvalidParameterValue"
)

// nvmeByID is where udev links an EBS volume on a Nitro instance: the NVMe
// controller's model, then its serial, the volume ID without its dash. The
// EBS CSI node plugin looks there too.
const nvmeByID = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_"

// volumeDevice is how the agent finds an attached EBS volume: by its NVMe
// serial on a Nitro instance, else at the by-id path.
func volumeDevice(volumeID string) pluginapi.VolumeDevice {
	serial := strings.ReplaceAll(volumeID, "-", "")
	return pluginapi.VolumeDevice{Serial: serial, Path: nvmeByID + serial}
}

// deviceNames are the device names AttachVolume gives EBS volumes, in the
// order it tries them: /dev/xvdaa…/dev/xvdaz, /dev/xvdba…/dev/xvdbz,
// /dev/xvdda…/dev/xvddx, the two-letter names the EBS CSI driver's device
// allocator uses (aws-ebs-csi-driver pkg/cloud/devicemanager: it skips
// /dev/xvdc*, which some Windows types refuse, and EC2 takes nothing after
// /dev/xvddx in that series). On a Nitro instance the name is only a label
// in the API (the guest names NVMe devices itself), so any free one does;
// 76 names are more than any instance's attachment limit. An attachment
// at one of these names is the plugin's (DescribeVolumeAttachments): the
// root volume (/dev/xvda) and volumes a launch template attached at
// /dev/sd* or one-letter names are not.
var deviceNames = func() []string {
	var out []string
	for _, first := range "abd" {
		for second := 'a'; second <= 'z'; second++ {
			if first == 'd' && second > 'x' {
				break
			}
			out = append(out, "/dev/xvd"+string(first)+string(second))
		}
	}
	return out
}()

// attachTries is how many device names AttachVolume tries when EC2 says
// the one it chose is in use (a name another attachment just took, or one
// a detached volume left busy: "ebs-stuck-attaching").
const attachTries = 3

func isPluginDevice(name string) bool { return slices.Contains(deviceNames, name) }

// checkVolumeDriver refuses a driver other than VolumeDriver, as the SDK's
// server also does before the call reaches the plugin.
func checkVolumeDriver(driver string) error {
	if driver != VolumeDriver {
		return pluginapi.NewUnsupportedField(pluginapi.FieldVolumeDriver, "plugin %s attaches volumes of driver %q, not %q", Name, VolumeDriver, driver)
	}
	return nil
}

// AttachVolume attaches an EBS volume to an instance of the cluster with
// AttachVolume at a free device name. It describes the volume first: EC2
// refuses to attach a volume twice (VolumeInUse, even to the same
// instance), so an attachment to this instance already there is answered
// as it is, which makes the call idempotent. EBS has no read-only
// attachment: a read-only request is Unsupported (FieldReadOnly), and the
// host mounts read-only instead.
func (p *provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	if err := checkVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	if req.ReadOnly {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldReadOnly, "EBS attaches volumes read-write only; mount volume %s read-only instead", req.VolumeHandle)
	}
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		a, err := p.attach(ctx, cfg, req)
		if err == nil {
			cfg.recent.add(*a, p.Now())
			return &pluginapi.AttachVolumeResponse{Attachment: *a}, nil
		}
		if !errDeviceInUse(err) || try == attachTries {
			return nil, fmt.Errorf("attaching volume %s to instance %s: %w", req.VolumeHandle, req.InstanceID, mapVolumeError("AttachVolume", req.VolumeHandle, err))
		}
		p.Log.Info("device name in use; trying another", "instance", req.InstanceID, "volume", req.VolumeHandle, "error", err)
	}
}

// attach is one attempt of AttachVolume: describe, then attach at a free
// name. Its errors are the SDK's, unmapped.
func (p *provider) attach(ctx context.Context, cfg *config, req *pluginapi.AttachVolumeRequest) (*pluginapi.VolumeAttachment, error) {
	vol, err := cfg.volume(ctx, req.VolumeHandle)
	if err != nil {
		return nil, err
	}
	if a, done, err := existingAttachment(vol, req.InstanceID); done || err != nil {
		return a, err
	}
	// One attach at a time per instance, from the names in use to EC2's
	// answer, so that the host's parallel attaches to a cell choose
	// different names (the EBS CSI driver's device manager holds a lock
	// per node likewise).
	unlock := cfg.attachLocks.lock(req.InstanceID)
	defer unlock()
	used, err := cfg.devicesInUse(ctx, req.InstanceID)
	if err != nil {
		return nil, err
	}
	device := cfg.freeDevice(used)
	if device == "" {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, req.VolumeHandle, "",
			fmt.Sprintf("instance %s has no free device name among the %d the plugin uses", req.InstanceID, len(deviceNames)))
	}
	out, err := cfg.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{
		Device: aws.String(device), InstanceId: aws.String(req.InstanceID), VolumeId: aws.String(req.VolumeHandle),
	})
	switch {
	case errorCode(err) == codeVolumeInUse:
		// Attached meanwhile: by this call's lost earlier attempt (the
		// SDK retried), or to another instance. Describe again to know.
		vol, derr := cfg.volume(ctx, req.VolumeHandle)
		if derr != nil {
			return nil, derr
		}
		if a, done, aerr := existingAttachment(vol, req.InstanceID); done || aerr != nil {
			return a, aerr
		}
		return nil, err
	case errDeviceInUse(err):
		cfg.badDevices.Store(device, true)
		return nil, err
	case err != nil:
		return nil, err
	}
	p.Log.Info("volume attaching", "instance", req.InstanceID, "volume", req.VolumeHandle, "device", device)
	return &pluginapi.VolumeAttachment{
		InstanceID: req.InstanceID, Driver: VolumeDriver, VolumeHandle: req.VolumeHandle,
		State: attachmentState(out.State), Device: volumeDevice(req.VolumeHandle),
	}, nil
}

// existingAttachment is what AttachVolume answers for a volume already
// attached: the attachment when it is to instance (done), VolumeConflict
// in-use when it is to another, Transient while it detaches from this
// one (attach again once it is gone); nothing for a free volume.
func existingAttachment(vol *types.Volume, instance string) (*pluginapi.VolumeAttachment, bool, error) {
	id := aws.ToString(vol.VolumeId)
	for _, a := range vol.Attachments {
		other := aws.ToString(a.InstanceId)
		switch st := attachmentState(a.State); {
		case st == "":
			continue // detached
		case other != instance:
			return nil, true, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, id, other,
				fmt.Sprintf("volume %s is %s to instance %s", id, a.State, other))
		case st == pluginapi.AttachmentDetaching:
			return nil, true, pluginapi.NewTransient("volume %s is still detaching from instance %s; attach it again once it is detached", id, instance)
		default:
			return &pluginapi.VolumeAttachment{InstanceID: instance, Driver: VolumeDriver, VolumeHandle: id, State: st, Device: volumeDevice(id)}, true, nil
		}
	}
	return nil, false, nil
}

// DetachVolume detaches an EBS volume from an instance. It describes the
// volume first: one that is not attached to the instance is NotFound (done
// for the host), one detaching from it succeeds without asking EC2 again
// (EC2 refuses a second DetachVolume with IncorrectState), one at a device
// name the plugin does not use (the root volume) is refused. It never forces
// (DetachVolume's Force risks the file system; the host detaches only what
// the agent unmounted).
func (p *provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	if err := checkVolumeDriver(req.Driver); err != nil {
		return nil, err
	}
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	cfg.recent.remove(req.InstanceID, req.VolumeHandle)
	vol, err := cfg.volume(ctx, req.VolumeHandle)
	if err != nil {
		return nil, fmt.Errorf("detaching volume %s from instance %s: %w", req.VolumeHandle, req.InstanceID, mapVolumeError("DescribeVolumes", req.VolumeHandle, err))
	}
	var state pluginapi.AttachmentState
	var device string
	for _, a := range vol.Attachments {
		if aws.ToString(a.InstanceId) == req.InstanceID {
			state, device = attachmentState(a.State), aws.ToString(a.Device)
		}
	}
	switch {
	case state != "" && !isPluginDevice(device):
		// The root volume, or one the launch attached: not the plugin's to
		// take away from a running cell.
		return nil, fmt.Errorf("detaching volume %s from instance %s: it is attached at %s, which the plugin does not attach volumes at; refusing", req.VolumeHandle, req.InstanceID, device)
	case state == "":
		return nil, pluginapi.NewNotFound("volume %s is not attached to instance %s", req.VolumeHandle, req.InstanceID)
	case state == pluginapi.AttachmentDetaching:
		return &pluginapi.DetachVolumeResponse{}, nil
	}
	_, err = cfg.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(req.VolumeHandle), InstanceId: aws.String(req.InstanceID)})
	switch errorCode(err) {
	case "":
	case codeIncorrectState, codeAttachmentNotFound:
		// Detached (or detaching) since the describe above: EC2 answers
		// IncorrectState for a volume that is available or detaching, and
		// InvalidAttachment.NotFound once attached elsewhere.
		return nil, pluginapi.NewNotFound("volume %s is no longer attached to instance %s: %s", req.VolumeHandle, req.InstanceID, apiText("DetachVolume", err))
	default:
		return nil, fmt.Errorf("detaching volume %s from instance %s: %w", req.VolumeHandle, req.InstanceID, mapVolumeError("DetachVolume", req.VolumeHandle, err))
	}
	p.Log.Info("volume detaching", "instance", req.InstanceID, "volume", req.VolumeHandle)
	return &pluginapi.DetachVolumeResponse{}, nil
}

// DescribeVolumeAttachments lists the plugin's attachments (at its device
// names) to the instances, from DescribeVolumes filtered by
// attachment.instance-id, 200 instances a call, every page; and the
// attachments this process made that EC2 does not show yet, attaching,
// for the consistency window.
func (p *provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, id := range req.InstanceIDs {
		wanted[id] = true
	}
	resp := &pluginapi.DescribeVolumeAttachmentsResponse{}
	for batch := range slices.Chunk(slices.Compact(slices.Sorted(func(yield func(string) bool) {
		for id := range wanted {
			if !yield(id) {
				return
			}
		}
	})), describeBatch) {
		in := &ec2.DescribeVolumesInput{
			Filters:    []types.Filter{{Name: aws.String("attachment.instance-id"), Values: batch}},
			MaxResults: aws.Int32(500),
		}
		for pages := ec2.NewDescribeVolumesPaginator(cfg.ec2, in); pages.HasMorePages(); {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing the volumes attached to %d instances: %w", len(batch), mapError("DescribeVolumes", err))
			}
			for _, v := range page.Volumes {
				for _, a := range v.Attachments {
					inst, st := aws.ToString(a.InstanceId), attachmentState(a.State)
					if wanted[inst] && st != "" && isPluginDevice(aws.ToString(a.Device)) {
						id := aws.ToString(v.VolumeId)
						resp.Attachments = append(resp.Attachments, pluginapi.VolumeAttachment{
							InstanceID: inst, Driver: VolumeDriver, VolumeHandle: id, State: st, Device: volumeDevice(id),
						})
					}
				}
			}
		}
	}
	resp.Attachments = cfg.recent.merge(resp.Attachments, wanted, p.Now(), p.ConsistencyWindow)
	return resp, nil
}

// attachmentState maps EC2's attachment states to the contract's; ""
// for detached. EC2's busy is a detach the guest holds up.
func attachmentState(s types.VolumeAttachmentState) pluginapi.AttachmentState {
	switch s {
	case types.VolumeAttachmentStateAttaching:
		return pluginapi.AttachmentAttaching
	case types.VolumeAttachmentStateAttached:
		return pluginapi.AttachmentAttached
	case types.VolumeAttachmentStateDetaching, types.VolumeAttachmentStateBusy:
		return pluginapi.AttachmentDetaching
	}
	return ""
}

// volume describes one volume by ID.
func (cfg *config) volume(ctx context.Context, id string) (*types.Volume, error) {
	out, err := cfg.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	if err != nil {
		return nil, err
	}
	for i := range out.Volumes {
		if aws.ToString(out.Volumes[i].VolumeId) == id {
			return &out.Volumes[i], nil
		}
	}
	return nil, pluginapi.NewNotFound("volume %s does not exist", id)
}

// devicesInUse are the device names of every volume attached to the
// instance, the plugin's or not.
func (cfg *config) devicesInUse(ctx context.Context, instance string) (map[string]bool, error) {
	used := map[string]bool{}
	in := &ec2.DescribeVolumesInput{Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{instance}}}}
	for pages := ec2.NewDescribeVolumesPaginator(cfg.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range page.Volumes {
			for _, a := range v.Attachments {
				if aws.ToString(a.InstanceId) == instance {
					used[aws.ToString(a.Device)] = true
				}
			}
		}
	}
	return used, nil
}

// freeDevice is the first of deviceNames not in used, preferring names
// EC2 has not called in use before (as the EBS CSI driver's allocator
// keeps its "likely bad" names for last); "" when none is free.
func (cfg *config) freeDevice(used map[string]bool) string {
	var lastResort string
	for _, name := range deviceNames {
		switch _, bad := cfg.badDevices.Load(name); {
		case used[name]:
		case !bad:
			return name
		case lastResort == "":
			lastResort = name
		}
	}
	return lastResort
}

// errDeviceInUse reports EC2's refusal of a device name another
// attachment holds: InvalidParameterValue "Attachment point /dev/xvdf is
// already in use".
func errDeviceInUse(err error) bool {
	return errorCode(err) == codeInvalidParameter && strings.Contains(err.Error(), "already in use")
}

// mapVolumeError is mapError for the volume calls on volume handle: the
// conflicts become VolumeConflict, an unknown or malformed volume
// NotFound, a volume or instance not in a state to attach Transient.
func mapVolumeError(op, handle string, err error) error {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) && (pluginapi.IsNotFound(err) || pluginapi.IsVolumeConflict(err) || pluginapi.IsTransient(err)) {
		return err // the plugin's own answer, already of its kind
	}
	text := apiText(op, err)
	switch errorCode(err) {
	case codeVolumeInUse:
		return pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, handle, "", text)
	case codeZoneMismatch:
		return pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, handle, "", text)
	case codeAttachmentLimit:
		return pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, handle, "", text)
	case codeVolumeNotFound, codeVolumeMalformed:
		return pluginapi.NewNotFound("%s", text)
	case codeIncorrectState:
		// A volume still creating, an instance still pending: both pass.
		return pluginapi.NewTransient("%s", text)
	}
	return mapError(op, err)
}

// keyedLocks are mutexes by key, each kept while someone holds or waits
// for it.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		defer k.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
	}
}

// recentAttachments are the attachments AttachVolume answered, kept so
// that DescribeVolumeAttachments shows them, attaching, until EC2 does
// (DescribeVolumes is eventually consistent, as DescribeInstances is) or
// the consistency window has passed.
type recentAttachments struct {
	mu sync.Mutex
	at map[[2]string]recentAttachment // [instance, volume]
}

type recentAttachment struct {
	a    pluginapi.VolumeAttachment
	when time.Time
}

func (r *recentAttachments) add(a pluginapi.VolumeAttachment, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[[2]string]recentAttachment{}
	}
	if _, ok := r.at[[2]string{a.InstanceID, a.VolumeHandle}]; !ok {
		r.at[[2]string{a.InstanceID, a.VolumeHandle}] = recentAttachment{a: a, when: now}
	}
}

func (r *recentAttachments) remove(instance, volume string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.at, [2]string{instance, volume})
}

// merge adds to seen the recent attachments to the wanted instances that
// seen lacks and that are younger than window, as attaching, and forgets
// those seen or too old.
func (r *recentAttachments) merge(seen []pluginapi.VolumeAttachment, wanted map[string]bool, now time.Time, window time.Duration) []pluginapi.VolumeAttachment {
	r.mu.Lock()
	defer r.mu.Unlock()
	shown := map[[2]string]bool{}
	for _, a := range seen {
		shown[[2]string{a.InstanceID, a.VolumeHandle}] = true
	}
	for k, ra := range r.at {
		switch {
		case shown[k] || now.Sub(ra.when) > window:
			delete(r.at, k)
		case wanted[k[0]]:
			a := ra.a
			a.State = pluginapi.AttachmentAttaching
			seen = append(seen, a)
		}
	}
	return seen
}
