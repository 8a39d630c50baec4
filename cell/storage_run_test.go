package cell_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/pod"
)

// A pod that holds more of the cell's disk than its limits allow is
// evicted as the kubelet evicts it, with real containers: what a container
// writes to its writable layer and what it prints to its log count, and so
// do its emptyDir volumes. The pod ends Failed, reason Evicted, with the
// kubelet's message; its containers are stopped within the eviction's
// second of grace (sleep ignores SIGTERM as PID 1), not the pod's 30 s,
// and not restarted under restartPolicy Always.
func TestAgentEvictsPastEphemeralStorage(t *testing.T) {
	e := newEnv(t)
	limit := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}
	}
	idle := corev1.Container{Name: "idle", Image: e.img.Busybox.Ref, Command: []string{"sleep", "3600"}, Resources: limit("100Mi")}
	tests := []struct {
		name       string
		ip         string
		containers []corev1.Container
		volumes    []corev1.Volume
		want       string
	}{
		{
			name: "writable layer past a container's limit", ip: "10.251.14.2",
			containers: []corev1.Container{idle, {Name: "writer", Image: e.img.Busybox.Ref, Resources: limit("4Mi"),
				Command: []string{"sh", "-c", "head -c 8388608 /dev/zero > /big && exec sleep 3600"}}},
			want: `Container writer exceeded its local ephemeral storage limit "4Mi". `,
		},
		{
			name: "log past the pod's limit", ip: "10.251.14.3",
			containers: []corev1.Container{{Name: "loud", Image: e.img.Busybox.Ref, Resources: limit("4Mi"),
				Command: []string{"sh", "-c", "yes 0123456789abcdef | head -c 8388608 && exec sleep 3600"}}},
			want: "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ",
		},
		{
			name: "emptyDir past its sizeLimit", ip: "10.251.14.4",
			containers: []corev1.Container{{Name: "scratch", Image: e.img.Busybox.Ref,
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
				Command:      []string{"sh", "-c", "head -c 4194304 /dev/zero > /scratch/f && exec sleep 3600"}}},
			volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptrQuantity("2Mi")}}}},
			want:    `Usage of EmptyDir volume "scratch" exceeds the limit "2Mi". `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.startAgent(t, tt.ip)
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "disk", Namespace: "default", UID: "uid-disk"},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: tt.containers, Volumes: tt.volumes},
			}
			e.applyPod(t, a, p, nil)
			st := watch(t, a, "Evicted", func(s *corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
			evicted := time.Now()
			if st.Reason != pod.ReasonEvicted || st.Message != tt.want {
				t.Errorf("reason %q message %q, want %q %q", st.Reason, st.Message, pod.ReasonEvicted, tt.want)
			}
			watch(t, a, "containers stopped", func(s *corev1.PodStatus) bool {
				for _, cs := range s.ContainerStatuses {
					if cs.State.Terminated == nil {
						return false
					}
				}
				return true
			})
			if took := time.Since(evicted); took > 15*time.Second {
				t.Errorf("containers stopped %s after the eviction, want within its grace of 1 s (and the stop's)", took.Round(time.Second))
			}
			time.Sleep(2 * time.Second)
			st = watch(t, a, "status", func(*corev1.PodStatus) bool { return true })
			for _, cs := range st.ContainerStatuses {
				if cs.RestartCount != 0 || cs.State.Terminated == nil {
					t.Errorf("container %s after the eviction: restarts %d, state %+v", cs.Name, cs.RestartCount, cs.State)
				}
			}
		})
	}
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
