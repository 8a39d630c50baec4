package fake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// VolumeDriver is the CSI driver whose volumes the fake attaches: the only
// one in its GetInfoResponse.VolumeDrivers.
const VolumeDriver = "fake.csi.kipcell.io"

// DefaultAttachmentLimit is how many disks a Store attaches to one instance
// until SetAttachmentLimit says otherwise (EC2's Nitro instances share 28
// slots between disks and network interfaces).
const DefaultAttachmentLimit = 26

// volume is one disk of the simulated cloud.
type volume struct {
	Handle string `json:"handle"`
	Zone   string `json:"zone"`
	// Type and RefusedBy: a disk made by CreateTypedVolume, of a type the
	// instance types RefusedBy cannot take.
	Type      string   `json:"type,omitempty"`
	RefusedBy []string `json:"refusedBy,omitempty"`
	// Attachment is nil while the disk is attached nowhere.
	Attachment *attachment `json:"attachment,omitempty"`
}

// attachment is a disk's attachment to one instance.
type attachment struct {
	InstanceID string                    `json:"instanceID"`
	Driver     string                    `json:"driver"`
	State      pluginapi.AttachmentState `json:"state"`
	// DoneAt is when an attaching disk is attached, or a detaching one
	// gone.
	DoneAt time.Time `json:"doneAt"`
}

// CreateVolume creates a disk in zone, attached nowhere, and returns its
// handle ("vol-00000001"), as a PersistentVolume's spec.csi.volumeHandle
// names it.
func (s *Store) CreateVolume(zone string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextVolume++
	handle := fmt.Sprintf("vol-%08d", s.nextVolume)
	s.volumes[handle] = &volume{Handle: handle, Zone: zone}
	_ = s.persistLocked() // the store's state file is a convenience; CreateVolume has no error to report
	return handle
}

// CreateTypedVolume creates a disk of diskType in zone, as CreateVolume
// does, that instances of the types refusedBy cannot take: AttachVolume to
// one answers a VolumeConflictError with pluginapi.ConflictWrongType
// naming diskType, as Compute Engine refuses a pd-standard disk on an N4
// machine.
func (s *Store) CreateTypedVolume(zone, diskType string, refusedBy ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextVolume++
	handle := fmt.Sprintf("vol-%08d", s.nextVolume)
	s.volumes[handle] = &volume{Handle: handle, Zone: zone, Type: diskType, RefusedBy: slices.Clone(refusedBy)}
	_ = s.persistLocked() // as CreateVolume
	return handle
}

// DeleteVolume deletes a disk. It returns a NotFoundError for an unknown
// handle and a VolumeConflictError (pluginapi.ConflictInUse) for a disk
// still attached, attaching or detaching, as EC2's DeleteVolume refuses a
// volume in use.
func (s *Store) DeleteVolume(handle string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[handle]
	if !ok {
		return pluginapi.NewNotFound("volume %s", handle)
	}
	if a := v.Attachment; a != nil {
		return pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, handle, a.InstanceID,
			fmt.Sprintf("volume %s is %s to instance %s", handle, a.State, a.InstanceID))
	}
	delete(s.volumes, handle)
	return s.persistLocked()
}

// Volumes returns the handles of every disk in the store, sorted.
func (s *Store) Volumes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.volumes))
	for h := range s.volumes {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// VolumeAttachments returns every attachment in the store, of every
// cluster, sorted by instance and handle, as the cloud last recorded them
// (an attaching disk whose delay has passed shows attached at the next
// volume call).
func (s *Store) VolumeAttachments() []pluginapi.VolumeAttachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pluginapi.VolumeAttachment
	for _, v := range s.volumes {
		if v.Attachment != nil {
			out = append(out, v.attachmentInfo())
		}
	}
	sortAttachments(out)
	return out
}

// SetAttachmentLimit sets how many disks one instance can have attached,
// attaching or detaching; AttachVolume past it answers a
// VolumeConflictError with pluginapi.ConflictAttachmentLimit.
func (s *Store) SetAttachmentLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attachLimit = n
}

// attachmentInfo is v's attachment as the contract shows it; v must be
// attached.
func (v *volume) attachmentInfo() pluginapi.VolumeAttachment {
	return pluginapi.VolumeAttachment{
		InstanceID:   v.Attachment.InstanceID,
		Driver:       v.Attachment.Driver,
		VolumeHandle: v.Handle,
		State:        v.Attachment.State,
		// EC2's NVMe disks show the volume ID without its dash as their
		// serial.
		Device: pluginapi.VolumeDevice{Serial: strings.ReplaceAll(v.Handle, "-", "")},
	}
}

