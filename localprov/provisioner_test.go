package localprov

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kipcell/kip/plugins/local"
)

const (
	zone     = "local"
	nodeName = "kip"
	claimUID = "0f9a2c1e-1111-4222-8333-444455556666"
	pvName   = "pvc-" + claimUID
)

// class is a StorageClass of the driver, as deploy/examples'
// kip-local: WaitForFirstConsumer, reclaim policy Delete.
func class(mods ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	del := corev1.PersistentVolumeReclaimDelete
	c := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "kip-local"},
		Provisioner:       Driver,
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     &del,
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// claim is a claim of class kip-local as the PV controller leaves it for
// the provisioner once the scheduler chose node kip: annotated with the
// provisioner and the selected node, ReadWriteOnce, 1Gi.
func claim(mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	className := "kip-local"
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "data-web-0", Namespace: "default", UID: claimUID, ResourceVersion: "7",
			Annotations: map[string]string{AnnStorageProvisioner: Driver, AnnSelectedNode: nodeName},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &className,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// node is the Kip node with its zone label and its CSINode listing the
// driver with the zone key, as kip writes them with node.zone set.
func node(zoneLabel string) []runtime.Object {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{ZoneKey: zoneLabel}}}
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: Driver, NodeID: nodeName, TopologyKeys: []string{ZoneKey},
		}}},
	}
	return []runtime.Object{n, cn}
}

// wantVolume is the volume of claim() on node kip, with mods applied.
func wantVolume(mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	fsMode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: pvName, Annotations: map[string]string{AnnProvisionedBy: Driver}, Finalizers: []string{Finalizer},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(1<<30, resource.BinarySI)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &fsMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: Driver, VolumeHandle: pvName, FSType: "ext4",
			}},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "kip-local",
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data-web-0",
				UID: claimUID, ResourceVersion: "7",
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ZoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

// ignoreServerFields are what the API server (the fake's tracker) adds
// to an object.
var ignoreServerFields = cmp.Options{
	cmpopts.IgnoreFields(corev1.PersistentVolume{}, "TypeMeta"),
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields"),
}

func newTestProvisioner(t *testing.T, objs ...runtime.Object) (*Provisioner, *fake.Clientset, *record.FakeRecorder, string) {
	t.Helper()
	dir := t.TempDir()
	client := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(100)
	p, err := New(client, Config{StateDir: dir, Zone: zone}, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, client, rec, dir
}

// events drains the recorder: "Type Reason message" lines.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// reasons is each event's type and reason.
func reasons(evs []string) []string {
	var out []string
	for _, e := range evs {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

// diskSize is the size of a disk's file, -1 when there is none.
func diskSize(t *testing.T, stateDir, handle string) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(stateDir, "volumes", handle+".img"))
	if errors.Is(err, fs.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: CreateVolume writes no block of it.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 >= st.Size() && st.Size() > 0 {
		t.Errorf("disk %s is not sparse: %d blocks of 512 bytes for %d bytes", handle, sys.Blocks, st.Size())
	}
	return st.Size()
}

// syncClaimCase is one case of the TestSyncClaim tests: the objects
// there are, and what syncClaim of the claim default/data-web-0 does.
type syncClaimCase struct {
	name    string
	objs    []runtime.Object
	want    *corev1.PersistentVolume // nil: no volume
	events  []string                 // type and reason of each
	failure string                   // in the ProvisioningFailed message
	retry   bool                     // syncClaim asks to be retried
	// selectedNode is the claim's annotation afterwards.
	selectedNode string
}

// TestSyncClaimWhich: which claims are provisioned, and when.
func TestSyncClaimWhich(t *testing.T) {
	immediate := func(c *storagev1.StorageClass) {
		m := storagev1.VolumeBindingImmediate
		c.VolumeBindingMode = &m
	}
	noSelectedNode := func(c *corev1.PersistentVolumeClaim) { delete(c.Annotations, AnnSelectedNode) }
	runSyncClaim(t, []syncClaimCase{
		{
			name:   "WaitForFirstConsumer with the node chosen: disk and volume in its zone",
			objs:   append(node(zone), class(), claim()),
			want:   wantVolume(),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:   "Immediate: no node needed",
			objs:   []runtime.Object{class(immediate), claim(noSelectedNode)},
			want:   wantVolume(),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"},
		},
		{
			name: "WaitForFirstConsumer before the scheduler chose a node: nothing yet",
			objs: []runtime.Object{class(), claim(noSelectedNode)},
		},
		{
			name: "the PV controller does not wait for this driver: nothing",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				c.Annotations[AnnStorageProvisioner] = "ebs.csi.aws.com"
			})),
			selectedNode: nodeName,
		},
		{
			name: "the beta annotation is read too",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				delete(c.Annotations, AnnStorageProvisioner)
				c.Annotations[annBetaStorageProvisioner] = Driver
			})),
			want:   wantVolume(),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:         "a class of another provisioner: nothing",
			objs:         append(node(zone), class(func(c *storagev1.StorageClass) { c.Provisioner = "ebs.csi.aws.com" }), claim()),
			selectedNode: nodeName,
		},
		{
			name:         "a claim that names its volume: nothing",
			objs:         append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-by-hand" })),
			selectedNode: nodeName,
		},
		{
			name:  "the class does not exist yet: retried, no event",
			objs:  append(node(zone), claim()),
			retry: true, selectedNode: nodeName,
		},
		{
			name: "the volume exists already: nothing more",
			objs: append(node(zone), class(), claim(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}}),
			want: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}}, selectedNode: nodeName,
		},
	})
}

