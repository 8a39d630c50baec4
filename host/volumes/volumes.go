package volumes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Source reads what a pod's volumes reference (the API server's objects).
// Its errors are the API's: NotFound is told apart with
// apierrors.IsNotFound, anything else is transient.
type Source interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	// CSIDriver answers the driver's object; NotFound means the driver
	// registered none and its defaults apply, as the kubelet reads it.
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
}

// NewSource reads through the API with client (direct GETs, as the
// kubelet's populator does for claims and volumes).
func NewSource(client kubernetes.Interface) Source { return clientSource{client} }

type clientSource struct{ c kubernetes.Interface }

func (s clientSource) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return s.c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s clientSource) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return s.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (s clientSource) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	return s.c.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}

// Disk is one pod volume that is a disk the plugin attaches: what to
// attach, where the cell must be to reach it, and how the agent mounts it.
type Disk struct {
	// Volume is the pod's volume name.
	Volume string
	// Claim and PV name the claim and its volume; both are "" for an
	// inline in-tree volume.
	Claim, PV string
	// Driver and Handle are the CSI driver and volume handle (the PV's,
	// or translated from an in-tree source): what AttachVolume takes.
	Driver, Handle string
	// FSType is the PV's fsType ("" lets the agent default to ext4).
	FSType string
	// ReadOnly is the pod volume's readOnly or the PV source's: the disk
	// is attached and mounted read-only.
	ReadOnly bool
	// Block is volumeMode Block: the containers get the device.
	Block bool
	// MountOptions are the PV's spec.mountOptions (the CSI plugin reads
	// only these, not the beta annotation).
	MountOptions []string
	// FSGroup is whether the pod's fsGroup applies to the mounted disk,
	// as the kubelet's CSI mounter decides (csi_mounter.go
	// supportsFSGroup): never without a pod fsGroup, for a read-only or
	// Block volume, or with the CSIDriver's fsGroupPolicy None; always
	// with File; with ReadWriteOnceWithFSType (the default, and without a
	// CSIDriver object) only when fsType is set and the PV's access modes
	// include ReadWriteOnce or ReadWriteOncePod.
	FSGroup bool
	// Zones are the zones the disk is reachable from (the PV's node
	// affinity, else its zone labels, else the zone in an EBS
	// aws://<zone>/<id> volume ID); nil is any zone.
	Zones []string
	// ZoneSource says where Zones came from, for events:
	// `PersistentVolume "pvc-1" nodeAffinity topology.ebs.csi.aws.com/zone`.
	ZoneSource string
}

// UniqueName is the disk's name as the kubelet reports it in a node's
// volumesInUse and volumesAttached: the CSI plugin's
// "kubernetes.io/csi/<driver>^<handle>" (pkg/volume/csi GetVolumeName
// under util.GetUniqueVolumeName).
func UniqueName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)
}

// Reasons of an Error: each says, in one CamelCase word, why a volume
// cannot be given to the cell.
const (
	// ClaimNotFound: the claim (or the PV it is bound to) does not exist;
	// for a generic ephemeral volume the claim may not be created yet.
	ClaimNotFound = "ClaimNotFound"
	// ClaimNotBound: the claim is not Bound or names no volume, or its PV
	// is bound to no claim or to another claim (another UID).
	ClaimNotBound = "ClaimNotBound"
	// ClaimDeleting: the claim is being deleted without the
	// kubernetes.io/pvc-protection finalizer.
	ClaimDeleting = "ClaimDeleting"
	// ClaimNotOwned: a generic ephemeral volume's claim is not controlled
	// by the pod (a claim of that name made for something else).
	ClaimNotOwned = "ClaimNotOwned"
	// VolumeModeMismatch: a Filesystem volume in volumeDevices or a Block
	// volume in volumeMounts.
	VolumeModeMismatch = "VolumeModeMismatch"
	// DriverNotAttached: the PV's CSI driver is not one the plugin
	// attaches (GetInfoResponse.VolumeDrivers).
	DriverNotAttached = "DriverNotAttached"
	// UnsupportedVolume: a kind of volume a cell cannot have: a CSI
	// ephemeral inline volume, a PV source other than CSI, the three
	// in-tree disks and NFS, a partition, a non-managed Azure disk.
	UnsupportedVolume = "UnsupportedVolume"
	// NodeAffinity: the PV's node affinity pins it to a node (a local
	// volume) or to no zone a cell can be launched in.
	NodeAffinity = "NodeAffinity"
	// LifecycleModeUnsupported: the driver's CSIDriver does not list the
	// volume's lifecycle mode (Persistent for a PV or an in-tree disk,
	// Ephemeral for an inline csi volume), or there is none and the
	// volume is inline: the kubelet refuses to mount it.
	LifecycleModeUnsupported = "LifecycleModeUnsupported"
)

