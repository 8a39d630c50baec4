package cell_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkAgentStats is a real agent's cost of one Stats call (as root,
// with containerd): a running hello container's cgroup counters, and for
// the whole summary also the pod's interfaces (in its network namespace),
// its writable layer (the snapshotter), its logs, its /etc files and its
// volumes, here an emptyDir holding 1,000 files of 4 KiB and the
// kube-api-access-like projected volume's few.
func BenchmarkAgentStats(b *testing.B) {
	e := newEnv(b)
	a := e.startAgent(b, "10.251.9.61")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stats", Namespace: "default", UID: "uid-stats"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "hello", Image: e.img.Hello.Ref,
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	e.applyPod(b, a, p, nil)
	watch(b, a, "hello running", func(s *corev1.PodStatus) bool {
		return containerStatus(s, "hello").State.Running != nil
	})
	scratch := filepath.Join(e.d.Dir, a.cellID, "volumes", "scratch")
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(scratch, fmt.Sprintf("f%04d", i)), make([]byte, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		only bool
	}{{"summary", false}, {"cpu_and_memory", true}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := a.client.Stats(b.Context(), tc.only)
				if err != nil || len(resp.Containers) != 1 {
					b.Fatalf("Stats = %+v, %v", resp, err)
				}
				if !tc.only && (len(resp.Volumes) != 1 || resp.Volumes[0].Fs == nil || resp.Volumes[0].Fs.InodesUsed < 1000) {
					b.Fatalf("volumes = %+v, want scratch with its 1,000 files", resp.Volumes)
				}
			}
		})
	}
}
