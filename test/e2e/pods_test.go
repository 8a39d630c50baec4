//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/e2e/framework"
)

// Test pods: how a test makes them, in one place. A pod's spec is
// onKip's (the run's kip) or onNode's (one named node), its container
// often a sleeper; f.CreatePod (framework) creates it, and every helper
// here builds on that:
//
//   - createPod: a pod named and labelled app=<name>, as most tests want;
//   - createPods: n hello pods on a node, under one label;
//   - runOn, runPod, runPods: created, then waited for until they run.
//
// A test whose pod needs more (annotations, a label shared by several)
// builds the corev1.Pod and calls f.CreatePod. Only a test that expects
// the API server to refuse a pod calls the client itself, to read the
// error.

// onKip is a pod spec placed on the virtual node "kip".
func onKip(containers ...corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector:                  map[string]string{"type": "virtual-kubelet"},
		Tolerations:                   []corev1.Toleration{{Key: virtualTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers:                    containers,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
	}
}

// onNode is a pod spec for the node name only.
func onNode(name string, containers ...corev1.Container) corev1.PodSpec {
	spec := onKip(containers...)
	spec.NodeSelector = map[string]string{"type": "virtual-kubelet", "kubernetes.io/hostname": name}
	return spec
}

// sleeper is a busybox container that waits to be exec'd into.
func sleeper(env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref, Env: env,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
	}
}

// running is framework.PodRunning, by the short name the tests use.
func running(p *corev1.Pod) bool { return framework.PodRunning(p) }

// createPod creates pod name in ns, labelled app=<name>, with spec, and
// returns it as the API server stored it.
func createPod(t testing.TB, ns, name string, spec corev1.PodSpec) *corev1.Pod {
	t.Helper()
	return f.CreatePod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: spec})
}

// createPods creates n hello pods on node, <app>-0 to <app>-<n-1>,
// labelled app=<app>.
func createPods(t *testing.T, ns, node, app string, n int) {
	t.Helper()
	for i := range n {
		f.CreatePod(t, ns, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app}},
			Spec:       onNode(node, corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref}),
		})
	}
}

// runOn runs a hello pod called name on node (createPod) and waits until
// it is Running there.
func runOn(t *testing.T, ns, node, name string) *corev1.Pod {
	t.Helper()
	createPod(t, ns, name, onNode(node, corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref}))
	pods := f.WaitForPods(t, ns, "app="+name, 1, 2*time.Minute, "Running on "+node, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == node && running(p)
	})
	return &pods[0]
}

// runPod creates pod in ns, labelled pod=<its name> (its own labels
// replaced), and waits until it runs.
func runPod(t *testing.T, ns string, pod *corev1.Pod) corev1.Pod {
	t.Helper()
	pod.Labels = map[string]string{"pod": pod.Name}
	f.CreatePod(t, ns, pod)
	return f.WaitForPods(t, ns, "pod="+pod.Name, 1, 90*time.Second, "Running", running)[0]
}

// runPods creates pods in ns, labelled app=<label>, and waits until all run.
func runPods(t *testing.T, ns, label string, pods ...*corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["app"] = label
		f.CreatePod(t, ns, p)
	}
	out := map[string]*corev1.Pod{}
	list := f.WaitForPods(t, ns, "app="+label, len(pods), 90*time.Second, "Running", running)
	for i := range list {
		out[list[i].Name] = &list[i]
	}
	return out
}