// TestSyncClaimSpec: what of the claim and its class is honoured, and what
// is refused.
func TestSyncClaimSpec(t *testing.T) {
	accessMode := func(m corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{m} }
	}
	fsType := func(fs string) func(*storagev1.StorageClass) {
		return func(c *storagev1.StorageClass) { c.Parameters = map[string]string{ParamFSType: fs} }
	}
	runSyncClaim(t, []syncClaimCase{
		{
			name:   "ReadWriteMany is refused, naming it",
			objs:   append(node(zone), class(), claim(accessMode(corev1.ReadWriteMany))),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "access mode ReadWriteMany is not supported", selectedNode: nodeName,
		},
		{
			name:   "ReadOnlyMany is refused, naming it",
			objs:   append(node(zone), class(), claim(accessMode(corev1.ReadOnlyMany))),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "access mode ReadOnlyMany is not supported", selectedNode: nodeName,
		},
		{
			name: "ReadWriteOncePod",
			objs: append(node(zone), class(), claim(accessMode(corev1.ReadWriteOncePod))),
			want: wantVolume(func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
			}),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:   "fsType xfs from the class",
			objs:   append(node(zone), class(fsType("xfs")), claim()),
			want:   wantVolume(func(pv *corev1.PersistentVolume) { pv.Spec.CSI.FSType = "xfs" }),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:   "an fsType the cell cannot format",
			objs:   append(node(zone), class(fsType("btrfs")), claim()),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: `fsType "btrfs" is not supported`, selectedNode: nodeName,
		},
		{
			name:   "an unknown class parameter",
			objs:   append(node(zone), class(func(c *storagev1.StorageClass) { c.Parameters = map[string]string{"type": "gp3"} }), claim()),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: `StorageClass parameter "type" is not supported`, selectedNode: nodeName,
		},
		{
			name: "Block mode: no filesystem",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				m := corev1.PersistentVolumeBlock
				c.Spec.VolumeMode = &m
			})),
			want: wantVolume(func(pv *corev1.PersistentVolume) {
				m := corev1.PersistentVolumeBlock
				pv.Spec.VolumeMode = &m
				pv.Spec.CSI.FSType = ""
			}),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name: "a size rounded up to a MiB",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1500Ki")
			})),
			want: wantVolume(func(pv *corev1.PersistentVolume) {
				pv.Spec.Capacity[corev1.ResourceStorage] = *resource.NewQuantity(2<<20, resource.BinarySI)
			}),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name: "reclaimPolicy Retain: no finalizer",
			objs: append(node(zone), class(func(c *storagev1.StorageClass) {
				r := corev1.PersistentVolumeReclaimRetain
				c.ReclaimPolicy = &r
			}), claim()),
			want: wantVolume(func(pv *corev1.PersistentVolume) {
				pv.Finalizers = nil
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			}),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:   "mount options from the class",
			objs:   append(node(zone), class(func(c *storagev1.StorageClass) { c.MountOptions = []string{"noatime"} }), claim()),
			want:   wantVolume(func(pv *corev1.PersistentVolume) { pv.Spec.MountOptions = []string{"noatime"} }),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name: "a claim selector is refused",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			})),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "claim Selector is not supported", selectedNode: nodeName,
		},
		{
			name: "a data source is refused",
			objs: append(node(zone), class(), claim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "other"}
			})),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "a data source", selectedNode: nodeName,
		},
	})
}

