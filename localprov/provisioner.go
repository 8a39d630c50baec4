package localprov

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/local"
)

// Driver is the provisioner's name, a StorageClass's provisioner and the
// volumes' spec.csi.driver: the local plugin's CSI driver.
const Driver = local.VolumeDriver

// The annotations, finalizer and class parameter the external-provisioner
// and the PV controller agree on (sig-storage-lib-external-provisioner
// controller.go; k8s.io/component-helpers/storage/volume).
const (
	// AnnStorageProvisioner is set on a claim by the PV controller: the
	// provisioner it waits for.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode is set on a WaitForFirstConsumer claim by the
	// scheduler: the node its first pod goes to.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnProvisionedBy marks a volume as made by a provisioner.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// Finalizer keeps a volume of reclaim policy Delete until its disk
	// is deleted.
	Finalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	// ParamFSType is the class parameter of the volume's filesystem.
	ParamFSType = "csi.storage.k8s.io/fstype"
)

// DefaultFSType is the filesystem of a volume whose class names none.
const DefaultFSType = "ext4"

// ZoneKey is the topology key of a local disk's zone: the volume's node
// affinity, the node's label, the CSINode's topology key. It is the
// driver's own key, as every CSI driver has one
// (topology.ebs.csi.aws.com/zone), and the one kip writes into its
// node's CSINode and labels (host/node.ZoneKey).
const ZoneKey = "topology.local.csi.kipcell.io/zone"

// sizeUnit is what a disk's size is rounded up to: a MiB, as a cloud
// rounds a disk up to its GiB.
const sizeUnit = 1 << 20

// fsTypes are the filesystems the cell's agent formats a blank disk with
// (cell/pod/disks.go: mkfs.ext4, mkfs.xfs).
var fsTypes = []string{"ext4", "xfs"}

// Config configures a Provisioner.
type Config struct {
	// StateDir is the local plugin's stateDir: the disks live in its
	// volumes/ directory. Absolute.
	StateDir string
	// Zone is the local plugin's zone, the zone of every disk made.
	Zone string
	// Resync is how often every claim and volume is looked at again
	// besides their changes; 0 means 5 minutes.
	Resync time.Duration
}

// Provisioner provisions and deletes the local plugin's disks for claims
// of its driver's classes. Run runs it.
type Provisioner struct {
	client   kubernetes.Interface
	cfg      Config
	recorder record.EventRecorder
	log      *slog.Logger
	// createDisk and deleteDisk are local.CreateVolume and
	// local.DeleteVolume; a test replaces them to make them fail.
	createDisk func(ctx context.Context, stateDir, handle, zone string, sizeBytes int64) error
	deleteDisk func(ctx context.Context, stateDir, handle string) error
}

// New returns a Provisioner. recorder emits the claims' and volumes'
// events (as the external-provisioner, with the driver as the component).
func New(client kubernetes.Interface, cfg Config, recorder record.EventRecorder, log *slog.Logger) (*Provisioner, error) {
	switch {
	case client == nil:
		return nil, errors.New("localprov: no Kubernetes client")
	case recorder == nil:
		return nil, errors.New("localprov: no event recorder")
	case !filepath.IsAbs(cfg.StateDir):
		return nil, fmt.Errorf("localprov: state directory %q is not an absolute path", cfg.StateDir)
	case cfg.Zone == "":
		return nil, errors.New("localprov: no zone")
	}
	if cfg.Resync == 0 {
		cfg.Resync = 5 * time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	return &Provisioner{client: client, cfg: cfg, recorder: recorder, log: log,
		createDisk: local.CreateVolume, deleteDisk: local.DeleteVolume}, nil
}

// Run watches claims and volumes and provisions and deletes until ctx ends.
// Every decision reads the objects from the API server, not the informers'
// cache, so a stale cache never makes a second volume for a claim; the
// informers only say what to look at.
func (p *Provisioner) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(p.client, p.cfg.Resync)
	claims := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "claims"})
	volumes := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "volumes"})
	defer claims.ShutDown()
	defer volumes.ShutDown()
	enqueue := func(q workqueue.TypedRateLimitingInterface[string]) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				q.Add(key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	if _, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(enqueue(claims)); err != nil {
		return fmt.Errorf("watching claims: %w", err)
	}
	if _, err := factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(enqueue(volumes)); err != nil {
		return fmt.Errorf("watching volumes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("syncing the %v informer: %w", typ, ctx.Err())
		}
	}
	p.log.Info("provisioning", "driver", Driver, "state_dir", p.cfg.StateDir, "zone", p.cfg.Zone)
	go wait.UntilWithContext(ctx, func(ctx context.Context) { work(ctx, claims, p.syncClaim, p.log) }, time.Second)
	go wait.UntilWithContext(ctx, func(ctx context.Context) { work(ctx, volumes, p.syncVolume, p.log) }, time.Second)
	<-ctx.Done()
	return nil
}

