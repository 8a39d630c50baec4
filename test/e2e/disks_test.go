//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/pluginapi"
	local "github.com/kipcell/kip/plugins/local"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/e2e/framework"
)

// diskSize is the size of the tests' disks: enough for ext4 and a file.
const diskSize = 64 << 20

// newDisk makes a blank disk in zone the way the pass's cloud makes one
// and returns its CSI driver and handle: the local plugin's disks are
// files in its state directory (what kip-local's provisioner calls).
func newDisk(t testing.TB, name, zone string) (driver, handle string) {
	t.Helper()
	switch framework.Pass() {
	case "local":
		handle = fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano())
		if err := local.CreateVolume(t.Context(), kip.StateDir, handle, zone, diskSize); err != nil {
			t.Fatalf("creating disk %s: %v", handle, err)
		}
		t.Cleanup(func() {
			// Once the test's pods are gone (deletePodsAtEnd) kip
			// detaches the disk; a disk still attached is deleted once
			// it is not, and one left attached fails the test.
			deadline := time.Now().Add(2 * time.Minute)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:usetesting // a Cleanup: t.Context() has ended
				err := local.DeleteVolume(ctx, kip.StateDir, handle)
				cancel()
				if err == nil || pluginapi.IsNotFound(err) {
					return
				}
				if !pluginapi.IsVolumeConflict(err) || time.Now().After(deadline) {
					t.Errorf("deleting disk %s after the test: %v", handle, err)
					return
				}
				time.Sleep(time.Second)
			}
		})
		return local.VolumeDriver, handle
	case framework.PluginAWS:
		return "ebs.csi.aws.com", ebsVolume(t, zone)
	case framework.PluginGCE:
		return "pd.csi.storage.gke.io", gceDisk(t, name, zone)
	case framework.PluginAzure:
		return "disk.csi.azure.com", azureDisk(t, name, zone)
	default:
		t.Fatalf("no disks in the %s pass yet", framework.Pass())
		return "", ""
	}
}

// simCall sends a JSON request to a simulator with client and fails the
// test unless it is accepted.
func simCall(t testing.TB, client *http.Client, method, url string, body any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer e2e")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, out)
	}
}

// ebsVolume creates a blank EBS volume in zone through the EC2
// simulator's API, tagged as the cluster's (the IAM policy's scope),
// waits until it is available, and returns its ID, the EBS CSI handle;
// the test's end deletes it once it is detached.
func ebsVolume(t testing.TB, zone string) string {
	t.Helper()
	client := kip.EC2Client()
	out, err := client.CreateVolume(t.Context(), &ec2.CreateVolumeInput{
		AvailabilityZone: aws.String(zone), Size: aws.Int32(1), VolumeType: ec2types.VolumeTypeGp3,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume,
			Tags: []ec2types.Tag{{Key: aws.String(pluginapi.TagCluster), Value: aws.String(kip.ClusterID)}}}},
	})
	if err != nil {
		t.Fatalf("creating an EBS volume in %s: %v", zone, err)
	}
	id := aws.ToString(out.VolumeId)
	state := func(ctx context.Context) (string, error) {
		d, err := client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		if err != nil || len(d.Volumes) == 0 {
			return "", err
		}
		return string(d.Volumes[0].State), nil
	}
	f.WaitFor(t, time.Minute, "volume "+id+" available", func(ctx context.Context) (bool, error) {
		s, _ := state(ctx)
		return s == "available", nil
	})
	t.Cleanup(func() {
		f.WaitFor(t, 2*time.Minute, "volume "+id+" detached and deleted", func(ctx context.Context) (bool, error) {
			switch s, err := state(ctx); {
			case err != nil && strings.Contains(err.Error(), "InvalidVolume.NotFound"):
				return true, nil
			case s != "available":
				return false, nil
			}
			_, _ = client.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id)})
			return false, nil
		})
	})
	return id
}

