//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The security context, as a kubelet applies it: who a container runs as,
// what it may write, and what the node refuses.

// withScratch gives spec an emptyDir "scratch" at /scratch in container main.
func withScratch(spec corev1.PodSpec) corev1.PodSpec {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	return spec
}

// TestSecurityRunAsUser: runAsUser applies (id -u prints 1234, as does an
// exec), the supplemental groups and the fsGroup are the process's groups,
// and the emptyDir belongs to the fsGroup.
func TestSecurityRunAsUser(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := withScratch(onKip(sleeper()))
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1234), SupplementalGroups: []int64{5555}, FSGroup: ptr.To[int64](2000),
	}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runas"}, Spec: spec})
	if got := strings.TrimSpace(inPod(t, ns, "runas", "id -u")); got != "1234" {
		t.Errorf("id -u = %q, want 1234", got)
	}
	groups := strings.Fields(inPod(t, ns, "runas", "id -G"))
	for _, g := range []string{"2000", "5555"} {
		if !strings.Contains(" "+strings.Join(groups, " ")+" ", " "+g+" ") {
			t.Errorf("id -G = %v, want the fsGroup and supplemental group %s among them", groups, g)
		}
	}
	if got := strings.TrimSpace(inPod(t, ns, "runas", "touch /scratch/f && stat -c '%g' /scratch/f")); got != "2000" {
		t.Errorf("a new file in the emptyDir has group %q, want the fsGroup 2000", got)
	}
}

// TestSecurityRunAsNonRoot: an image that runs as root under runAsNonRoot
// is refused: the container waits with CreateContainerConfigError and the
// kubelet's message, and a Failed event says it.
func TestSecurityRunAsNonRoot(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := onKip(sleeper())
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nonroot", Labels: map[string]string{"pod": "nonroot"}}, Spec: spec}
	created, err := f.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.WaitForPods(t, ns, "pod=nonroot", 1, 90*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
				return true
			}
		}
		return false
	})
	want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: main)",
		fmt.Sprintf("nonroot_%s(%s)", ns, created.UID))
	if msg := got[0].Status.ContainerStatuses[0].State.Waiting.Message; msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
	if got[0].Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", got[0].Status.Phase)
	}
	f.WaitFor(t, 30*time.Second, "the Failed event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "nonroot"), "Warning Failed Error: "+want), nil
	})
}

// TestSecurityReadOnlyRoot: with readOnlyRootFilesystem, writing / fails
// and writing an emptyDir works.
func TestSecurityReadOnlyRoot(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := withScratch(onKip(sleeper()))
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "readonly"}, Spec: spec})
	if got := inPod(t, ns, "readonly", "touch /written 2>&1; echo exit=$?"); !strings.Contains(got, "Read-only file system") || strings.Contains(got, "exit=0") {
		t.Errorf("writing / = %q, want it refused as a read-only file system", got)
	}
	if got := strings.TrimSpace(inPod(t, ns, "readonly", "echo hi > /scratch/f && cat /scratch/f")); got != "hi" {
		t.Errorf("writing the emptyDir = %q, want hi", got)
	}
}

// TestSecurityPrivilegedRefused: a privileged container on a node that
// does not allow them (cells.allowPrivileged false, the default) is
// rejected as a kubelet rejects a pod: Failed, reason PrivilegedForbidden,
// "Pod was rejected: ..." naming the container and the setting, and a
// Warning event; no cell is launched for it.
func TestSecurityPrivilegedRefused(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	ctr := sleeper()
	ctr.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Labels: map[string]string{"pod": "privileged"}}, Spec: onKip(ctr)}
	if _, err := f.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := f.WaitForPods(t, ns, "pod=privileged", 1, 60*time.Second, "Failed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})
	const msg = `container "main" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`
	if st := got[0].Status; st.Reason != "PrivilegedForbidden" || st.Message != "Pod was rejected: "+msg {
		t.Errorf("status reason %q, message %q; want PrivilegedForbidden and %q", st.Reason, st.Message, "Pod was rejected: "+msg)
	}
	f.WaitFor(t, 30*time.Second, "the PrivilegedForbidden event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "privileged"), "Warning PrivilegedForbidden "+msg), nil
	})
	if ev := podEvents(t, ns, "privileged"); strings.Contains(ev, "LaunchingCell") {
		t.Errorf("a cell was launched for the rejected pod:\n%s", ev)
	}
}