// EventFailedMount is the event reason of an Error the kubelet finds when
// it mounts (its FailedMount: pkg/kubelet/events FailedMountVolume).
const EventFailedMount = "FailedMount"

// Error is a pod volume that cannot be given to the cell. It is the
// pod's state now, not a failure of kip: the claim may be bound or
// created later, so the caller reports it (an event) and resolves again.
type Error struct {
	// Volume is the pod's volume name.
	Volume string
	// Field names the pod field: spec.volumes[2].persistentVolumeClaim.claimName.
	Field string
	// Reason is one of the constants above.
	Reason string
	// Message says what is wrong, in the kubelet's words where it has
	// them ("error processing PVC ns/data: PVC is not bound").
	Message string
	// Event is the reason of the event the kubelet posts for it where
	// that is not the attach's (EventFailedMount for a check its CSI
	// mounter makes); "": FailedAttachVolume.
	Event string
}

func (e *Error) Error() string {
	return fmt.Sprintf("volume %q (%s): %s", e.Volume, e.Field, e.Message)
}

// pvcProtectionFinalizer keeps a claim in use from being deleted; a
// claim being deleted with it is still usable (the kubelet's
// util.PVCProtectionFinalizer).
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// Resolve answers the disks of pod's volumes, in the pod's order, for a
// plugin that attaches drivers. Its error is the first volume's *Error,
// or a wrapped error of src that is not NotFound (transient: the caller
// retries).
func Resolve(ctx context.Context, src Source, pod *corev1.Pod, drivers []string) ([]Disk, error) {
	disks, _, err := ResolveAll(ctx, src, pod, drivers)
	return disks, err
}

// ResolveAll answers the disks of pod's volumes, as Resolve, and the NFS
// shares of its claims (shares.go), each claim read once. Inline nfs
// volumes are not among the shares: the agent reads those from the pod.
func ResolveAll(ctx context.Context, src Source, pod *corev1.Pod, drivers []string) ([]Disk, []Share, error) {
	mounts, devices := volumeUses(pod)
	var (
		disks  []Disk
		shares []Share
	)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		r := resolver{src: src, pod: pod, vol: v, field: fmt.Sprintf("spec.volumes[%d]", i), drivers: drivers, shares: &shares}
		d, err := r.resolve(ctx, mounts[v.Name], devices[v.Name])
		if err != nil {
			return nil, nil, err
		}
		if d != nil {
			disks = append(disks, *d)
		}
	}
	return disks, shares, nil
}