// TestSyncClaimTopology: the class's allowedTopologies and the selected
// node's zone and driver.
func TestSyncClaimTopology(t *testing.T) {
	runSyncClaim(t, []syncClaimCase{
		{
			name: "allowedTopologies without the plugin's zone",
			objs: append(node(zone), class(func(c *storagev1.StorageClass) {
				c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: ZoneKey, Values: []string{"us-east-1a"}},
				}}}
			}), claim()),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "allowedTopologies do not allow zone local", selectedNode: nodeName,
		},
		{
			name: "allowedTopologies with the plugin's zone",
			objs: append(node(zone), class(func(c *storagev1.StorageClass) {
				c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: ZoneKey, Values: []string{"us-east-1a", zone}},
				}}}
			}), claim()),
			want:   wantVolume(),
			events: []string{"Normal Provisioning", "Normal ProvisioningSucceeded"}, selectedNode: nodeName,
		},
		{
			name:   "the selected node is in another zone: the scheduler chooses again",
			objs:   append(node("us-east-1a"), class(), claim()),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "selected node kip is in zone us-east-1a; local disks are made in zone local",
		},
		{
			name:   "the selected node is gone: the scheduler chooses again",
			objs:   []runtime.Object{class(), claim()},
			events: []string{"Warning ProvisioningFailed"}, failure: "selected node kip does not exist",
		},
		{
			name:   "the selected node does not run the driver (no CSINode): retried",
			objs:   []runtime.Object{node(zone)[0], class(), claim()},
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "does not run driver local.csi.kipcell.io",
			retry: true, selectedNode: nodeName,
		},
		{
			name:   "the selected node has no zone label: retried",
			objs:   append([]runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}}, node(zone)[1], class(), claim()),
			events: []string{"Normal Provisioning", "Warning ProvisioningFailed"}, failure: "has no label topology.local.csi.kipcell.io/zone",
			retry: true, selectedNode: nodeName,
		},
	})
}

