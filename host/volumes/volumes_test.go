package volumes

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const (
	ns       = "ns"
	claimUID = types.UID("claim-uid")
	podUID   = types.UID("pod-uid")
)

var allDrivers = []string{"ebs.csi.aws.com", "pd.csi.storage.gke.io", "disk.csi.azure.com"}

func claim(name, pvName string, mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: claimUID},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// ebsPV is a CSI PV of the EBS driver bound to the claim claimUID, as
// the external-provisioner makes one: RWO, ext4, zonal node affinity.
func ebsPV(name string, mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", FSType: "ext4"},
			},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:    &corev1.ObjectReference{Namespace: ns, Name: "data", UID: claimUID},
			NodeAffinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "topology.ebs.csi.aws.com/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
			}}),
		},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func affinity(terms ...corev1.NodeSelectorTerm) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func withSource(s corev1.PersistentVolumeSource) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeSource = s }
}

func noAffinity(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil }

// pod has the volume "data" of vol mounted by its one container, an
// fsGroup, and an emptyDir before it (so that fields index 1).
func pod(vol corev1.VolumeSource, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: podUID},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: vol},
			},
			Containers: []corev1.Container{{
				Name:         "main",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "scratch", MountPath: "/tmp"}},
			}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func pvcVol(readOnly bool) corev1.VolumeSource {
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: readOnly}}
}

// asDevice moves "data" from the container's volumeMounts to its
// volumeDevices (in an init container when init).
func asDevice(init bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = p.Spec.Containers[0].VolumeMounts[1:]
		c := corev1.Container{Name: "c", VolumeDevices: []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}
		if init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		} else {
			p.Spec.Containers[0].VolumeDevices = c.VolumeDevices
		}
	}
}

func csiDriver(policy storagev1.FSGroupPolicy) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "ebs.csi.aws.com"},
		Spec:       storagev1.CSIDriverSpec{FSGroupPolicy: &policy},
	}
}

// ebsDisk is what ebsPV bound to claim "data" resolves to.
func ebsDisk(mods ...func(*Disk)) []Disk {
	d := Disk{
		Volume: "data", Claim: "data", PV: "pv-1",
		Driver: "ebs.csi.aws.com", Handle: "vol-0abc", FSType: "ext4",
		FSGroup:    true,
		Zones:      []string{"us-east-1a"},
		ZoneSource: `PersistentVolume "pv-1" nodeAffinity topology.ebs.csi.aws.com/zone`,
	}
	for _, m := range mods {
		m(&d)
	}
	return []Disk{d}
}

// resolveCase is one case of the TestResolve tests.
type resolveCase struct {
	name    string
	objs    []runtime.Object
	pod     *corev1.Pod
	drivers []string // allDrivers when nil
	want    []Disk
	// wantErr: the Error's Reason and Field, and a piece of its Message.
	wantErr *Error
}

