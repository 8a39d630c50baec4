//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/e2e/framework"
)

// cellNames is the set of the local plugin's cells on this machine now
// (one directory each, named by cell; in the aws pass by instance).
func cellNames(t testing.TB) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(kip.StateDir, "cells"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			names[e.Name()] = true
		}
	}
	return names
}

// newCells counts the cells there are now that were not in before: a
// test's own cells, whatever the cells of earlier tests, still ending
// when it started, do meanwhile.
func newCells(t testing.TB, before map[string]bool) int {
	t.Helper()
	n := 0
	for name := range cellNames(t) {
		if !before[name] {
			n++
		}
	}
	return n
}

// kipLogOnFailure adds kip's log and its live cells' agent logs to a
// failed test's output.
func kipLogOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of kip's log (%s):\n%s", kip.LogPath, kip.LogTail(80))
			t.Logf("agent logs of the cells still there:\n%s", kip.AgentLogTails(15))
		}
	})
}

func kubectl(t testing.TB, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(f.Cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", f.Cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return string(out), 0
}

// helloDeployment creates Deployment name in ns: replicas of the hello
// image on kip, pods labelled app=<name> and annotated with annotations.
func helloDeployment(t *testing.T, ns, name string, replicas int32, annotations map[string]string) {
	t.Helper()
	deployment(t, ns, name, replicas, annotations, corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref})
}

// deployment creates Deployment name in ns: replicas of ctr on kip, pods
// labelled app=<name> and annotated with annotations.
func deployment(t *testing.T, ns, name string, replicas int32, annotations map[string]string, ctr corev1.Container) {
	t.Helper()
	labels := map[string]string{"app": name}
	_, err := f.Client.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       onKip(ctr),
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeploymentRunsInCells is the whole path: a Deployment's pods bound
// to kip run in their own cells, with true status, logs, exec and delete.
func TestDeploymentRunsInCells(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	before := cellNames(t) // CoreDNS's, when the cluster DNS runs
	start := time.Now()
	helloDeployment(t, ns, "hello", 3, nil)
	pods := f.WaitForPods(t, ns, "app=hello", 3, 30*time.Second, "Running on kip", func(p *corev1.Pod) bool {
		return p.Spec.NodeName == "kip" && running(p)
	})
	t.Logf("3 pods Running %.1fs after the Deployment was created", time.Since(start).Seconds())
	ips := map[string]bool{}
	for _, p := range pods {
		if p.Status.PodIP == "" || ips[p.Status.PodIP] {
			t.Errorf("pod %s has IP %q; want its own", p.Name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = true
	}
	if n := newCells(t, before); n != 3 {
		t.Errorf("%d cells for 3 pods", n)
	}

	pod := pods[0].Name
	var logs string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last kubectl logs output: %.400q", logs)
		}
	})
	f.WaitFor(t, 20*time.Second, "kubectl logs to show the container's output", func(context.Context) (bool, error) {
		out, code := kubectl(t, "logs", "-n", ns, pod)
		logs = out
		return code == 0 && strings.Contains(out, "hello from"), nil
	})
	// -f follows: it is still printing new lines after a few seconds.
	follow := exec.Command(filepath.Join(f.Cluster.BinDir, "kubectl"), "--kubeconfig", f.Cluster.Kubeconfig, "logs", "-f", "-n", ns, pod)
	followed := &strings.Builder{}
	follow.Stdout = followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	_ = follow.Process.Kill()
	_ = follow.Wait()
	if strings.Count(followed.String(), "hello from") < 2 {
		t.Errorf("kubectl logs -f printed %q; want the running output", followed.String())
	}

	out, code := kubectl(t, "exec", "-n", ns, pod, "--", "sh", "-c", "echo inside $HOSTNAME; exit 3")
	if code != 3 || !strings.Contains(out, "inside") {
		t.Errorf("kubectl exec = %q exit %d; want its output and exit code 3", out, code)
	}

	// Deleting the Deployment terminates every cell within grace + 10 s.
	start = time.Now()
	if err := f.Client.AppsV1().Deployments(ns).Delete(ctx, "hello", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 15*time.Second, "every cell terminated", func(context.Context) (bool, error) { return newCells(t, before) == 0, nil })
	t.Logf("cells gone %.1fs after the Deployment was deleted", time.Since(start).Seconds())
}

// TestCrashLoopBackOff: a container exiting 1 under restartPolicy Always
// shows restarts and CrashLoopBackOff, as on a kubelet node.
func TestCrashLoopBackOff(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "crash", onKip(corev1.Container{Name: "crash", Image: cells.Images.Crash.Ref}))
	got := f.WaitForPods(t, ns, "app=crash", 1, 60*time.Second, "in CrashLoopBackOff after a restart", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount >= 1 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
				return true
			}
		}
		return false
	})
	cs := got[0].Status.ContainerStatuses[0]
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("last state = %+v; want terminated with exit code 1", cs.LastTerminationState)
	}
}