func runSyncClaim(t *testing.T, tests []syncClaimCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, client, rec, dir := newTestProvisioner(t, tt.objs...)
			ctx := t.Context()
			err := p.syncClaim(ctx, "default/data-web-0")
			if (err != nil) != tt.retry {
				t.Errorf("syncClaim: err = %v, want a retry: %v", err, tt.retry)
			}
			evs := events(rec)
			if diff := cmp.Diff(tt.events, reasons(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s\n%q", diff, evs)
			}
			if tt.failure != "" && (len(evs) == 0 || !strings.Contains(evs[len(evs)-1], tt.failure) ||
				!strings.Contains(evs[len(evs)-1], `failed to provision volume with StorageClass "kip-local"`)) {
				t.Errorf("the failure event %q does not say %q", evs, tt.failure)
			}
			pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			switch {
			case tt.want == nil && !apierrors.IsNotFound(err):
				t.Errorf("a volume was made: %v, %v", pv, err)
			case tt.want != nil && err != nil:
				t.Errorf("no volume: %v", err)
			case tt.want != nil:
				if diff := cmp.Diff(tt.want, pv, ignoreServerFields); diff != "" {
					t.Errorf("volume (-want +got):\n%s", diff)
				}
			}
			// The disk exists exactly when this call made a volume.
			wantSize := int64(-1)
			if tt.want != nil && tt.want.Spec.CSI != nil {
				q := tt.want.Spec.Capacity[corev1.ResourceStorage]
				wantSize = q.Value()
			}
			if got := diskSize(t, dir, pvName); got != wantSize {
				t.Errorf("disk size = %d, want %d (-1: none)", got, wantSize)
			}
			c, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-web-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Annotations[AnnSelectedNode]; got != tt.selectedNode {
				t.Errorf("selected node = %q, want %q", got, tt.selectedNode)
			}
		})
	}
}

// TestSyncClaimTwice: a second sync of a provisioned claim (the informer's
// update, a resync) makes nothing more and leaves the disk's data alone.
func TestSyncClaimTwice(t *testing.T) {
	p, client, rec, dir := newTestProvisioner(t, append(node(zone), class(), claim())...)
	ctx := t.Context()
	if err := p.syncClaim(ctx, "default/data-web-0"); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "volumes", pvName+".img")
	if err := os.WriteFile(img, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.syncClaim(ctx, "default/data-web-0"); err != nil {
		t.Fatal(err)
	}
	if got := reasons(events(rec)); len(got) != 2 {
		t.Errorf("events after two syncs: %q, want Provisioning and ProvisioningSucceeded once", got)
	}
	if data, err := os.ReadFile(img); err != nil || string(data) != "data" {
		t.Errorf("disk after the second sync: %q, %v", data, err)
	}
	list, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("volumes: %v, %v; want one", list, err)
	}
}