// TestResolveClaims: the claim, its PV and their binding, and generic
// ephemeral volumes.
func TestResolveClaims(t *testing.T) {
	deleting := metav1.Now()
	runResolve(t, []resolveCase{
		{
			name: "a bound claim of a CSI PV",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.MountOptions = []string{"noatime"}
				pv.Annotations = map[string]string{corev1.MountOptionAnnotation: "ignored-by-csi"}
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.MountOptions = []string{"noatime"} }),
		},
		{
			name: "no disk for emptyDir, nfs, configMap and an NFS PV",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", withSource(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}))},
			pod: pod(pvcVol(false), func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes,
					corev1.Volume{Name: "n", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}}},
					corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
			}),
			want: nil,
		},
		{
			name:    "no claim",
			objs:    []runtime.Object{ebsPV("pv-1")},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotFound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "error processing PVC ns/data: failed to fetch PVC from API server"},
		},
		{
			name:    "a pending claim",
			objs:    []runtime.Object{claim("data", "", func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending })},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotBound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "error processing PVC ns/data: PVC is not bound"},
		},
		{
			name:    "a bound claim without volumeName",
			objs:    []runtime.Object{claim("data", "")},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotBound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "PVC has empty pvc.Spec.VolumeName"},
		},
		{
			name: "a claim being deleted without pvc-protection",
			objs: []runtime.Object{ebsPV("pv-1"), claim("data", "pv-1", func(c *corev1.PersistentVolumeClaim) {
				c.DeletionTimestamp, c.Finalizers = &deleting, []string{"example.com/other"}
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimDeleting, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "error processing PVC ns/data: PVC is being deleted"},
		},
		{
			name: "a claim being deleted under pvc-protection is still used",
			objs: []runtime.Object{ebsPV("pv-1"), claim("data", "pv-1", func(c *corev1.PersistentVolumeClaim) {
				c.DeletionTimestamp, c.Finalizers = &deleting, []string{"kubernetes.io/pvc-protection"}
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(),
		},
		{
			name:    "no PV",
			objs:    []runtime.Object{claim("data", "pv-1")},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotFound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "failed to fetch PV pv-1 from API server"},
		},
		{
			name:    "a PV bound to no claim",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotBound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "found PV object pv-1 but it has a nil pv.Spec.ClaimRef"},
		},
		{
			name:    "a PV bound to another claim",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "other" })},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: ClaimNotBound, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "found PV object pv-1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID claim-uid"},
		},
		{
			name: "a generic ephemeral volume: the pod's claim",
			objs: []runtime.Object{ebsPV("pv-1"), claim("web-data", "pv-1", func(c *corev1.PersistentVolumeClaim) {
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: podUID, Controller: ptr.To(true)}}
			})},
			pod:  pod(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			want: ebsDisk(func(d *Disk) { d.Claim = "web-data" }),
		},
		{
			name: "a generic ephemeral volume's claim of another pod",
			objs: []runtime.Object{ebsPV("pv-1"), claim("web-data", "pv-1", func(c *corev1.PersistentVolumeClaim) {
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "old-pod-uid", Controller: ptr.To(true)}}
			})},
			pod:     pod(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			wantErr: &Error{Reason: ClaimNotOwned, Field: "spec.volumes[1].ephemeral", Message: "PVC ns/web-data was not created for pod ns/web (pod is not owner)"},
		},
		{
			name:    "a generic ephemeral volume's claim not made yet",
			objs:    []runtime.Object{ebsPV("pv-1")},
			pod:     pod(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			wantErr: &Error{Reason: ClaimNotFound, Field: "spec.volumes[1].ephemeral", Message: "error processing PVC ns/web-data"},
		},
	})
}

// TestResolveModes: read-only, fsGroup and its policy, access modes, and
// Block volumes.
func TestResolveModes(t *testing.T) {
	runResolve(t, []resolveCase{
		{
			name: "the claim's readOnly: read-only, no fsGroup",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:  pod(pvcVol(true)),
			want: ebsDisk(func(d *Disk) { d.ReadOnly, d.FSGroup = true, false }),
		},
		{
			name: "the PV source's readOnly",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.CSI.ReadOnly = true })},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.ReadOnly, d.FSGroup = true, false }),
		},
		{
			name: "no fsGroup without the pod's",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:  pod(pvcVol(false), func(p *corev1.Pod) { p.Spec.SecurityContext = nil }),
			want: ebsDisk(func(d *Disk) { d.FSGroup = false }),
		},
		{
			name: "fsGroupPolicy None",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1"), csiDriver(storagev1.NoneFSGroupPolicy)},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.FSGroup = false }),
		},
		{
			name: "fsGroupPolicy File without fsType, ReadWriteMany",
			objs: []runtime.Object{claim("data", "pv-1"), csiDriver(storagev1.FileFSGroupPolicy), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.CSI.FSType = ""
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.FSType = "" }),
		},
		{
			name: "default policy: no fsType, no fsGroup",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.CSI.FSType = "" })},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.FSType, d.FSGroup = "", false }),
		},
		{
			name: "ReadWriteOnceWithFSType: ReadWriteMany, no fsGroup",
			objs: []runtime.Object{claim("data", "pv-1"), csiDriver(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.FSGroup = false }),
		},
		{
			name: "default policy: ReadWriteOncePod",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(),
		},
		{
			name: "default policy: no access modes, no fsGroup",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil })},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.FSGroup = false }),
		},
		{
			name: "a Block PV as a device",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			})},
			pod:  pod(pvcVol(false), asDevice(false)),
			want: ebsDisk(func(d *Disk) { d.Block, d.FSGroup = true, false }),
		},
		{
			name: "a Block PV in volumeMounts",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: VolumeModeMismatch, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "volume data has volumeMode Block, but is specified in volumeMounts"},
		},
		{
			name:    "a Filesystem PV in an init container's volumeDevices",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:     pod(pvcVol(false), asDevice(true)),
			wantErr: &Error{Reason: VolumeModeMismatch, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		},
	})
}

