package cell_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
)

// TestAgentVolumes: busybox containers see a configMap file, a secret file
// with mode 0400 on a tmpfs, an emptyDir shared between two containers and
// a subPath mount, through real containerd.
func TestAgentVolumes(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.41")
	grace := int64(1)
	sleep := []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/config"},
		{Name: "creds", MountPath: "/etc/creds"},
		{Name: "shared", MountPath: "/shared"},
		{Name: "config", MountPath: "/app/game.properties", SubPath: "game.properties"},
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vols", Namespace: "default", UID: "uid-vols"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "game"}}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{
				{Name: "writer", Image: e.img.Busybox.Ref, VolumeMounts: mounts, Command: []string{"sh", "-c",
					"echo from-writer > /shared/note; trap 'exit 0' TERM; while true; do sleep 0.1; done"}},
				{Name: "reader", Image: e.img.Busybox.Ref, VolumeMounts: mounts[2:3], Command: sleep},
			},
		},
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	user, pass := e.reg.Credentials()
	_, err = a.client.ApplyPod(t.Context(), &api.PodRequest{
		PodJSON: data, Generation: 1,
		Volumes: map[string]api.VolumeFiles{
			"config": {Files: map[string][]byte{"game.properties": []byte("lives=3\n")}},
			"creds":  {Files: map[string][]byte{"token": []byte("s3cret")}, Modes: map[string]uint32{"token": 0o400}},
		},
		RegistryCredentials: []api.RegistryCredential{{Server: e.reg.Host(), Username: user, Password: pass}},
	})
	if err != nil {
		t.Fatalf("ApplyPod: %v", err)
	}
	watch(t, a, "both running", func(s *corev1.PodStatus) bool {
		return containerStatus(s, "writer").State.Running != nil && containerStatus(s, "reader").State.Running != nil
	})
	run := func(container, script string) string {
		t.Helper()
		var out, errOut string
		var code int32
		for range 50 { // the writer may not have written yet
			out, errOut, code = execute(t, a, &api.ExecStart{Container: container, Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
			if code == 0 {
				return out
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: %q exited %d: %s%s", container, script, code, out, errOut)
		return ""
	}
	if got := run("writer", "cat /etc/config/game.properties"); got != "lives=3\n" {
		t.Errorf("configMap file = %q", got)
	}
	if got := run("writer", "stat -L -c %a /etc/creds/token; cat /etc/creds/token"); got != "400\ns3cret" {
		t.Errorf("secret file mode and content = %q, want 400 and s3cret", got)
	}
	// The agent shares containerd's mount namespace here, so the secret
	// is on the tmpfs it mounted, and the container sees that tmpfs.
	if got := run("writer", "grep ' /etc/creds ' /proc/mounts"); !strings.Contains(got, " tmpfs ") {
		t.Errorf("secret volume mount = %q, want a tmpfs", got)
	}
	if got := run("reader", "cat /shared/note"); got != "from-writer\n" {
		t.Errorf("emptyDir seen by the other container = %q", got)
	}
	if got := run("writer", "cat /app/game.properties"); got != "lives=3\n" {
		t.Errorf("subPath file = %q", got)
	}
	if got := run("writer", "touch /etc/config/x 2>&1 || echo read-only"); !strings.Contains(got, "read-only") {
		t.Errorf("configMap volume writable: %q", got)
	}
}
