package pod

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

func TestContainerOOMScoreAdj(t *testing.T) {
	const capacity = 4000 << 20 // 4000 MiB
	res := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{}
		if req != "" {
			r.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req), corev1.ResourceCPU: resource.MustParse("100m")}
		}
		if lim != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(lim), corev1.ResourceCPU: resource.MustParse("100m")}
		}
		return r
	}
	always := corev1.ContainerRestartPolicyAlways
	critical := int32(2_000_001_000)
	for _, tc := range []struct {
		name     string
		pod      corev1.PodSpec
		which    string // the container whose score is asked
		capacity int64
		want     int
	}{
		{"best effort", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, "a", capacity, 1000},
		{"guaranteed", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: res("", "100Mi")}}}, "a", capacity, -997},
		// 1000 - 1000*400/4000.
		{"burstable", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: res("400Mi", "")}}}, "a", capacity, 900},
		{"burstable asking for nothing of memory", corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}, "a", capacity, 999},
		{"burstable asking for all", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: res("4000Mi", "")}}}, "a", capacity, 3},
		{"burstable, capacity unknown", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: res("400Mi", "")}}}, "a", 0, 0},
		{"sidecar no later than the least regular container", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always, Resources: res("100Mi", "")}},
			Containers:     []corev1.Container{{Name: "a", Resources: res("400Mi", "")}, {Name: "b", Resources: res("800Mi", "")}},
		}, "side", capacity, 900},
		{"pod-level request shared", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1200Mi")}},
			Containers: []corev1.Container{{Name: "a", Resources: res("400Mi", "")}, {Name: "b", Resources: res("400Mi", "")}},
		}, "a", capacity, 850}, // (400 + (1200-800)/2) of 4000
		{"node critical", corev1.PodSpec{PriorityClassName: "system-node-critical", Priority: &critical,
			Containers: []corev1.Container{{Name: "a"}}}, "a", capacity, -997},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tc.pod}
			var c *corev1.Container
			for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
				for i := range list {
					if list[i].Name == tc.which {
						c = &list[i]
					}
				}
			}
			if got := containerOOMScoreAdj(p, c, tc.capacity); got != tc.want {
				t.Errorf("containerOOMScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodMemoryLimit(t *testing.T) {
	lim := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		pod  corev1.PodSpec
		want int64
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, 0},
		{"the containers'", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}, {Name: "b", Resources: lim("64Mi")}}}, 96 << 20},
		{"one without", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}, {Name: "b"}}}, 0},
		{"an init container without", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i"}},
			Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}}}, 0},
		{"an init container's, more", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", Resources: lim("256Mi")}},
			Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}}}, 256 << 20},
		{"sidecars with both", corev1.PodSpec{InitContainers: []corev1.Container{
			{Name: "side", RestartPolicy: &always, Resources: lim("16Mi")}, {Name: "i", Resources: lim("64Mi")}},
			Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}}}, 80 << 20},
		{"overhead", corev1.PodSpec{Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")},
			Containers: []corev1.Container{{Name: "a", Resources: lim("32Mi")}}}, 40 << 20},
		{"pod-level", corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			Containers: []corev1.Container{{Name: "a"}}}, 128 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podMemoryLimit(&corev1.Pod{Spec: tc.pod}); got != tc.want {
				t.Errorf("podMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// The pod's cgroup is made, with the pod's memory limit, before its first
// container starts.
func TestPodCgroupBeforeTheFirstContainer(t *testing.T) {
	rt := newFakeRuntime()
	var mu sync.Mutex
	var made []int64
	startedAfter := -1
	rt.onStart = func(_ runtime.ContainerSpec, task *fakeTask) {
		mu.Lock()
		if startedAfter < 0 {
			startedAfter = len(made)
		}
		mu.Unlock()
		task.exitAfter(10*time.Millisecond, 0)
	}
	m := New(Config{
		Runtime: rt, Logs: logs.NewStore(t.TempDir()), NetNSPath: "/var/run/netns/test", Backoff: testBackoff,
		MakePodCgroup: func(limit int64) error {
			mu.Lock()
			defer mu.Unlock()
			made = append(made, limit)
			return nil
		},
	})
	p := testPod(corev1.RestartPolicyNever, "a", "b")
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	}
	apply(t, m, 1, p)
	waitStatus(t, m, "Succeeded", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	mu.Lock()
	defer mu.Unlock()
	if len(made) != 1 || made[0] != 64<<20 || startedAfter != 1 {
		t.Errorf("the pod's cgroup was made %v times with limits %v, the first container started after %d; want once with 64 MiB, before it", len(made), made, startedAfter)
	}
}