// TestResolveDrivers: the sources and drivers a plugin does or does not
// attach, and a pod of several volumes.
func TestResolveDrivers(t *testing.T) {
	runResolve(t, []resolveCase{
		{
			name:    "a CSI ephemeral inline volume of a driver that offers it",
			objs:    []runtime.Object{lifecycleDriver("secrets-store.csi.k8s.io", storagev1.VolumeLifecycleEphemeral)},
			pod:     pod(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].csi", Message: "driver secrets-store.csi.k8s.io"},
		},
		{
			name:    "a driver the plugin does not attach",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:     pod(pvcVol(false)),
			drivers: []string{"local.csi.kipcell.io", "pd.csi.storage.gke.io"},
			wantErr: &Error{Reason: DriverNotAttached, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "does not attach volumes of CSI driver ebs.csi.aws.com (it attaches: local.csi.kipcell.io, pd.csi.storage.gke.io)"},
		},
		{
			name:    "a plugin that attaches nothing",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod:     pod(pvcVol(false)),
			drivers: []string{},
			wantErr: &Error{Reason: DriverNotAttached, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "(it attaches: none)"},
		},
		{
			name:    "a hostPath PV",
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv"}}))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: `PersistentVolume "pv-1": a hostPath volume is not supported`},
		},
		{
			name: "the first volume's error",
			pod: pod(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "a"}}, func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "b"}}})
			}),
			wantErr: &Error{Volume: "data", Reason: LifecycleModeUnsupported, Field: "spec.volumes[1].csi", Message: "driver a "},
		},
		{
			name: "several disks in the pod's order",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			pod: pod(pvcVol(false), func(p *corev1.Pod) {
				p.Spec.Volumes = append([]corev1.Volume{{Name: "first", VolumeSource: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}}}, p.Spec.Volumes...)
			}),
			want: append([]Disk{{Volume: "first", Driver: "ebs.csi.aws.com", Handle: "vol-1"}}, ebsDisk()...),
		},
	})
}

func lifecycleDriver(name string, modes ...storagev1.VolumeLifecycleMode) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: modes}}
}

// TestResolveLifecycleModes: a volume whose lifecycle mode the driver's
// CSIDriver does not list is refused as the kubelet's CSI mounter refuses
// it, with its message and its FailedMount event; without a CSIDriver only
// Persistent volumes are had.
func TestResolveLifecycleModes(t *testing.T) {
	const prefix = "MountVolume.SetUp failed for volume %q : kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: "
	inlineCSI := pod(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "inline.csi.example.com"}})
	tests := []struct {
		name      string
		objs      []runtime.Object
		pod       *corev1.Pod
		want      []Disk
		wantEvent string // "": no Error of this kind
		wantMsg   string
	}{
		{
			name: "inline, no CSIDriver", pod: inlineCSI, wantEvent: EventFailedMount,
			wantMsg: fmt.Sprintf(prefix, "data") + `volume mode "Ephemeral" not supported by driver inline.csi.example.com (no CSIDriver object)`,
		},
		{
			name: "inline, a CSIDriver of Persistent volumes", pod: inlineCSI, wantEvent: EventFailedMount,
			objs:    []runtime.Object{lifecycleDriver("inline.csi.example.com", storagev1.VolumeLifecyclePersistent)},
			wantMsg: fmt.Sprintf(prefix, "data") + `volume mode "Ephemeral" not supported by driver inline.csi.example.com (only supports ["Persistent"])`,
		},
		{
			name: "inline, a CSIDriver as the API server defaults it", pod: inlineCSI, wantEvent: EventFailedMount,
			objs:    []runtime.Object{lifecycleDriver("inline.csi.example.com")},
			wantMsg: fmt.Sprintf(prefix, "data") + `volume mode "Ephemeral" not supported by driver inline.csi.example.com (only supports ["Persistent"])`,
		},
		{
			name: "a PV of a driver of Ephemeral volumes only", pod: pod(pvcVol(false)), wantEvent: EventFailedMount,
			objs:    []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1"), lifecycleDriver("ebs.csi.aws.com", storagev1.VolumeLifecycleEphemeral)},
			wantMsg: fmt.Sprintf(prefix, "pv-1") + `volume mode "Persistent" not supported by driver ebs.csi.aws.com (only supports ["Ephemeral"])`,
		},
		{
			name: "an inline in-tree disk of a driver of Ephemeral volumes only", wantEvent: EventFailedMount,
			pod:     pod(corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc"}}),
			objs:    []runtime.Object{lifecycleDriver("ebs.csi.aws.com", storagev1.VolumeLifecycleEphemeral)},
			wantMsg: fmt.Sprintf(prefix, "data") + `volume mode "Persistent" not supported by driver ebs.csi.aws.com (only supports ["Ephemeral"])`,
		},
		{
			name: "a PV of a driver of both", pod: pod(pvcVol(false)),
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1"),
				lifecycleDriver("ebs.csi.aws.com", storagev1.VolumeLifecycleEphemeral, storagev1.VolumeLifecyclePersistent)},
			want: ebsDisk(),
		},
		{
			name: "a PV without a CSIDriver", pod: pod(pvcVol(false)),
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1")},
			want: ebsDisk(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(t.Context(), NewSource(fake.NewClientset(tt.objs...)), tt.pod, allDrivers)
			if tt.wantEvent == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Resolve (-want +got):\n%s", diff)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Resolve = %v, %v; want an *Error", got, err)
			}
			if e.Reason != LifecycleModeUnsupported || e.Event != tt.wantEvent || e.Message != tt.wantMsg {
				t.Errorf("Resolve error = reason %s, event %q, message\n%s\nwant %s, %q,\n%s", e.Reason, e.Event, e.Message, LifecycleModeUnsupported, tt.wantEvent, tt.wantMsg)
			}
		})
	}
}

