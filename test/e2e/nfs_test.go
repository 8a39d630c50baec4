//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestNFSVolumes: a pod's NFS shares, mounted by its cell's agent. An NFS
// server runs as a pod on the Kip node (test/images' nfsserver, a
// userspace NFSv3 server); a writer pod mounts it by its address as an
// inline nfs volume and writes a file; a reader pod mounts it through a
// claim bound to a PV of spec.nfs, read-only, reads the file and cannot
// write. The machine the tests run on has no NFS client in its kernel, so
// the agents mount with their own client (cell/nfsfuse), which this
// checks; once the pods are gone no client is left. A pod whose nfs
// volume names the instances' metadata address is refused before any
// launch, naming the field.
func TestNFSVolumes(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	deletePodsAtEnd(t, ns)

	createPod(t, ns, "nfs", onKip(corev1.Container{Name: "nfs", Image: cells.Images.NFSServer.Ref, Args: []string{"-dir", "/export"}}))
	server := f.WaitForPods(t, ns, "app=nfs", 1, 3*time.Minute, "Running", running)[0].Status.PodIP

	writer := onKip(corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref,
		Command:      []string{"sh", "-c", "echo written-by-writer > /share/hello && trap 'exit 0' TERM; while true; do sleep 1; done"},
		VolumeMounts: []corev1.VolumeMount{{Name: "share", MountPath: "/share"}},
	})
	writer.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: "/"}}}}
	createPod(t, ns, "writer", writer)
	f.WaitForPods(t, ns, "app=writer", 1, 3*time.Minute, "Running", running)
	if out, code := kubectl(t, "exec", "-n", ns, "writer", "--", "cat", "/share/hello"); code != 0 || strings.TrimSpace(out) != "written-by-writer" {
		t.Fatalf("the writer's share: %q (exit %d), want its file", out, code)
	}

	nfsPV(t, ns, "shared", server)
	reader := onKip(sleeper())
	reader.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "share", MountPath: "/share"}}
	reader.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared", ReadOnly: true},
	}}}
	createPod(t, ns, "reader", reader)
	f.WaitForPods(t, ns, "app=reader", 1, 3*time.Minute, "Running", running)
	if out, code := kubectl(t, "exec", "-n", ns, "reader", "--", "cat", "/share/hello"); code != 0 || strings.TrimSpace(out) != "written-by-writer" {
		t.Errorf("the reader's share: %q (exit %d), want the writer's file", out, code)
	}
	if out, code := kubectl(t, "exec", "-n", ns, "reader", "--", "sh", "-c", "echo no > /share/nope"); code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing to the read-only claim: %q (exit %d), want it refused as a read-only file system", out, code)
	}

	// The instances' metadata as an NFS server: refused before any
	// launch, the field named.
	meta := onKip(sleeper())
	meta.Volumes = []corev1.Volume{{Name: "meta", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "169.254.169.254", Path: "/"}}}}
	createPod(t, ns, "meta", meta)
	waitEvent(t, ns, "meta", "NFSServerForbidden", "spec.volumes[0].nfs.server")

	// Once the clients' pods are gone, their mounts and the agents' NFS
	// clients are too.
	for _, name := range []string{"writer", "reader"} {
		if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitFor(t, 2*time.Minute, "no NFS client of "+server+" left", func(context.Context) (bool, error) {
		return len(nfsClients(server)) == 0, nil
	})
}

// nfsPV creates a PV of spec.nfs for the server's export, bound ahead to
// claim, and the claim.
func nfsPV(t *testing.T, ns, claim, server string) {
	t.Helper()
	name := "pv-" + ns + "-" + claim
	size := *resource.NewQuantity(1<<30, resource.BinarySI)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			MountOptions:                  []string{"nfsvers=3"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: "/"}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
	if _, err := f.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PV %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(""),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := f.Client.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nfsClients are the processes of this machine that are an agent's NFS
// client (kip-cell nfs-fuse) of server: the local cells' agents run here.
func nfsClients(server string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) > 1 && args[1] == "nfs-fuse" && strings.Contains(string(data), server) {
			out = append(out, p)
		}
	}
	return out
}
