package cells

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// A pod's disks (docs/volumes.md): kip takes the place of the
// attach-detach controller for its node. The pod's persistent volumes
// are resolved before its cell is placed (resolveDisks: host/volumes, so
// that their zones constrain the placement), attached through the plugin
// once its instance runs, while the agent is joined (attachDisks), and
// handed to the agent with the pod (PodRequest.Disks); at the pod's end,
// once the agent has stopped the containers and unmounted them, they are
// detached before the instance is terminated (detachDisks), so that the
// next pod of a StatefulSet can attach them at once.

// Event reasons of a pod's disks, the attach-detach controller's.
const (
	// ReasonFailedAttachVolume: a pod volume cannot be resolved to a disk
	// the plugin attaches, or attaching it failed (the pod waits and
	// kip tries again).
	ReasonFailedAttachVolume = "FailedAttachVolume"
	// ReasonSuccessfulAttachVolume: a disk is attached to the pod's
	// instance.
	ReasonSuccessfulAttachVolume = "SuccessfulAttachVolume"
	// ReasonFailedDetachVolume: a disk did not detach within
	// Config.DetachTimeout; the instance is terminated anyway, which
	// detaches it.
	ReasonFailedDetachVolume = "FailedDetachVolume"
)

// attachWarning is how long an attachment may stay attaching before the
// pod gets an event saying so.
const attachWarning = 2 * time.Minute

// volumeAPI is the part of the plugin a pod's disks use.
type volumeAPI interface {
	AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error)
	DetachVolume(ctx context.Context, req *pluginapi.DetachVolumeRequest) (*pluginapi.DetachVolumeResponse, error)
	DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error)
}

// hasDiskVolumes reports whether pod has a volume that may be a disk
// (host/volumes decides): a claim, a generic ephemeral volume or an
// in-tree cloud disk; or an inline csi volume, which host/volumes
// refuses as the kubelet would (its CSIDriver's lifecycle modes) before
// a cell is launched for nothing. Pods without one cost no API or plugin
// call.
func hasDiskVolumes(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.AWSElasticBlockStore != nil ||
			v.GCEPersistentDisk != nil || v.AzureDisk != nil || v.CSI != nil {
			return true
		}
	}
	return false
}

// resolveDisks resolves the pod's disks (host/volumes.Resolve) against
// the drivers the plugin attaches. A *volumes.Error says which volume
// cannot be had and why; any other error is transient.
func (c *cell) resolveDisks(ctx context.Context, pod *corev1.Pod) ([]volumes.Disk, error) {
	if !hasDiskVolumes(pod) {
		return nil, nil
	}
	if c.d.volumeSource == nil {
		return nil, &volumes.Error{Reason: "NoVolumeSource", Message: "kip reads no PersistentVolumeClaims (started without a cluster client)"}
	}
	drivers, err := c.d.placement.catalog.volumeDrivers(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin's volume drivers: %w", err)
	}
	disks, shares, err := volumes.ResolveAll(ctx, c.d.volumeSource, pod, drivers)
	if err != nil {
		return nil, fmt.Errorf("resolving the pod's volumes: %w", err)
	}
	c.keepShares(shares)
	return disks, nil
}

// diskZones turns the disks' zones into placement constraints.
func diskZones(disks []volumes.Disk) []zoneConstraint {
	var out []zoneConstraint
	for _, d := range disks {
		if len(d.Zones) > 0 {
			out = append(out, zoneConstraint{zones: d.Zones, source: d.ZoneSource})
		}
	}
	return out
}

