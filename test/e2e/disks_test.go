//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	local "github.com/kipcell/kip/plugins/local"
	"github.com/kipcell/kip/test/e2e/framework"
)

// diskSize is the size of the tests' disks: enough for ext4 and a file.
const diskSize = 64 << 20

// newDisk makes a blank disk in zone the way the pass's cloud makes one
// and returns its CSI driver and handle: the local plugin's disks are
// files in its state directory (what kip-local's provisioner calls).
func newDisk(t *testing.T, name, zone string) (driver, handle string) {
	t.Helper()
	switch framework.Pass() {
	case "local":
		handle = fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano())
		if err := local.CreateVolume(t.Context(), kip.StateDir, handle, zone, diskSize); err != nil {
			t.Fatalf("creating disk %s: %v", handle, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := local.DeleteVolume(ctx, kip.StateDir, handle); err != nil {
				t.Logf("deleting disk %s: %v", handle, err)
			}
		})
		return local.VolumeDriver, handle
	default:
		t.Fatalf("no disks in the %s pass yet", framework.Pass())
		return "", ""
	}
}

// passZone is the zone the pass's plugin launches cells in.
func passZone() string {
	switch framework.Pass() {
	case "local":
		return "local"
	default:
		return ""
	}
}

// staticPV creates a PV of the disk, bound ahead to the claim
// namespace/claim (as an operator pre-binds a disk to a StatefulSet's
// claim). It has no node affinity: the Kip node of the e2e runs carries
// no zone label (node.zone), which the scheduler would hold a PV's zone
// against.
func staticPV(t *testing.T, ns, claim, driver, handle string, mode corev1.PersistentVolumeMode) string {
	t.Helper()
	name := "pv-" + ns + "-" + claim
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(diskSize, resource.BinarySI)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: handle, FSType: "ext4",
			}},
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
	if _, err := f.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PV %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// TestStatefulSetKeepsItsData: a StatefulSet of two replicas, each with
// a disk of its own (a volumeClaimTemplate bound to the pass's disks):
// each pod writes to its disk, which the agent formatted; a pod deleted
// and re-created on a new cell reads what its predecessor wrote, after
// kip detached the disk from the old cell and attached it to the new.
func TestStatefulSetKeepsItsData(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	zone := passZone()
	for i := range 2 {
		driver, handle := newDisk(t, fmt.Sprintf("sts-%d", i), zone)
		staticPV(t, ns, fmt.Sprintf("data-keeper-%d", i), driver, handle, corev1.PersistentVolumeFilesystem)
	}
	spec := onKip(corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref,
		Command:      []string{"sh", "-c", `echo "started as $(hostname)" >> /data/log; trap 'exit 0' TERM; while true; do sleep 1; done`},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	})
	spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "keeper"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), ServiceName: "keeper",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keeper"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "keeper"}}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(""),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(diskSize, resource.BinarySI)}},
				},
			}},
		},
	}
	if _, err := f.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := f.WaitForPods(t, ns, "app=keeper", 2, 3*time.Minute, "Running", running)
	for _, p := range pods {
		out, code := kubectl(t, "exec", "-n", ns, p.Name, "--", "sh", "-c", "cat /data/log; stat -c '%g' /data; grep ' /data ' /proc/mounts")
		if code != 0 || !strings.HasPrefix(out, "started as "+p.Name+"\n2000\n") || !strings.Contains(out, "ext4") {
			t.Errorf("%s: the disk shows %q (exit %d), want its line, group 2000 and an ext4 mount", p.Name, out, code)
		}
	}
	// A new pod has a new UID, and so a new cell (kip-<uid>).
	first := getPod(t, ns, "keeper-0")
	if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), "keeper-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 3*time.Minute, "keeper-0 again, on a new cell", func(context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(t.Context(), "keeper-0", metav1.GetOptions{})
		return err == nil && p.UID != first.UID && running(p), nil
	})
	out, code := kubectl(t, "exec", "-n", ns, "keeper-0", "--", "cat", "/data/log")
	if want := "started as keeper-0\nstarted as keeper-0\n"; code != 0 || out != want {
		t.Errorf("keeper-0's disk after its replacement: %q (exit %d), want %q: the first pod's line kept", out, code, want)
	}
	events, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=keeper-0", "-o", "custom-columns=REASON:.reason")
	if !strings.Contains(events, "SuccessfulAttachVolume") {
		t.Errorf("keeper-0's events lack SuccessfulAttachVolume:\n%s", events)
	}
}

// TestBlockVolumeAndRefusedDisks: a volumeMode Block disk reaches the
// container as a device at its devicePath; a disk in another zone than
// the cell's and a disk in use by another pod each leave their pod
// Pending with the event that names why.
func TestBlockVolumeAndRefusedDisks(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	zone := passZone()
	driver, handle := newDisk(t, "block", zone)
	staticPV(t, ns, "raw", driver, handle, corev1.PersistentVolumeBlock)
	createClaim(t, ns, "raw", corev1.PersistentVolumeBlock)
	spec := onKip(corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref,
		Command:       []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
		VolumeDevices: []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xraw"}},
	})
	spec.Volumes = []corev1.Volume{claimVolume("raw", "raw")}
	createPod(t, ns, "blocky", spec)
	f.WaitForPods(t, ns, "app=blocky", 1, 3*time.Minute, "Running", running)
	out, code := kubectl(t, "exec", "-n", ns, "blocky", "--", "sh", "-c", "test -b /dev/xraw && echo hello > /dev/xraw && head -c 5 /dev/xraw")
	if code != 0 || out != "hello" {
		t.Errorf("the block device in the container: %q (exit %d), want it written and read back", out, code)
	}

	// The same claim for a second pod: the disk is attached to blocky's
	// cell.
	spec2 := spec.DeepCopy()
	createPod(t, ns, "second", *spec2)
	waitEvent(t, ns, "second", "FailedAttachVolume", "Multi-Attach error for volume")

	// A disk in another zone than the cell's: the plugin refuses to
	// attach it (wrong-zone), and the pod waits saying so.
	driver, handle = newDisk(t, "elsewhere", "nowhere-1")
	staticPV(t, ns, "far", driver, handle, corev1.PersistentVolumeFilesystem)
	createClaim(t, ns, "far", corev1.PersistentVolumeFilesystem)
	far := onKip(sleeper())
	far.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "far", MountPath: "/data"}}
	far.Volumes = []corev1.Volume{claimVolume("far", "far")}
	createPod(t, ns, "far", far)
	waitEvent(t, ns, "far", "FailedAttachVolume", "wrong-zone")
}

// createClaim creates claim name in ns for the PV pre-bound to it.
func createClaim(t *testing.T, ns, name string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeMode:       &mode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(diskSize, resource.BinarySI)}},
		},
	}
	if _, err := f.Client.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claimVolume is a pod volume name of claim.
func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}
}

// waitEvent waits for an event of reason on pod whose message contains
// text.
func waitEvent(t *testing.T, ns, pod, reason, text string) {
	t.Helper()
	f.WaitFor(t, 2*time.Minute, fmt.Sprintf("a %s event on %s saying %q", reason, pod, text), func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
}