// TestSyncClaimDiskFails: a disk that cannot be made is reported and
// retried; the next attempt, once the cause is gone, provisions.
func TestSyncClaimDiskFails(t *testing.T) {
	p, client, rec, _ := newTestProvisioner(t, append(node(zone), class(), claim())...)
	ctx := t.Context()
	p.createDisk = func(context.Context, string, string, string, int64) error {
		return errors.New("no space left on device")
	}
	if err := p.syncClaim(ctx, "default/data-web-0"); err == nil {
		t.Error("syncClaim: no error, want a retry")
	}
	evs := events(rec)
	if diff := cmp.Diff([]string{"Normal Provisioning", "Warning ProvisioningFailed"}, reasons(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !strings.Contains(evs[len(evs)-1], "no space left on device") {
		t.Errorf("the failure %q does not say why", evs[len(evs)-1])
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a volume without a disk: %v", err)
	}
	p.createDisk = local.CreateVolume
	if err := p.syncClaim(ctx, "default/data-web-0"); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err != nil {
		t.Errorf("no volume after the retry: %v", err)
	}
}

// released is the volume of claim() after the claim was deleted.
func released(mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := wantVolume(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased })
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func TestSyncVolume(t *testing.T) {
	bound := func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeBound }
	retain := func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	noFinalizer := func(pv *corev1.PersistentVolume) { pv.Finalizers = nil }
	tests := []struct {
		name       string
		pv         *corev1.PersistentVolume
		disk       bool  // the disk exists before
		deleteErr  error // deleteDisk fails so
		wantPV     bool  // the volume is still there
		finalizers []string
		wantDisk   bool
		events     []string
		retry      bool
	}{
		{
			name: "released, Delete: the disk, then the volume",
			pv:   released(), disk: true,
		},
		{
			name: "released, Delete, the disk gone already: the volume",
			pv:   released(),
		},
		{
			name: "released, Delete, made by hand (no annotation, the driver's): deleted",
			pv:   released(func(pv *corev1.PersistentVolume) { pv.Annotations = nil }), disk: true,
		},
		{
			name: "bound, Delete, no finalizer: it gets one",
			pv:   released(bound, noFinalizer), disk: true,
			wantPV: true, wantDisk: true, finalizers: []string{Finalizer},
		},
		{
			name: "bound, Delete: kept",
			pv:   released(bound), disk: true,
			wantPV: true, wantDisk: true, finalizers: []string{Finalizer},
		},
		{
			name: "released, Retain: kept, and its finalizer removed",
			pv:   released(retain), disk: true,
			wantPV: true, wantDisk: true,
		},
		{
			name: "released, Delete, another provisioner's: untouched",
			pv: released(func(pv *corev1.PersistentVolume) {
				pv.Annotations[AnnProvisionedBy] = "ebs.csi.aws.com"
				pv.Spec.CSI.Driver = "ebs.csi.aws.com"
			}),
			disk: true, wantPV: true, wantDisk: true, finalizers: []string{Finalizer},
		},
		{
			name: "released, Delete, the disk cannot be deleted: an event, retried",
			pv:   released(), disk: true, deleteErr: errors.New("disk pvc-x is attached to instance i-1"),
			wantPV: true, wantDisk: true, finalizers: []string{Finalizer},
			events: []string{"Warning VolumeFailedDelete"}, retry: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, client, rec, dir := newTestProvisioner(t, tt.pv)
			ctx := t.Context()
			if tt.disk {
				if err := local.CreateVolume(ctx, dir, pvName, zone, 1<<30); err != nil {
					t.Fatal(err)
				}
			}
			if tt.deleteErr != nil {
				p.deleteDisk = func(context.Context, string, string) error { return tt.deleteErr }
			}
			err := p.syncVolume(ctx, pvName)
			if (err != nil) != tt.retry {
				t.Errorf("syncVolume: err = %v, want a retry: %v", err, tt.retry)
			}
			if diff := cmp.Diff(tt.events, reasons(events(rec))); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			switch {
			case tt.wantPV && err != nil:
				t.Errorf("the volume is gone: %v", err)
			case !tt.wantPV && !apierrors.IsNotFound(err):
				t.Errorf("the volume is still there: %v, %v", pv, err)
			case tt.wantPV:
				if diff := cmp.Diff(tt.finalizers, pv.Finalizers, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("finalizers (-want +got):\n%s", diff)
				}
			}
			if got := diskSize(t, dir, pvName) >= 0; got != tt.wantDisk {
				t.Errorf("disk exists = %v, want %v", got, tt.wantDisk)
			}
		})
	}
}

// TestRun: the provisioner as it runs, on the informers' events: a claim
// gets its volume, and the volume released under Delete goes with its
// disk.
func TestRun(t *testing.T) {
	p, client, _, dir := newTestProvisioner(t, append(node(zone), class())...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pv *corev1.PersistentVolume
	waitFor(t, "the volume", func() bool {
		var err error
		pv, err = client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil
	})
	if got := diskSize(t, dir, pvName); got != 1<<30 {
		t.Fatalf("disk size = %d, want 1Gi", got)
	}
	// The claim deleted, the PV controller releases the volume.
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the volume's deletion", func() bool {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if got := diskSize(t, dir, pvName); got != -1 {
		t.Errorf("the disk is still there (%d bytes)", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	rec := record.NewFakeRecorder(1)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"relative state directory", Config{StateDir: "state", Zone: zone}, "not an absolute path"},
		{"no zone", Config{StateDir: "/var/lib/kip/local"}, "no zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(client, tt.cfg, rec, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if _, err := New(client, Config{StateDir: "/var/lib/kip/local", Zone: zone}, rec, nil); err != nil {
		t.Errorf("New: %v", err)
	}
}