// attachDisks attaches the pod's disks to its instance, each in its own
// goroutine, and records what the agent needs to find each
// (c.attached). It returns once every disk is attached, or ctx ended
// (false). A cell placed by this process resolved its disks before; an
// adopted one resolves them here, and attaching what is attached already
// answers the attachment (AttachVolume is idempotent), so a kip killed
// between attach and start attaches nothing twice.
func (c *cell) attachDisks(ctx context.Context, inst *pluginapi.Instance) bool {
	c.mu.Lock()
	// Every launch of this process resolved the disks first
	// (placeDisks); an adopted instance was launched by another, so its
	// cell resolves them here, once it has some (a pod without disk
	// volumes resolves to none at no cost).
	disks, pod := c.disks, c.desired.DeepCopy()
	resolved := c.adopted == nil || len(disks) > 0
	c.mu.Unlock()
	if !resolved {
		var ok bool
		if disks, ok = c.resolveUntil(ctx, pod); !ok {
			return false
		}
	}
	if len(disks) == 0 {
		return true
	}
	// One poller serves every disk of the instance (attachAndWait).
	poller := newAttachPoller(c.d.volumes, inst.ID)
	pollCtx, stopPolling := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Go(func() { poller.run(pollCtx) })
	var wg sync.WaitGroup
	results := make([]cellapi.Disk, len(disks))
	done := make([]bool, len(disks))
	for i, d := range disks {
		wg.Go(func() {
			results[i], done[i] = c.attachOne(ctx, poller, d)
		})
	}
	wg.Wait()
	stopPolling()
	polling.Wait()
	if slices.Contains(done, false) {
		return false
	}
	attached := make(map[string]cellapi.Disk, len(disks))
	for i, d := range disks {
		attached[d.Volume] = results[i]
	}
	c.mu.Lock()
	c.attached = attached
	c.mu.Unlock()
	c.d.volumesChanged()
	return true
}