// TestResolveZones: the zones of a PV's node affinity and labels.
func TestResolveZones(t *testing.T) {
	runResolve(t, []resolveCase{
		{
			name: "a local PV on a node",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", withSource(corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/a"}}), func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("kubernetes.io/hostname", "worker-1")}})
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: NodeAffinity, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "nodeAffinity requires kubernetes.io/hostname In [worker-1]"},
		},
		{
			name: "a PV pinned by matchFields metadata.name",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", "worker-1")}})
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: NodeAffinity, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "requires node worker-1"},
		},
		{
			name: "zones: terms ORed, expressions of a term intersected",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
						in("topology.kubernetes.io/zone", "us-east-1a", "us-east-1b"),
						in("topology.ebs.csi.aws.com/zone", "us-east-1b", "us-east-1c"),
						in("topology.kubernetes.io/region", "us-east-1"),
					}},
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("failure-domain.beta.kubernetes.io/zone", "us-east-1d")}},
				)
			})},
			pod: pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) {
				d.Zones = []string{"us-east-1b", "us-east-1d"}
				d.ZoneSource = `PersistentVolume "pv-1" nodeAffinity topology.kubernetes.io/zone,topology.ebs.csi.aws.com/zone,failure-domain.beta.kubernetes.io/zone`
			}),
		},
		{
			name: "zones: a term without a zone allows any",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("topology.gke.io/zone", "europe-west1-b")}},
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("topology.kubernetes.io/region", "europe-west1")}},
				)
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.Zones, d.ZoneSource = nil, "" }),
		},
		{
			name: "zones: Exists on a zone key allows any",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpExists},
				}})
			})},
			pod:  pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) { d.Zones, d.ZoneSource = nil, "" }),
		},
		{
			name: "zones: NotIn is refused",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}},
				}})
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: NodeAffinity, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "NotIn is not supported"},
		},
		{
			name: "zones: a term whose zones do not meet",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					in("topology.kubernetes.io/zone", "a"), in("topology.ebs.csi.aws.com/zone", "b"),
				}})
			})},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: NodeAffinity, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "nodeAffinity leaves no zone"},
		},
		{
			name: "zones: the PV's labels when its affinity names none",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", func(pv *corev1.PersistentVolume) {
				pv.Labels = map[string]string{"failure-domain.beta.kubernetes.io/zone": "us-east-1c"}
				pv.Spec.NodeAffinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("topology.kubernetes.io/region", "us-east-1")}})
			})},
			pod: pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) {
				d.Zones, d.ZoneSource = []string{"us-east-1c"}, `PersistentVolume "pv-1" label failure-domain.beta.kubernetes.io/zone`
			}),
		},
	})
}

