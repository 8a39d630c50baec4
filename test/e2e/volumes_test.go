//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/test/syncbuf"
)

// TestReferencesEventsAndAttach: what the host resolves (a ConfigMap
// volume, a Secret in the environment, the pod IP) reaches the container;
// kubectl describe shows the kubelet's events; kubectl attach reaches a
// container started with stdin.
func TestReferencesEventsAndAttach(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	putConfigMap(t, ns, "settings", map[string]string{"greeting": "hello from a configmap"})
	putSecret(t, ns, "creds", map[string][]byte{"token": []byte("s3cret")})
	spec := onKip(corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c", "cat; sleep 3600"},
		Stdin: true,
		Env: []corev1.EnvVar{
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
			{Name: "MY_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/settings"}},
	})
	spec.Volumes = []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}
	createPod(t, ns, "refs", spec)
	got := f.WaitForPods(t, ns, "app=refs", 1, 60*time.Second, "Running", running)[0]

	out, code := kubectl(t, "exec", "-n", ns, "refs", "--", "sh", "-c", "cat /etc/settings/greeting; echo; echo $TOKEN; echo $MY_IP")
	want := "hello from a configmap\ns3cret\n" + got.Status.PodIP + "\n"
	if code != 0 || out != want {
		t.Errorf("inside the container: %q (exit %d), want %q", out, code, want)
	}

	// Pulled either way: after Pulling, or "already present on machine"
	// when an earlier cell of the machine has the image (local cells share
	// their images, as a kubelet's pods do).
	f.WaitFor(t, 20*time.Second, "the kubelet's events on the pod", func(context.Context) (bool, error) {
		out, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=refs", "-o", "custom-columns=REASON:.reason,PATH:.involvedObject.fieldPath")
		return strings.Contains(out, "Pulled") && strings.Contains(out, "Started") && strings.Contains(out, "spec.containers{main}") &&
			strings.Contains(out, "CellRunning"), nil
	})

	// kubectl attach -i sends stdin to the container's main process (cat),
	// whose echo comes back on its output.
	attach := exec.Command(filepath.Join(f.Cluster.BinDir, "kubectl"), "--kubeconfig", f.Cluster.Kubeconfig,
		"attach", "-i", "-n", ns, "refs", "-c", "main")
	attach.Stdin = strings.NewReader("typed into attach\n")
	attached := &syncbuf.Buffer{}
	attach.Stdout = attached
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 20*time.Second, "the attached container to echo its input", func(context.Context) (bool, error) {
		return strings.Contains(attached.String(), "typed into attach"), nil
	})
	_ = attach.Process.Kill()
	_ = attach.Wait()
}