// resolveUntil resolves the pod's disks until it succeeds or ctx ends,
// saying why on the pod while it cannot.
func (c *cell) resolveUntil(ctx context.Context, pod *corev1.Pod) ([]volumes.Disk, bool) {
	last := ""
	for n := 1; ; n++ {
		disks, err := c.resolveDisks(ctx, pod)
		if err == nil {
			c.mu.Lock()
			c.disks = disks
			c.mu.Unlock()
			return disks, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		wait := c.d.cfg.Backoff(n)
		var verr *volumes.Error
		if errors.As(err, &verr) {
			c.diskFailedAs(diskEvent(verr), err.Error(), &last)
			wait = c.d.cfg.RematchInterval
		} else {
			c.log().Warn("resolving the pod's volumes", "attempt", n, "error", err)
		}
		if !sleep(ctx, wait) {
			return nil, false
		}
	}
}

// diskFailed says on the pod, once per message, why its disks are not
// there: a FailedAttachVolume warning event and the containers' waiting
// reason.
func (c *cell) diskFailed(message string, last *string) {
	c.diskFailedAs(ReasonFailedAttachVolume, message, last)
}

// diskFailedAs is diskFailed with the event's reason.
func (c *cell) diskFailedAs(reason, message string, last *string) {
	if message == *last {
		return
	}
	*last = message
	c.log().Warn("the pod's disk is not available", "message", message)
	c.waiting(reason, message)
	c.event(corev1.EventTypeWarning, reason, "%s", message)
}

// diskEvent is the reason of the event a volume that cannot be had gets:
// the kubelet's where it says one (FailedMount for a lifecycle mode the
// CSIDriver does not list), else FailedAttachVolume.
func diskEvent(verr *volumes.Error) string {
	return cmp.Or(verr.Event, ReasonFailedAttachVolume)
}

// attachOne attaches d to the poller's instance and waits until it is attached,
// retrying until it is or ctx ends. A disk attached to another instance
// (the previous pod of a StatefulSet, still detaching) is waited for
// with the kubelet's Multi-Attach message; other refusals are said once
// each and tried again after Config.RematchInterval, transient failures
// after the back-off.
func (c *cell) attachOne(ctx context.Context, poller *attachPoller, d volumes.Disk) (cellapi.Disk, bool) {
	readOnly := d.ReadOnly
	last := ""
	for n := 1; ; n++ {
		att, err := c.attachAndWait(ctx, poller, d, readOnly)
		if err == nil {
			c.event(corev1.EventTypeNormal, ReasonSuccessfulAttachVolume, "AttachVolume.Attach succeeded for volume %q", volumeName(d))
			c.log().Info("disk attached", "volume", d.Volume, "handle", d.Handle, "serial", att.Device.Serial, "path", att.Device.Path)
			return cellapi.Disk{
				Serial: att.Device.Serial, Path: att.Device.Path, FSType: d.FSType,
				ReadOnly: d.ReadOnly, Block: d.Block, MountOptions: d.MountOptions,
			}, true
		}
		if ctx.Err() != nil {
			return cellapi.Disk{}, false
		}
		var unsupported *pluginapi.UnsupportedError
		if readOnly && errors.As(err, &unsupported) && unsupported.Field == pluginapi.FieldReadOnly {
			// The cloud attaches only read-write; the agent mounts it
			// read-only (the contract's rule).
			readOnly, n = false, 0
			continue
		}
		wait := c.d.cfg.Backoff(n)
		var conflict *pluginapi.VolumeConflictError
		switch {
		case errors.As(err, &conflict) && conflict.Reason == pluginapi.ConflictInUse:
			c.diskFailed(fmt.Sprintf("Multi-Attach error for volume %q Volume is already exclusively attached to one node and can't be attached to another", volumeName(d)), &last)
			wait = min(wait, 5*time.Second)
		case errors.As(err, &conflict) && conflict.Reason == pluginapi.ConflictWrongType:
			// Never for this instance type: the cell is placed again.
			c.wrongDiskType(d, conflict)
			return cellapi.Disk{}, false
		case pluginapi.IsTransient(err), pluginapi.IsThrottled(err), pluginapi.IsUnreachable(err):
			c.log().Warn("attaching a disk", "volume", d.Volume, "attempt", n, "error", err)
		default:
			c.diskFailed(fmt.Sprintf("AttachVolume.Attach failed for volume %q : %v", volumeName(d), err), &last)
			wait = max(wait, c.d.cfg.RematchInterval)
		}
		if !sleep(ctx, wait) {
			return cellapi.Disk{}, false
		}
	}
}

// volumeName is how the attach-detach controller names a volume in its
// events: the PV's name, else the pod's volume's.
func volumeName(d volumes.Disk) string {
	if d.PV != "" {
		return d.PV
	}
	return d.Volume
}

// attachAndWait asks for the attachment and polls the plugin until it is
// attached with its device known, through the instance's poller (one
// Describe a round for all its disks; pollDelay says how often). An
// attachment that vanishes while attaching (the cloud gave up on it) is
// an error: the caller asks again, and hears why.
func (c *cell) attachAndWait(ctx context.Context, poller *attachPoller, d volumes.Disk, readOnly bool) (pluginapi.VolumeAttachment, error) {
	instanceID := poller.instanceID
	resp, err := c.d.volumes.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{
		InstanceID: instanceID, Driver: d.Driver, VolumeHandle: d.Handle, ReadOnly: readOnly,
	})
	if err != nil {
		return pluginapi.VolumeAttachment{}, fmt.Errorf("attaching %s: %w", d.Handle, err)
	}
	att := resp.Attachment
	start := c.d.cfg.Now()
	warned := false
	for !isAttached(att) {
		resp, err := poller.wait(ctx)
		if ctx.Err() != nil {
			return att, ctx.Err()
		}
		if !warned && c.d.cfg.Now().Sub(start) > attachWarning {
			warned = true
			c.event(corev1.EventTypeWarning, ReasonFailedAttachVolume, "AttachVolume.Attach for volume %q still %s after %s",
				volumeName(d), att.State, attachWarning)
		}
		if err != nil {
			c.log().Warn("describing a disk's attachment", "volume", d.Volume, "error", err)
			continue
		}
		got, found := findAttachment(resp, instanceID, d)
		switch {
		case !found:
			return att, fmt.Errorf("attaching %s: the attachment is gone", d.Handle)
		case got.State == pluginapi.AttachmentDetaching:
			return att, fmt.Errorf("attaching %s: the attachment is detaching", d.Handle)
		default:
			att = got
		}
	}
	return att, nil
}

// isAttached reports whether an attachment is usable by the agent.
func isAttached(att pluginapi.VolumeAttachment) bool {
	return att.State == pluginapi.AttachmentAttached && (att.Device.Serial != "" || att.Device.Path != "")
}