// TestJobSucceedsAndCellEnds: a Job's pod reaches Succeeded and its cell
// is terminated; its containers' logs (init container too) stay readable
// with kubectl logs until the pod is deleted, and go with it.
func TestJobSucceedsAndCellEnds(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	before := cellNames(t)
	spec := onKip(corev1.Container{Name: "once", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c", "echo computing; echo result 42"}})
	spec.InitContainers = []corev1.Container{{Name: "prep", Image: cells.Images.Busybox.Ref, Command: []string{"echo", "prepared"}}}
	spec.RestartPolicy = corev1.RestartPolicyNever
	_, err := f.Client.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "once"}}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := f.WaitForPods(t, ns, "app=once", 1, 60*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })[0]
	f.WaitFor(t, 20*time.Second, "the Job's cell terminated", func(context.Context) (bool, error) { return newCells(t, before) == 0, nil })
	// Nothing of the cell stays on this machine: not the agent's default
	// state directory either (every cell once left one there).
	if _, err := os.Stat(filepath.Join("/var/lib/kip-cell", "kip-"+string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("the ended cell left /var/lib/kip-cell/kip-%s (stat: %v)", pod.UID, err)
	}

	// The cell is gone, and kubectl logs still shows what the Job printed,
	// as on a kubelet, until the pod is deleted.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"job/once", "-c", "once"}, "computing\nresult 42\n"},
		{[]string{pod.Name, "-c", "once", "--tail=1"}, "result 42\n"},
		{[]string{pod.Name, "-c", "prep"}, "prepared\n"},
	} {
		out, code := kubectl(t, append([]string{"logs", "-n", ns}, tt.args...)...)
		if code != 0 || out != tt.want {
			t.Errorf("kubectl logs %v after the cell ended: exit %d, %q; want %q", tt.args, code, out, tt.want)
		}
	}
	out, code := kubectl(t, "logs", "-n", ns, pod.Name, "-c", "once", "--previous")
	if code == 0 || !strings.Contains(out, `previous terminated container "once" in pod "`+pod.Name+`" not found`) {
		t.Errorf("kubectl logs --previous of the ended pod: exit %d, %q; want an error saying why", code, out)
	}
	kept := filepath.Join(kip.PodLogsDir, ns+"_"+pod.Name+"_"+string(pod.UID))
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the kept logs %s: %v", kept, err)
	}
	if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 30*time.Second, "the kept logs removed with the pod", func(context.Context) (bool, error) {
		_, err := os.Stat(kept)
		return os.IsNotExist(err), nil
	})
}

// TestMissingImage: a pod whose image does not exist shows ErrImagePull or
// ImagePullBackOff with the registry's message, and deleting it leaves no
// cell.
func TestMissingImage(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	start := cellNames(t)
	ref := cells.Registry.Ref("kip-e2e/absent", "v1")
	ctx := t.Context()
	createPod(t, ns, "absent", onKip(corev1.Container{Name: "absent", Image: ref}))
	got := f.WaitForPods(t, ns, "app=absent", 1, 60*time.Second, "failing to pull", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	})
	msg := got[0].Status.ContainerStatuses[0].State.Waiting.Message
	if !strings.Contains(msg, "not found") && !strings.Contains(msg, "NAME_UNKNOWN") && !strings.Contains(msg, "MANIFEST_UNKNOWN") {
		t.Errorf("waiting message %q does not carry the registry's answer", msg)
	}
	if n := newCells(t, start); n != 1 {
		t.Errorf("%d cells for the pod, want 1", n)
	}
	if err := f.Client.CoreV1().Pods(ns).Delete(ctx, "absent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 45*time.Second, "the cell of the deleted pod terminated", func(context.Context) (bool, error) {
		return newCells(t, start) == 0, nil
	})
}

// TestRunningJobPodDeleted: deleting a running Job's pod ends it without
// kip's status writes putting back the job-tracking finalizer the Job
// controller removed (the API server refuses a new finalizer on a pod
// being deleted, and the pod would hang on it).
func TestRunningJobPodDeleted(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	logFrom := len(logLines(t))
	spec := onKip(sleeper())
	spec.RestartPolicy = corev1.RestartPolicyNever
	_, err := f.Client.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "long"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "long"}}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := f.WaitForPods(t, ns, "app=long", 1, 90*time.Second, "running", running)[0]
	if err := f.Client.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 60*time.Second, "the pod gone", func(ctx context.Context) (bool, error) {
		_, err := f.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, l := range logLines(t)[logFrom:] {
		if strings.Contains(l, "finalizers") {
			t.Errorf("kip fought over a pod's finalizers: %s", l)
		}
	}
}