// TestResolveInTree: in-tree EBS, PD and Azure disk PVs, migrated to their
// CSI drivers.
func TestResolveInTree(t *testing.T) {
	shared := corev1.AzureSharedBlobDisk
	runResolve(t, []resolveCase{
		{
			name: "in-tree EBS PV: handle without aws://zone/, zone from the ID",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1b/vol-0abc", FSType: "xfs"},
			}))},
			pod: pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) {
				d.FSType = "xfs"
				d.Zones, d.ZoneSource = []string{"us-east-1b"}, `PersistentVolume "pv-1" volumeID aws://us-east-1b/vol-0abc`
			}),
		},
		{
			name: "in-tree EBS PV: its labels' zone before the ID's",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1b/vol-0abc", FSType: "ext4"},
			}), func(pv *corev1.PersistentVolume) {
				pv.Labels = map[string]string{"topology.kubernetes.io/zone": "us-east-1a"}
			})},
			pod: pod(pvcVol(false)),
			want: ebsDisk(func(d *Disk) {
				d.ZoneSource = `PersistentVolume "pv-1" label topology.kubernetes.io/zone`
			}),
		},
		{
			name: "in-tree EBS PV with a partition",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", withSource(corev1.PersistentVolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc", Partition: 1},
			}))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "awsElasticBlockStore partition 1 is not supported"},
		},
		{
			name: "in-tree PD PV: the zone of its label in the handle",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{
				GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "pd-1", FSType: "ext4"},
			}), func(pv *corev1.PersistentVolume) {
				pv.Labels = map[string]string{"topology.kubernetes.io/zone": "europe-west1-b"}
				// In-tree PD took ReadWriteMany as ReadWriteOnce.
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			})},
			pod: pod(pvcVol(false)),
			want: []Disk{{
				Volume: "data", Claim: "data", PV: "pv-1",
				Driver: "pd.csi.storage.gke.io", Handle: "projects/UNSPECIFIED/zones/europe-west1-b/disks/pd-1", FSType: "ext4",
				FSGroup: true,
				Zones:   []string{"europe-west1-b"}, ZoneSource: `PersistentVolume "pv-1" label topology.kubernetes.io/zone`,
			}},
		},
		{
			name: "in-tree regional PD PV",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{
				GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "pd-1"},
			}), func(pv *corev1.PersistentVolume) {
				pv.Labels = map[string]string{"failure-domain.beta.kubernetes.io/zone": "europe-west1-b__europe-west1-c"}
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
			})},
			pod: pod(pvcVol(false)),
			want: []Disk{{
				Volume: "data", Claim: "data", PV: "pv-1",
				Driver: "pd.csi.storage.gke.io", Handle: "projects/UNSPECIFIED/regions/europe-west1/disks/pd-1",
				Zones: []string{"europe-west1-b", "europe-west1-c"}, ZoneSource: `PersistentVolume "pv-1" label failure-domain.beta.kubernetes.io/zone`,
			}},
		},
		{
			name: "in-tree Azure PV",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", noAffinity, withSource(corev1.PersistentVolumeSource{
				AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d", FSType: ptr.To("ext4"), ReadOnly: ptr.To(true)},
			}))},
			pod: pod(pvcVol(false)),
			want: []Disk{{
				Volume: "data", Claim: "data", PV: "pv-1",
				Driver: "disk.csi.azure.com", Handle: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d", FSType: "ext4", ReadOnly: true,
			}},
		},
		{
			name: "in-tree Azure PV of a shared blob disk",
			objs: []runtime.Object{claim("data", "pv-1"), ebsPV("pv-1", withSource(corev1.PersistentVolumeSource{
				AzureDisk: &corev1.AzureDiskVolumeSource{DataDiskURI: "https://x/d.vhd", Kind: &shared},
			}))},
			pod:     pod(pvcVol(false)),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].persistentVolumeClaim.claimName", Message: "azureDisk kind Shared is not supported"},
		},
	})
}