// findAttachment finds d's attachment to the instance in a Describe's
// answer.
func findAttachment(resp *pluginapi.DescribeVolumeAttachmentsResponse, instanceID string, d volumes.Disk) (pluginapi.VolumeAttachment, bool) {
	for _, a := range resp.Attachments {
		// ARM spells a resource ID's case as it likes: handles are
		// compared without it, as Azure compares them.
		if a.InstanceID == instanceID && a.Driver == d.Driver && strings.EqualFold(a.VolumeHandle, d.Handle) {
			return a, true
		}
	}
	return pluginapi.VolumeAttachment{}, false
}

// cellDisks is what the agent gets of the pod's disks: nil before they
// are attached.
func (c *cell) cellDisks() map[string]cellapi.Disk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached
}

// mayHaveDisks reports whether the cell's instance may have disks
// attached: the pod has volumes that may be disks and the plugin
// attaches some. Other cells end with no volume call.
func (c *cell) mayHaveDisks(ctx context.Context) bool {
	c.mu.Lock()
	pod := c.desired
	c.mu.Unlock()
	if !hasDiskVolumes(pod) {
		return false
	}
	drivers, err := c.d.placement.catalog.volumeDrivers(ctx)
	return err != nil || len(drivers) > 0
}

// detachDisks detaches every disk attached to the instance (what the
// plugin describes, not only what this process attached: a kip killed
// mid-attach left some it does not know of) and waits until each is
// gone, at most Config.DetachTimeout: a disk still held (an agent that
// could not unmount it) is left to the termination, which detaches it,
// with a FailedDetachVolume event.
func (c *cell) detachDisks(ctx context.Context, instanceID string) {
	defer func() {
		c.mu.Lock()
		had := c.attached != nil
		c.attached = nil
		c.mu.Unlock()
		if had {
			c.d.volumesChanged()
		}
	}()
	deadline := c.d.cfg.Now().Add(c.d.cfg.DetachTimeout)
	asked := map[string]bool{}
	for n := 1; ; n++ {
		resp, err := c.d.volumes.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{instanceID}})
		var left []string
		if err == nil {
			for _, a := range resp.Attachments {
				if a.InstanceID != instanceID {
					continue
				}
				left = append(left, a.VolumeHandle)
				if asked[a.VolumeHandle] && a.State == pluginapi.AttachmentDetaching {
					continue
				}
				_, derr := c.d.volumes.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: instanceID, Driver: a.Driver, VolumeHandle: a.VolumeHandle})
				switch {
				case derr == nil:
					asked[a.VolumeHandle] = true
				case pluginapi.IsNotFound(derr):
				default:
					c.log().Warn("detaching a disk", "handle", a.VolumeHandle, "attempt", n, "error", derr)
				}
			}
			if len(left) == 0 {
				if len(asked) > 0 {
					c.log().Info("disks detached", "count", len(asked))
				}
				return
			}
		} else {
			c.log().Warn("describing the instance's disks before terminating it", "attempt", n, "error", err)
		}
		if c.d.cfg.Now().After(deadline) {
			sort.Strings(left)
			c.event(corev1.EventTypeWarning, ReasonFailedDetachVolume, "detaching %v from cell %s: not detached after %s; terminating the instance, which detaches them",
				left, c.id, c.d.cfg.DetachTimeout)
			return
		}
		if !sleep(ctx, pollDelay(n)) {
			return
		}
	}
}

// Volumes reports the disks attached to the node's cells (the Node's
// volumesAttached, as the attach-detach controller writes it, with the
// device path the agent was given) and those its pods use (volumesInUse,
// as a kubelet reports it), each named as the kubelet names a CSI
// volume (volumes.UniqueName), sorted. host/node writes them into the
// Node's status.
func (m *Manager) Volumes() (attached []corev1.AttachedVolume, inUse []corev1.UniqueVolumeName) {
	for _, c := range m.cells.all() {
		c.mu.Lock()
		for _, d := range c.disks {
			dev, ok := c.attached[d.Volume]
			if !ok {
				continue
			}
			name := volumes.UniqueName(d.Driver, d.Handle)
			attached = append(attached, corev1.AttachedVolume{Name: name, DevicePath: cmp.Or(dev.Path, dev.Serial)})
			inUse = append(inUse, name)
		}
		c.mu.Unlock()
	}
	slices.SortFunc(attached, func(a, b corev1.AttachedVolume) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(inUse)
	return attached, slices.Compact(inUse)
}