// volumeUses answers which volumes some container (init, regular or
// ephemeral) mounts and which it takes as a device, as the kubelet's
// util.GetPodVolumeNames.
func volumeUses(pod *corev1.Pod) (mounts, devices map[string]bool) {
	mounts, devices = map[string]bool{}, map[string]bool{}
	add := func(ms []corev1.VolumeMount, ds []corev1.VolumeDevice) {
		for _, m := range ms {
			mounts[m.Name] = true
		}
		for _, d := range ds {
			devices[d.Name] = true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		add(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.Containers {
		add(c.VolumeMounts, c.VolumeDevices)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		add(c.VolumeMounts, c.VolumeDevices)
	}
	return mounts, devices
}

// resolver resolves one pod volume.
type resolver struct {
	src     Source
	pod     *corev1.Pod
	vol     *corev1.Volume
	field   string
	drivers []string
	// shares collects the NFS shares of the pod's claims.
	shares *[]Share
}

func (r resolver) fail(field, reason, format string, args ...any) *Error {
	return &Error{Volume: r.vol.Name, Field: r.field + field, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func (r resolver) resolve(ctx context.Context, mounted, device bool) (*Disk, error) {
	v := r.vol
	switch {
	case v.PersistentVolumeClaim != nil:
		return r.claim(ctx, v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ReadOnly, false, ".persistentVolumeClaim.claimName", mounted, device)
	case v.Ephemeral != nil:
		// A generic ephemeral volume is the claim the ephemeral volume
		// controller makes for it (component-helpers' VolumeClaimName).
		return r.claim(ctx, r.pod.Name+"-"+v.Name, false, true, ".ephemeral", mounted, device)
	case v.CSI != nil:
		drv, err := r.csiDriver(ctx, v.CSI.Driver)
		if err != nil {
			return nil, err
		}
		if err := r.lifecycle(drv, v.CSI.Driver, storagev1.VolumeLifecycleEphemeral, v.Name, ".csi"); err != nil {
			return nil, err
		}
		return nil, r.fail(".csi", UnsupportedVolume,
			"CSI ephemeral inline volumes are not supported: driver %s would need its node plugin on the cell", v.CSI.Driver)
	case v.AWSElasticBlockStore != nil, v.GCEPersistentDisk != nil, v.AzureDisk != nil:
		return r.inline(ctx)
	}
	// NFS is resolved elsewhere; every other kind is no disk.
	return nil, nil
}

// boundPV answers the PV the claim name is bound to, checked as the
// kubelet's populator checks it (getPVCExtractPV, getPVSpec), with its
// wording.
func (r resolver) boundPV(ctx context.Context, name string, ephemeral bool, field string) (*corev1.PersistentVolume, error) {
	ns := r.pod.Namespace
	processing := fmt.Sprintf("error processing PVC %s/%s", ns, name)
	pvc, err := r.src.PersistentVolumeClaim(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil, r.fail(field, ClaimNotFound, "%s: failed to fetch PVC from API server: %v", processing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("getting PersistentVolumeClaim %s/%s: %w", ns, name, err)
	}
	if pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, pvcProtectionFinalizer) {
		return nil, r.fail(field, ClaimDeleting, "%s: PVC is being deleted", processing)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return nil, r.fail(field, ClaimNotBound, "%s: PVC is not bound", processing)
	}
	if pvc.Spec.VolumeName == "" {
		return nil, r.fail(field, ClaimNotBound, "%s: PVC has empty pvc.Spec.VolumeName", processing)
	}
	// The kubelet checks the owner after the claim itself
	// (ephemeral.VolumeIsForPod): a claim of that name the pod does not
	// control may hold someone else's data.
	if ephemeral && (pvc.Namespace != ns || !metav1.IsControlledBy(pvc, r.pod)) {
		return nil, r.fail(field, ClaimNotOwned, "PVC %s/%s was not created for pod %s/%s (pod is not owner)", ns, name, ns, r.pod.Name)
	}
	pvName := pvc.Spec.VolumeName
	pv, err := r.src.PersistentVolume(ctx, pvName)
	if apierrors.IsNotFound(err) {
		return nil, r.fail(field, ClaimNotFound, "%s: failed to fetch PV %s from API server: %v", processing, pvName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("getting PersistentVolume %s: %w", pvName, err)
	}
	if pv.Spec.ClaimRef == nil {
		return nil, r.fail(field, ClaimNotBound,
			"%s: found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", processing, pvName)
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, r.fail(field, ClaimNotBound,
			"%s: found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", processing, pvName, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	return pv, nil
}

// claim resolves a claim as the kubelet's populator does
// (createVolumeSpec, getPVCExtractPV, getPVSpec), with its wording. A
// claim bound to an NFS share is no disk (its share is kept: ResolveAll).
func (r resolver) claim(ctx context.Context, name string, readOnly, ephemeral bool, field string, mounted, device bool) (*Disk, error) {
	pv, err := r.boundPV(ctx, name, ephemeral, field)
	if err != nil {
		return nil, err
	}
	if isShare(pv) {
		return nil, r.share(pv, name, readOnly, field)
	}
	pvName := pv.Name

	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock
	mode := corev1.PersistentVolumeFilesystem
	if block {
		mode = corev1.PersistentVolumeBlock
	}
	if mounted && block {
		return nil, r.fail(field, VolumeModeMismatch, "volume %s has volumeMode %s, but is specified in volumeMounts", r.vol.Name, mode)
	}
	if device && !block {
		return nil, r.fail(field, VolumeModeMismatch, "volume %s has volumeMode %s, but is specified in volumeDevices", r.vol.Name, mode)
	}

	zones, zoneSource, err := pvZones(pv)
	if err != nil {
		return nil, r.fail(field, NodeAffinity, "PersistentVolume %q: %v", pvName, err)
	}
	src, err := translatePV(pv)
	if err != nil {
		return nil, r.fail(field, UnsupportedVolume, "PersistentVolume %q: %v", pvName, err)
	}
	if zones == nil && src.zone != "" {
		zones, zoneSource = []string{src.zone}, fmt.Sprintf("PersistentVolume %q volumeID %s", pvName, src.zoneFrom)
	}
	d := &Disk{
		Volume:       r.vol.Name,
		Claim:        name,
		PV:           pvName,
		Driver:       src.driver,
		Handle:       src.handle,
		FSType:       src.fsType,
		ReadOnly:     readOnly || src.readOnly,
		Block:        block,
		MountOptions: pv.Spec.MountOptions,
		Zones:        zones,
		ZoneSource:   zoneSource,
	}
	if err := r.attachable(d.Driver, field); err != nil {
		return nil, err
	}
	drv, err := r.csiDriver(ctx, d.Driver)
	if err != nil {
		return nil, err
	}
	if err := r.lifecycle(drv, d.Driver, storagev1.VolumeLifecyclePersistent, pvName, field); err != nil {
		return nil, err
	}
	d.FSGroup = r.fsGroup(drv, d, src.rwo(pv.Spec.AccessModes))
	return d, nil
}

// inline resolves an in-tree disk written in the pod spec.
func (r resolver) inline(ctx context.Context) (*Disk, error) {
	src, field, err := translateInline(r.vol)
	if err != nil {
		return nil, r.fail(field, UnsupportedVolume, "%v", err)
	}
	d := &Disk{
		Volume:   r.vol.Name,
		Driver:   src.driver,
		Handle:   src.handle,
		FSType:   src.fsType,
		ReadOnly: src.readOnly,
	}
	if src.zone != "" {
		d.Zones, d.ZoneSource = []string{src.zone}, fmt.Sprintf("volume %q volumeID %s", r.vol.Name, src.zoneFrom)
	}
	if err := r.attachable(d.Driver, field); err != nil {
		return nil, err
	}
	// Translated, an inline in-tree disk is a PV's CSI source to the
	// kubelet (csi-translation-lib), so its mode is Persistent.
	drv, err := r.csiDriver(ctx, d.Driver)
	if err != nil {
		return nil, err
	}
	if err := r.lifecycle(drv, d.Driver, storagev1.VolumeLifecyclePersistent, r.vol.Name, field); err != nil {
		return nil, err
	}
	d.FSGroup = r.fsGroup(drv, d, src.rwo(src.inlineModes))
	return d, nil
}

// attachable fails unless the plugin attaches driver.
func (r resolver) attachable(driver, field string) error {
	if slices.Contains(r.drivers, driver) {
		return nil
	}
	has := "none"
	if len(r.drivers) > 0 {
		has = strings.Join(r.drivers, ", ")
	}
	return r.fail(field, DriverNotAttached, "the cloud plugin does not attach volumes of CSI driver %s (it attaches: %s)", driver, has)
}

// csiDriver reads driver's CSIDriver object: nil when there is none
// (the driver's defaults apply, as the kubelet reads it).
func (r resolver) csiDriver(ctx context.Context, driver string) (*storagev1.CSIDriver, error) {
	drv, err := r.src.CSIDriver(ctx, driver)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting CSIDriver %s: %w", driver, err)
	}
	return drv, nil
}

// lifecycle refuses a volume of lifecycle mode the driver's CSIDriver
// (drv, nil for none) does not list, as the kubelet's CSI mounter does
// before it mounts (csi_mounter.go supportsVolumeLifecycleMode: without a
// CSIDriver only Persistent), with the event and message the kubelet
// posts (FailedMount, "MountVolume.SetUp failed for volume <spec name>
// : kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle
// mode: ..."; the spec's name is the PV's, or the pod volume's when
// inline). kip says it before it attaches: the mount would refuse the
// disk on the cell.
func (r resolver) lifecycle(drv *storagev1.CSIDriver, driver string, mode storagev1.VolumeLifecycleMode, specName, field string) error {
	var modes []storagev1.VolumeLifecycleMode
	if drv != nil {
		modes = drv.Spec.VolumeLifecycleModes
		if len(modes) == 0 {
			// The API server's default (SetDefaults_CSIDriver); a
			// hand-made object keeps it, as for fsGroupPolicy.
			modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
		}
	}
	var why string
	switch {
	case drv == nil && mode == storagev1.VolumeLifecyclePersistent:
		return nil
	case drv == nil:
		why = fmt.Sprintf("volume mode %q not supported by driver %s (no CSIDriver object)", mode, driver)
	case slices.Contains(modes, mode):
		return nil
	default:
		why = fmt.Sprintf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, modes)
	}
	e := r.fail(field, LifecycleModeUnsupported,
		"MountVolume.SetUp failed for volume %q : kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: %s", specName, why)
	e.Event = EventFailedMount
	return e
}

// fsGroup decides whether the pod's fsGroup applies to d as the kubelet's
// CSI mounter does (supportsFSGroup, getFSGroupPolicy), with the driver's
// CSIDriver drv (nil: none); rwo is whether the (translated) PV's access
// modes include ReadWriteOnce or ReadWriteOncePod. The block mapper never
// applies it.
func (r resolver) fsGroup(drv *storagev1.CSIDriver, d *Disk, rwo bool) bool {
	sc := r.pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil || d.ReadOnly || d.Block {
		return false
	}
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil && *drv.Spec.FSGroupPolicy != "" {
		// The API server defaults the field; an empty one (a hand-made
		// object) keeps the default rather than failing as the kubelet
		// does.
		policy = *drv.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.NoneFSGroupPolicy:
		return false
	case storagev1.FileFSGroupPolicy:
		return true
	}
	return d.FSType != "" && rwo
}
