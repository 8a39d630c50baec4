//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostcells "github.com/kipcell/kip/host/cells"
)

// TestLoudPodKeepsItsLog: a pod printing 200 MB in lines on a cell of
// 512 MiB ends with its log's end readable by kubectl logs (issue 29: the
// agent read the whole log into memory to serve it, was OOM-killed, and
// the pod's log was lost with a LogsNotKept warning).
func TestLoudPodKeepsItsLog(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	line := strings.Repeat("0123456789", 10)
	spec := onKip(corev1.Container{Name: "loud", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c",
		"yes " + line + " | head -c " + strconv.Itoa(200_000_000/101*101) + "; echo LAST-LINE-KEPT"}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loud", Labels: map[string]string{"app": "loud"},
			Annotations: map[string]string{"kipcell.io/instance-type": "local.small"}},
		Spec: spec,
	}
	if _, err := f.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitForPods(t, ns, "app=loud", 1, 5*time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	out, code := kubectl(t, "logs", "-n", ns, "loud", "--tail=2")
	if want := line + "\nLAST-LINE-KEPT\n"; code != 0 || out != want {
		t.Errorf("kubectl logs --tail=2: exit %d, %.200q; want %q", code, out, want)
	}
	if ev := podEvents(t, ns, "loud"); strings.Contains(ev, hostcells.ReasonLogsNotKept) {
		t.Errorf("the pod's log was not kept:\n%s", ev)
	}
}