// work takes keys from q until it shuts down; a key whose sync fails is
// retried with the queue's backoff (5 ms doubling to 1000 s), as the
// external-provisioner's work queues do.
func work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, log *slog.Logger) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(ctx, key); err != nil {
			log.Warn("retrying", "key", key, "tries", q.NumRequeues(key)+1, "err", err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// failure is why a claim was not provisioned: reschedule when the
// selected node cannot have the disk (the scheduler must choose again),
// final when retrying cannot help until the claim or its class changes
// (an update of the claim, or the informers' resync, brings it back).
type failure struct {
	err        error
	reschedule bool
	final      bool
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func finalf(format string, args ...any) error {
	return &failure{err: fmt.Errorf(format, args...), final: true}
}

func reschedulef(format string, args ...any) error {
	return &failure{err: fmt.Errorf(format, args...), reschedule: true}
}

// VolumeName is the name of the volume provisioned for a claim, and its
// disk's handle: pvc-<claim UID>, as the external-provisioner names it.
func VolumeName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// syncClaim provisions the claim namespace/name if it is one to provision.
// An error means: retry later.
func (p *Provisioner) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		// Keys come from DeletionHandlingMetaNamespaceKeyFunc, so this one
		// is not ours and retrying it cannot help: drop it.
		return nil //nolint:nilerr // a malformed key is dropped, not retried
	}
	claim, err := p.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading claim %s: %w", key, err)
	}
	class, ok, err := p.shouldProvision(ctx, claim)
	if err != nil || !ok {
		return err
	}
	err = p.provision(ctx, claim, class)
	var f *failure
	switch {
	case err == nil:
		return nil
	case errors.As(err, &f) && f.reschedule:
		return p.reschedule(ctx, claim, class, err)
	case errors.As(err, &f) && f.final:
		p.failed(claim, class, err)
		return nil
	default:
		p.failed(claim, class, err)
		return err
	}
}

// failed reports a claim's failed provisioning as the external-provisioner
// does.
func (p *Provisioner) failed(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, err error) {
	msg := fmt.Sprintf("failed to provision volume with StorageClass %q: %v", class.Name, err)
	p.recorder.Event(claim, corev1.EventTypeWarning, "ProvisioningFailed", msg)
	p.log.Warn("provisioning failed", "claim", klogKey(claim), "err", err)
}

// reschedule reports the failure and removes the claim's selected node,
// so that the scheduler chooses a node again (the library's
// rescheduleProvisioning).
func (p *Provisioner) reschedule(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, cause error) error {
	p.failed(claim, class, cause)
	c := claim.DeepCopy()
	delete(c.Annotations, AnnSelectedNode)
	if _, err := p.client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("removing the selected node of claim %s: %w", klogKey(claim), err)
	}
	p.log.Info("claim rescheduled", "claim", klogKey(claim), "node", claim.Annotations[AnnSelectedNode], "why", cause)
	return nil
}

// shouldProvision says whether claim is one to provision now, and its
// class: no volume named yet, the PV controller waits for this driver
// (the annotation), the class is this driver's, and a WaitForFirstConsumer
// claim has a selected node (the library's shouldProvision).
func (p *Provisioner) shouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, bool, error) {
	if claim.Spec.VolumeName != "" {
		return nil, false, nil
	}
	prov, ok := claim.Annotations[AnnStorageProvisioner]
	if !ok {
		prov = claim.Annotations[annBetaStorageProvisioner]
	}
	if prov != Driver || claim.Spec.StorageClassName == nil {
		return nil, false, nil
	}
	class, err := p.client.StorageV1().StorageClasses().Get(ctx, *claim.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		// A class may be created after its claim: retry.
		return nil, false, fmt.Errorf("reading StorageClass %q of claim %s: %w", *claim.Spec.StorageClassName, klogKey(claim), err)
	}
	if class.Provisioner != Driver {
		return nil, false, nil
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		claim.Annotations[AnnSelectedNode] == "" {
		return nil, false, nil
	}
	return class, true, nil
}

// provision makes the claim's disk and volume; it is idempotent (the
// volume's name is the claim's UID, CreateVolume succeeds on a disk made
// before), so a retry after any failure is safe.
func (p *Provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	name := VolumeName(claim)
	switch _, err := p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); {
	case err == nil:
		return nil // provisioned before: the PV controller binds it
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading volume %s: %w", name, err)
	}
	node, err := p.selectedNode(ctx, claim)
	if err != nil {
		return err
	}
	// From here on, as the library's provisionClaimOperation, every
	// failure follows this event.
	p.recorder.Event(claim, corev1.EventTypeNormal, "Provisioning",
		fmt.Sprintf("External provisioner is provisioning volume for claim %q", klogKey(claim)))
	spec, err := readClaim(claim, class)
	if err != nil {
		return err
	}
	zone, err := p.zone(ctx, node, class)
	if err != nil {
		return err
	}
	if err := p.createDisk(ctx, p.cfg.StateDir, name, zone, spec.sizeBytes); err != nil {
		return fmt.Errorf("creating disk %s: %w", name, err)
	}
	pv := volumeFor(claim, class, spec, name, zone)
	if _, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		// The disk stays: the retry finds it (CreateVolume is
		// idempotent) and creates the volume again.
		return fmt.Errorf("creating volume %s: %w", name, err)
	}
	p.recorder.Event(claim, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume "+name)
	p.log.Info("provisioned", "claim", klogKey(claim), "volume", name, "zone", zone, "bytes", spec.sizeBytes)
	return nil
}