// advanceVolumesLocked moves every attaching disk whose delay has passed to
// attached, and forgets the attachment of every detaching one.
func (s *Store) advanceVolumesLocked(now time.Time) (changed bool) {
	for _, v := range s.volumes {
		a := v.Attachment
		if a == nil || now.Before(a.DoneAt) {
			continue
		}
		switch a.State {
		case pluginapi.AttachmentAttaching:
			a.State = pluginapi.AttachmentAttached
			changed = true
		case pluginapi.AttachmentDetaching:
			v.Attachment = nil
			changed = true
		}
	}
	return changed
}

// detachAllLocked forgets the attachments of an instance that ended, as
// EC2 detaches a terminated instance's volumes.
func (s *Store) detachAllLocked(instanceID string) {
	for _, v := range s.volumes {
		if v.Attachment != nil && v.Attachment.InstanceID == instanceID {
			v.Attachment = nil
		}
	}
}

// attachedCountLocked is how many slots of instanceID are taken.
func (s *Store) attachedCountLocked(instanceID string) int {
	n := 0
	for _, v := range s.volumes {
		if v.Attachment != nil && v.Attachment.InstanceID == instanceID {
			n++
		}
	}
	return n
}

func sortAttachments(as []pluginapi.VolumeAttachment) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].InstanceID != as[j].InstanceID {
			return as[i].InstanceID < as[j].InstanceID
		}
		return as[i].VolumeHandle < as[j].VolumeHandle
	})
}

// checkVolumeDriver answers a volume call for a driver the fake does not
// attach, or without CapabilityVolumes, as the SDK's server would.
func (p *Provider) checkVolumeDriver(driver string) error {
	info := &pluginapi.GetInfoResponse{Name: p.name, Capabilities: p.capabilities, VolumeDrivers: p.volumeDrivers()}
	return info.CheckVolumeDriver(driver)
}

// volumeDrivers is VolumeDrivers of GetInfo: VolumeDriver with
// CapabilityVolumes, else none.
func (p *Provider) volumeDrivers() []string {
	if slices.Contains(p.capabilities, pluginapi.CapabilityVolumes) {
		return []string{VolumeDriver}
	}
	return nil
}

// instanceForVolumeLocked returns the cluster's instance id, or the error a
// volume call answers for it: NotFound for an instance the cluster does
// not have or that has ended.
func (s *Store) instanceForVolumeLocked(cluster, id string) (*record, error) {
	r, ok := s.instances[id]
	if !ok || r.ClusterID != cluster {
		return nil, pluginapi.NewNotFound("instance %s", id)
	}
	if st := r.Instance.State; st == pluginapi.StateTerminating || st == pluginapi.StateTerminated {
		return nil, pluginapi.NewNotFound("instance %s is %s", id, st)
	}
	return r, nil
}

// AttachVolume attaches a disk Store.CreateVolume made to an instance of
// the configured cluster, as EC2 does: the answer is attaching, attached
// after the provider's attach delay (WithAttachDelay; at once without
// one), with the device serial EC2's NVMe disks show. Attaching a disk
// attaching or attached to the same instance answers that attachment.
// Errors: Unsupported (FieldVolumeDriver) for a driver but VolumeDriver,
// or without CapabilityVolumes; Unsupported (FieldReadOnly) for a
// read-only attachment, which EC2 does not offer; NotFound for an unknown
// or ended instance or disk; Transient for a pending instance (EC2 attaches
// to running or stopped ones) or a disk still detaching from this one;
// VolumeConflict ConflictInUse for a disk attached to another instance,
// ConflictWrongZone for a disk in another zone than the instance,
// ConflictWrongType for a disk CreateTypedVolume made that the instance's
// type cannot take, and ConflictAttachmentLimit past the store's limit
// (SetAttachmentLimit).
func (p *Provider) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	cluster, err := p.begin(ctx, "AttachVolume", copyPtr(req), true)
	if err != nil {
		return nil, err
	}
	if err := p.checkVolumeDriver(req.Driver); err != nil {
		return nil, fmt.Errorf("attaching volume %s: %w", req.VolumeHandle, err)
	}
	if req.ReadOnly {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldReadOnly, "the fake, like EC2, attaches disks read-write only")
	}
	now := p.clock()
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceVolumesLocked(now)
	r, err := s.instanceForVolumeLocked(cluster, req.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("attaching volume %s: %w", req.VolumeHandle, err)
	}
	v, ok := s.volumes[req.VolumeHandle]
	if !ok {
		return nil, pluginapi.NewNotFound("volume %s", req.VolumeHandle)
	}
	if a := v.Attachment; a != nil {
		switch {
		case a.InstanceID != req.InstanceID:
			return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictInUse, v.Handle, a.InstanceID,
				fmt.Sprintf("volume %s is %s to instance %s", v.Handle, a.State, a.InstanceID))
		case a.State == pluginapi.AttachmentDetaching:
			return nil, pluginapi.NewTransient("volume %s is detaching from instance %s; attach it again once it is detached", v.Handle, a.InstanceID)
		}
		return &pluginapi.AttachVolumeResponse{Attachment: v.attachmentInfo()}, nil
	}
	if r.Instance.State == pluginapi.StatePending {
		return nil, pluginapi.NewTransient("instance %s is pending; a disk attaches to a running instance", r.Instance.ID)
	}
	if v.Zone != r.Instance.Zone {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictWrongZone, v.Handle, "",
			fmt.Sprintf("volume %s is in zone %s, instance %s in %s", v.Handle, v.Zone, r.Instance.ID, r.Instance.Zone))
	}
	if slices.Contains(v.RefusedBy, r.Instance.InstanceType) {
		return nil, pluginapi.NewVolumeWrongType(v.Handle, v.Type,
			fmt.Sprintf("volume %s of type %s cannot be attached to instance %s of type %s", v.Handle, v.Type, r.Instance.ID, r.Instance.InstanceType))
	}
	if n := s.attachedCountLocked(r.Instance.ID); n >= s.attachLimit {
		return nil, pluginapi.NewVolumeConflict(pluginapi.ConflictAttachmentLimit, v.Handle, "",
			fmt.Sprintf("instance %s has %d of its %d attachment slots taken", r.Instance.ID, n, s.attachLimit))
	}
	v.Attachment = &attachment{
		InstanceID: r.Instance.ID, Driver: req.Driver, State: pluginapi.AttachmentAttaching, DoneAt: now.Add(p.attachDelay),
	}
	if p.attachDelay <= 0 {
		v.Attachment.State = pluginapi.AttachmentAttached
	}
	if err := s.persistLocked(); err != nil {
		return nil, fmt.Errorf("attaching volume %s: %w", req.VolumeHandle, err)
	}
	return &pluginapi.AttachVolumeResponse{Attachment: v.attachmentInfo()}, nil
}