// TestResolveInline: in-tree inline EBS, PD and Azure disk volumes.
func TestResolveInline(t *testing.T) {
	runResolve(t, []resolveCase{
		{
			name: "inline EBS",
			pod:  pod(corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-0abc", FSType: "ext4"}}),
			want: []Disk{{
				Volume: "data", Driver: "ebs.csi.aws.com", Handle: "vol-0abc", FSType: "ext4", FSGroup: true,
				Zones: []string{"us-east-1a"}, ZoneSource: `volume "data" volumeID aws://us-east-1a/vol-0abc`,
			}},
		},
		{
			name: "inline EBS, a bare ID: any zone",
			pod:  pod(corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc"}}),
			want: []Disk{{Volume: "data", Driver: "ebs.csi.aws.com", Handle: "vol-0abc"}},
		},
		{
			name:    "inline EBS of a malformed ID",
			pod:     pod(corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/disk-1"}}),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].awsElasticBlockStore", Message: "invalid format for AWS volume (aws://us-east-1a/disk-1)"},
		},
		{
			name: "inline PD, read-only",
			pod:  pod(corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "pd-1", FSType: "ext4", ReadOnly: true}}),
			want: []Disk{{Volume: "data", Driver: "pd.csi.storage.gke.io", Handle: "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd-1", FSType: "ext4", ReadOnly: true}},
		},
		{
			name:    "inline PD with a partition",
			pod:     pod(corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "pd-1", Partition: 2}}),
			wantErr: &Error{Reason: UnsupportedVolume, Field: "spec.volumes[1].gcePersistentDisk.partition", Message: "gcePersistentDisk partition 2 is not supported"},
		},
		{
			name: "inline Azure disk",
			pod:  pod(corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DataDiskURI: "/subscriptions/s/disks/d", FSType: ptr.To("xfs")}}),
			want: []Disk{{Volume: "data", Driver: "disk.csi.azure.com", Handle: "/subscriptions/s/disks/d", FSType: "xfs", FSGroup: true}},
		},
		{
			name:    "inline Azure disk of an unsupported driver",
			pod:     pod(corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DataDiskURI: "/subscriptions/s/disks/d"}}),
			drivers: []string{"ebs.csi.aws.com"},
			wantErr: &Error{Reason: DriverNotAttached, Field: "spec.volumes[1].azureDisk", Message: "CSI driver disk.csi.azure.com (it attaches: ebs.csi.aws.com)"},
		},
	})
}

func runResolve(t *testing.T, tests []resolveCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drivers := tt.drivers
			if drivers == nil {
				drivers = allDrivers
			}
			src := NewSource(fake.NewClientset(tt.objs...))
			got, err := Resolve(t.Context(), src, tt.pod, drivers)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Resolve (-want +got):\n%s", diff)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Resolve = %v, %v; want an *Error %s", got, err, tt.wantErr.Reason)
			}
			volume := tt.wantErr.Volume
			if volume == "" {
				volume = "data"
			}
			if e.Reason != tt.wantErr.Reason || e.Field != tt.wantErr.Field || e.Volume != volume || !strings.Contains(e.Message, tt.wantErr.Message) {
				t.Errorf("Resolve error = %+v, want reason %s, field %s, volume %s, a message with %q", e, tt.wantErr.Reason, tt.wantErr.Field, volume, tt.wantErr.Message)
			}
		})
	}
}

// TestResolveTransient: an API error that is not NotFound is no *Error
// but the API's, wrapped, so that the caller retries.
func TestResolveTransient(t *testing.T) {
	tests := []struct {
		name     string
		resource string
	}{
		{"claim", "persistentvolumeclaims"},
		{"volume", "persistentvolumes"},
		{"driver", "csidrivers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(claim("data", "pv-1"), ebsPV("pv-1"))
			client.PrependReactor("get", tt.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("etcd is slow")
			})
			_, err := Resolve(t.Context(), NewSource(client), pod(pvcVol(false)), allDrivers)
			var e *Error
			if err == nil || errors.As(err, &e) || !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("Resolve = %v, want the API's ServiceUnavailable, not an *Error", err)
			}
		})
	}
}

func TestUniqueName(t *testing.T) {
	if got, want := UniqueName("ebs.csi.aws.com", "vol-0abc"), corev1.UniqueVolumeName("kubernetes.io/csi/ebs.csi.aws.com^vol-0abc"); got != want {
		t.Errorf("UniqueName = %q, want %q", got, want)
	}
}

func TestIsZoneKey(t *testing.T) {
	for key, want := range map[string]bool{
		"topology.kubernetes.io/zone":            true,
		"failure-domain.beta.kubernetes.io/zone": true,
		"topology.ebs.csi.aws.com/zone":          true,
		"topology.gke.io/zone":                   true,
		"topology.disk.csi.azure.com/zone":       true,
		"topology.kubernetes.io/region":          false,
		"example.com/zone":                       false,
		"kubernetes.io/hostname":                 false,
	} {
		if got := IsZoneKey(key); got != want {
			t.Errorf("IsZoneKey(%q) = %v, want %v", key, got, want)
		}
	}
}