// volumeSpec is what a claim and its class ask of a disk.
type volumeSpec struct {
	sizeBytes int64
	fsType    string // empty in Block mode
	mode      corev1.PersistentVolumeMode
}

// readClaim checks that a local disk can be what claim asks, and reads its
// size (rounded up to a MiB), filesystem and mode. Its errors are final.
func readClaim(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (volumeSpec, error) {
	var s volumeSpec
	if claim.Spec.Selector != nil {
		return s, finalf("claim Selector is not supported") // the external-provisioner's words
	}
	if claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil {
		return s, finalf("a data source (cloning, restoring a snapshot) is not supported: a local disk is made blank")
	}
	for _, m := range claim.Spec.AccessModes {
		if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
			return s, finalf("access mode %s is not supported: a local disk is attached to one cell at a time (ReadWriteOnce, ReadWriteOncePod)", m)
		}
	}
	for k := range class.Parameters {
		if k != ParamFSType {
			return s, finalf("StorageClass parameter %q is not supported (only %s)", k, ParamFSType)
		}
	}
	s.mode = corev1.PersistentVolumeFilesystem
	if claim.Spec.VolumeMode != nil {
		s.mode = *claim.Spec.VolumeMode
	}
	if s.mode == corev1.PersistentVolumeFilesystem {
		s.fsType = DefaultFSType
		if fs, ok := class.Parameters[ParamFSType]; ok {
			s.fsType = fs
		}
		if !slices.Contains(fsTypes, s.fsType) {
			return s, finalf("fsType %q is not supported: a cell formats %v", s.fsType, fsTypes)
		}
	}
	req, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || req.Sign() <= 0 {
		return s, finalf("the claim requests no storage")
	}
	s.sizeBytes = (req.Value() + sizeUnit - 1) / sizeUnit * sizeUnit
	if limit, ok := claim.Spec.Resources.Limits[corev1.ResourceStorage]; ok && limit.Value() < s.sizeBytes {
		return s, finalf("the claim's storage limit %s is less than the disk of %d bytes its request %s is rounded up to (a MiB)",
			limit.String(), s.sizeBytes, req.String())
	}
	return s, nil
}

// selectedNode is the claim's selected node, nil without one; one that
// does not exist is rescheduled, as the library does.
func (p *Provisioner) selectedNode(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.Node, error) {
	name := claim.Annotations[AnnSelectedNode]
	if name == "" {
		return nil, nil
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, reschedulef("selected node %s does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading selected node %s: %w", name, err)
	}
	return node, nil
}

// zone is the zone the claim's disk is made in: the plugin's, which the
// class's allowedTopologies must allow and the selected node (nil: none)
// must be in, as its CSINode and labels say (the external-provisioner's
// topology: the CSINode's keys for the driver, the node's labels for
// their values).
func (p *Provisioner) zone(ctx context.Context, node *corev1.Node, class *storagev1.StorageClass) (string, error) {
	if !allows(class.AllowedTopologies, p.cfg.Zone) {
		return "", finalf("the StorageClass's allowedTopologies do not allow zone %s, the only zone of local disks", p.cfg.Zone)
	}
	if node == nil {
		return p.cfg.Zone, nil
	}
	nodeName := node.Name
	csiNode, err := p.client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the CSINode of selected node %s: %w", nodeName, err)
	}
	// Without the driver on the node, retry: kip writes its CSINode once
	// the plugin answered (the kubelet, once the driver registered).
	i := -1
	if err == nil {
		i = slices.IndexFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == Driver })
	}
	if i < 0 {
		return "", fmt.Errorf("selected node %s does not run driver %s: its CSINode does not list it (kip lists it with node.zone set)", nodeName, Driver)
	}
	if !slices.Contains(csiNode.Spec.Drivers[i].TopologyKeys, ZoneKey) {
		return "", fmt.Errorf("selected node %s's CSINode gives driver %s no topology key %s", nodeName, Driver, ZoneKey)
	}
	zone, ok := node.Labels[ZoneKey]
	if !ok {
		return "", fmt.Errorf("selected node %s has no label %s", nodeName, ZoneKey)
	}
	if zone != p.cfg.Zone {
		return "", reschedulef("selected node %s is in zone %s; local disks are made in zone %s", nodeName, zone, p.cfg.Zone)
	}
	return zone, nil
}