// gceDisk inserts a blank persistent disk in zone through the Compute
// Engine simulator's API, waits until it is READY, and returns its PD
// CSI handle; the test's end deletes it once it is detached.
func gceDisk(t testing.TB, name, zone string) string {
	t.Helper()
	disk := fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano()%1e9)
	base := fmt.Sprintf("%s/compute/v1/projects/%s/zones/%s/disks", kip.GCE.URL(), gcesim.DefaultProject, zone)
	simCall(t, http.DefaultClient, http.MethodPost, base, map[string]any{"name": disk, "sizeGb": "1"})
	f.WaitFor(t, time.Minute, "disk "+disk+" READY", func(context.Context) (bool, error) {
		d, ok := kip.GCE.Disk(zone, disk)
		return ok && d.Status == "READY", nil
	})
	t.Cleanup(func() {
		f.WaitFor(t, 2*time.Minute, "disk "+disk+" detached and deleted", func(ctx context.Context) (bool, error) {
			if d, ok := kip.GCE.Disk(zone, disk); !ok || d.Gone {
				return true, nil
			} else if len(d.Users) > 0 || d.Status != "READY" {
				return false, nil
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/"+disk, nil)
			if err != nil {
				return false, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			return false, nil
		})
	})
	return fmt.Sprintf("projects/%s/zones/%s/disks/%s", gcesim.DefaultProject, zone, disk)
}

// azureDisk creates a blank managed disk in zone (eastus-1) through the
// ARM simulator's API, waits until it is made, and returns its resource
// ID, the Azure Disk CSI handle; the test's end deletes it once it is
// detached.
func azureDisk(t testing.TB, name, zone string) string {
	t.Helper()
	disk := fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano()%1e9)
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/disks/%s",
		azuresim.DefaultSubscription, azuresim.DefaultResourceGroup, disk)
	url := kip.Azure.URL() + id + "?api-version=2024-03-02"
	simCall(t, kip.Azure.Client(), http.MethodPut, url, map[string]any{
		"location": azuresim.DefaultLocation, "zones": []string{strings.TrimPrefix(zone, azuresim.DefaultLocation+"-")},
		"properties": map[string]any{"creationData": map[string]any{"createOption": "Empty"}, "diskSizeGB": 1},
	})
	f.WaitFor(t, time.Minute, "disk "+disk+" made", func(context.Context) (bool, error) {
		d, ok := kip.Azure.Disk(azuresim.DefaultResourceGroup, disk)
		return ok && d.ProvisioningState == "Succeeded", nil
	})
	t.Cleanup(func() {
		f.WaitFor(t, 2*time.Minute, "disk "+disk+" detached and deleted", func(ctx context.Context) (bool, error) {
			if d, ok := kip.Azure.Disk(azuresim.DefaultResourceGroup, disk); !ok || d.Gone {
				return true, nil
			} else if d.VM != "" {
				return false, nil
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
			if err != nil {
				return false, err
			}
			req.Header.Set("Authorization", "Bearer e2e")
			resp, err := kip.Azure.Client().Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			return false, nil
		})
	})
	return id
}

// deletePodsAtEnd deletes the namespace's StatefulSets and pods at the
// test's end, before its disks are deleted (cleanups run last first), so
// that kip detaches them.
func deletePodsAtEnd(t testing.TB, ns string) {
	t.Cleanup(func() {
		ctx := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	})
}

// passZones are, for each pass, the zone its plugin launches cells in
// (own) and another zone of its cloud (other).
var passZones = map[string]struct{ own, other string }{
	framework.PluginLocal: {own: "local", other: "nowhere-1"},
	framework.PluginAWS:   {own: "us-east-1a", other: "us-east-1b"},
	framework.PluginGCE:   {own: gcesim.DefaultRegion + "-a", other: gcesim.DefaultRegion + "-b"},
	framework.PluginAzure: {own: azuresim.DefaultLocation + "-1", other: azuresim.DefaultLocation + "-2"},
}

// otherZone is a zone of the pass's cloud that is not passZone.
func otherZone() string { return cmp.Or(passZones[framework.Pass()].other, "nowhere-1") }

// passZone is the zone the pass's plugin launches cells in ("" for a pass
// without one).
func passZone() string { return passZones[framework.Pass()].own }

// staticPV creates a PV of the disk, bound ahead to the claim
// namespace/claim (as an operator pre-binds a disk to a StatefulSet's
// claim). Its zone is the pass's, as a zone label (an in-tree PV's
// way), which kip holds the cell's placement to; it has no node
// affinity, which the scheduler would hold against the Kip node of the
// e2e runs, which carries no zone label (node.zone).
func staticPV(t testing.TB, ns, claim, driver, handle string, mode corev1.PersistentVolumeMode) string {
	t.Helper()
	name := "pv-" + ns + "-" + claim
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: passZone()}},
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
		_ = f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	return name
}