// DetachVolume detaches a disk from an instance of the configured cluster:
// it is detaching until the provider's attach delay has passed, then gone
// (at once without a delay). Detaching a disk that is detaching succeeds.
// Errors: Unsupported (FieldVolumeDriver) as AttachVolume; NotFound for an
// unknown instance or disk, or a disk not attached to that instance
// (which includes one whose detach has completed).
func (p *Provider) DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error) {
	cluster, err := p.begin(ctx, "DetachVolume", copyPtr(req), true)
	if err != nil {
		return nil, err
	}
	if err := p.checkVolumeDriver(req.Driver); err != nil {
		return nil, fmt.Errorf("detaching volume %s: %w", req.VolumeHandle, err)
	}
	now := p.clock()
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceVolumesLocked(now)
	if r, ok := s.instances[req.InstanceID]; !ok || r.ClusterID != cluster {
		return nil, pluginapi.NewNotFound("instance %s", req.InstanceID)
	}
	v, ok := s.volumes[req.VolumeHandle]
	if !ok {
		return nil, pluginapi.NewNotFound("volume %s", req.VolumeHandle)
	}
	if v.Attachment == nil || v.Attachment.InstanceID != req.InstanceID {
		return nil, pluginapi.NewNotFound("volume %s is not attached to instance %s", req.VolumeHandle, req.InstanceID)
	}
	switch {
	case p.attachDelay <= 0:
		v.Attachment = nil
	case v.Attachment.State != pluginapi.AttachmentDetaching:
		v.Attachment.State = pluginapi.AttachmentDetaching
		v.Attachment.DoneAt = now.Add(p.attachDelay)
	}
	if err := s.persistLocked(); err != nil {
		return nil, fmt.Errorf("detaching volume %s: %w", req.VolumeHandle, err)
	}
	return &pluginapi.DetachVolumeResponse{}, nil
}

// DescribeVolumeAttachments returns the attachments of the configured
// cluster's instances among req.InstanceIDs, sorted by instance and
// handle; unknown instances, and those of other clusters, have none.
func (p *Provider) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	cluster, err := p.begin(ctx, "DescribeVolumeAttachments",
		&pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: slices.Clone(req.InstanceIDs)}, true)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(p.capabilities, pluginapi.CapabilityVolumes) {
		return nil, pluginapi.NewUnsupported("plugin %s does not attach volumes (capability %q)", p.name, pluginapi.CapabilityVolumes)
	}
	now := p.clock()
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.advanceVolumesLocked(now) {
		if err := s.persistLocked(); err != nil {
			return nil, fmt.Errorf("describing volume attachments: %w", err)
		}
	}
	asked := map[string]bool{}
	for _, id := range req.InstanceIDs {
		if r, ok := s.instances[id]; ok && r.ClusterID == cluster {
			asked[id] = true
		}
	}
	out := &pluginapi.DescribeVolumeAttachmentsResponse{}
	for _, v := range s.volumes {
		if v.Attachment != nil && asked[v.Attachment.InstanceID] {
			out.Attachments = append(out.Attachments, v.attachmentInfo())
		}
	}
	sortAttachments(out.Attachments)
	return out, nil
}