// allows says whether a class's allowedTopologies (none: everywhere) allow
// zone: one of its terms requires nothing but the zone key among values
// that hold it.
func allows(terms []corev1.TopologySelectorTerm, zone string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if e.Key != ZoneKey || !slices.Contains(e.Values, zone) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// volumeFor is the PersistentVolume of a claim's new disk.
func volumeFor(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, s volumeSpec, name, zone string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionedBy: Driver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(s.sizeBytes, resource.BinarySI)},
			AccessModes: claim.Spec.AccessModes,
			VolumeMode:  &s.mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: Driver, VolumeHandle: name, FSType: s.fsType,
			}},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			// The claim's reference with its UID and version, as the
			// library's ref.GetReference makes it: the PV controller binds
			// the claim to the volume that names it.
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name,
				UID: claim.UID, ResourceVersion: claim.ResourceVersion,
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ZoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
	if reclaim == corev1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{Finalizer}
	}
	return pv
}

// syncVolume keeps the finalizer of one of this driver's volumes and, once
// it is released under reclaimPolicy Delete, deletes its disk, then the
// volume, then the finalizer (the library's syncVolume and
// deleteVolumeOperation). An error means: retry later.
func (p *Provisioner) syncVolume(ctx context.Context, name string) error {
	pv, err := p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading volume %s: %w", name, err)
	}
	if !ours(pv) {
		return nil
	}
	if pv, err = p.keepFinalizer(ctx, pv); err != nil {
		return err
	}
	if !shouldDelete(pv) {
		return nil
	}
	handle := pv.Spec.CSI.VolumeHandle
	if err := p.deleteDisk(ctx, p.cfg.StateDir, handle); err != nil && !pluginapi.IsNotFound(err) {
		p.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedDelete", err.Error())
		p.log.Warn("deleting the disk failed", "volume", name, "err", err)
		return fmt.Errorf("deleting disk %s: %w", handle, err)
	}
	if err := p.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting volume %s: %w", name, err)
	}
	// The deletion set deletionTimestamp: read the volume again to drop
	// the finalizer from its current version.
	pv, err = p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		p.log.Info("deleted", "volume", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading volume %s: %w", name, err)
	}
	if i := slices.Index(pv.Finalizers, Finalizer); i >= 0 {
		pv.Finalizers = slices.Delete(pv.Finalizers, i, i+1)
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizer of volume %s: %w", name, err)
		}
	}
	p.log.Info("deleted", "volume", name)
	return nil
}

// ours says whether the volume is this driver's: provisioned by it, or a
// volume of its driver made by hand (the library's
// isProvisionerForVolume).
func ours(pv *corev1.PersistentVolume) bool {
	if by, ok := pv.Annotations[AnnProvisionedBy]; ok {
		return by == Driver && pv.Spec.CSI != nil
	}
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == Driver
}

// keepFinalizer adds the finalizer to a bound volume of reclaim policy
// Delete and removes it from one whose policy is Retain or Recycle (the
// library's handleProtectionFinalizer).
func (p *Provisioner) keepFinalizer(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	has := slices.Contains(pv.Finalizers, Finalizer)
	var finalizers []string
	switch {
	case !has && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete &&
		pv.DeletionTimestamp == nil && pv.Status.Phase == corev1.VolumeBound:
		finalizers = append(slices.Clone(pv.Finalizers), Finalizer)
	case has && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete:
		finalizers = slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == Finalizer })
	default:
		return pv, nil
	}
	c := pv.DeepCopy()
	c.Finalizers = finalizers
	updated, err := p.client.CoreV1().PersistentVolumes().Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating the finalizers of volume %s: %w", pv.Name, err)
	}
	return updated, nil
}

// shouldDelete says whether a volume's disk is to be deleted now: released
// under reclaim policy Delete, its finalizer still on (else its disk was
// deleted already) or the volume not being deleted.
func shouldDelete(pv *corev1.PersistentVolume) bool {
	if pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, Finalizer) {
		return false
	}
	return pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
}

func klogKey(claim *corev1.PersistentVolumeClaim) string { return claim.Namespace + "/" + claim.Name }