// TestStatefulSetKeepsItsData: a StatefulSet of two replicas, each with
// a disk of its own (a volumeClaimTemplate bound to the pass's disks):
// each pod writes to its disk, which the agent formatted; a pod deleted
// and re-created on a new cell reads what its predecessor wrote, after
// kip detached the disk from the old cell and attached it to the new.
func TestStatefulSetKeepsItsData(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	zone := passZone()
	for i := range 2 {
		driver, handle := newDisk(t, fmt.Sprintf("sts-%d", i), zone)
		staticPV(t, ns, fmt.Sprintf("data-keeper-%d", i), driver, handle, corev1.PersistentVolumeFilesystem)
	}
	deletePodsAtEnd(t, ns)
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
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	zone := passZone()
	driver, handle := newDisk(t, "block", zone)
	staticPV(t, ns, "raw", driver, handle, corev1.PersistentVolumeBlock)
	createClaim(t, ns, "raw", corev1.PersistentVolumeBlock)
	deletePodsAtEnd(t, ns)
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

	// A disk in another zone than its PV says (and so than the cell's):
	// the plugin refuses to attach it (wrong-zone), and the pod waits
	// saying so.
	driver, handle = newDisk(t, "elsewhere", otherZone())
	staticPV(t, ns, "far", driver, handle, corev1.PersistentVolumeFilesystem)
	createClaim(t, ns, "far", corev1.PersistentVolumeFilesystem)
	far := onKip(sleeper())
	far.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "far", MountPath: "/data"}}
	far.Volumes = []corev1.Volume{claimVolume("far", "far")}
	createPod(t, ns, "far", far)
	waitEvent(t, ns, "far", "FailedAttachVolume", "wrong-zone")
}

// createClaim creates claim name in ns for the PV pre-bound to it.
func createClaim(t testing.TB, ns, name string, mode corev1.PersistentVolumeMode) {
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

// TestKillBetweenAttachAndStart: kip killed (SIGKILL) after it attached a
// pod's disk and before the pod started (the instance's agent is held
// back), and started again, adopts the cell, finds the disk attached to
// it (AttachVolume answers the attachment it has), and runs the pod: one
// instance, the disk attached once, to it; and once the pod is deleted
// the disk is detached, nothing leaked.
func TestKillBetweenAttachAndStart(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // EC2's VolumeInUse would show a second attach
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	zone := passZone()
	driver, handle := newDisk(t, "kill", zone)
	staticPV(t, ns, "kept", driver, handle, corev1.PersistentVolumeFilesystem)
	createClaim(t, ns, "kept", corev1.PersistentVolumeFilesystem)
	deletePodsAtEnd(t, ns)
	kip.EC2.SetAgentDelay(30 * time.Second) // the agent starts well after the attach
	t.Cleanup(func() { kip.EC2.SetAgentDelay(0) })

	spec := onKip(sleeper())
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kept", MountPath: "/data"}}
	spec.Volumes = []corev1.Volume{claimVolume("kept", "kept")}
	pod := createPod(t, ns, "killed", spec)
	waitEvent(t, ns, "killed", "SuccessfulAttachVolume", "AttachVolume.Attach succeeded")
	if p := getPod(t, ns, "killed"); running(p) {
		t.Fatal("the pod runs already: the kill would not fall between the attach and the start")
	}
	kip.Kill()
	kip.EC2.SetAgentDelay(0)
	if err := kip.Restart(); err != nil {
		t.Fatal(err)
	}
	f.WaitForPods(t, ns, "app=killed", 1, 3*time.Minute, "Running", running)
	ins := instancesOf(t, pod.UID)
	vol := ec2Volume(t, handle)
	if len(ins) != 1 || len(vol.Attachments) != 1 || aws.ToString(vol.Attachments[0].InstanceId) != ins[0].ID ||
		vol.Attachments[0].State != ec2types.VolumeAttachmentStateAttached {
		t.Errorf("instances %v, volume attachments %+v: want one instance with the disk attached to it", ins, vol.Attachments)
	}
	if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), "killed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 2*time.Minute, "the disk detached", func(context.Context) (bool, error) {
		v := ec2Volume(t, handle)
		return v.State == ec2types.VolumeStateAvailable && len(v.Attachments) == 0, nil
	})
}

// ec2Volume describes an EBS volume of the EC2 simulator.
func ec2Volume(t *testing.T, id string) ec2types.Volume {
	t.Helper()
	out, err := kip.EC2Client().DescribeVolumes(t.Context(), &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	if err != nil || len(out.Volumes) != 1 {
		t.Fatalf("describing volume %s: %v (%d volumes)", id, err, len(out.Volumes))
	}
	return out.Volumes[0]
}
