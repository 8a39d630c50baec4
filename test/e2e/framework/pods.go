package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreatePod creates pod in namespace as cluster-admin and returns it as
// the API server stored it (its UID, its defaults), failing t when the
// API server refuses it. It is how a test creates a pod: test/e2e's
// helpers (createPod, runOn, …) build on it, and a test calls the client
// itself only to read a refusal.
func (f *Framework) CreatePod(t testing.TB, namespace string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := f.Client.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", namespace, pod.Name, err)
	}
	return created
}

// WaitForPods waits until the pods matching selector in namespace number n
// and all satisfy cond, and returns them.
func (f *Framework) WaitForPods(t testing.TB, namespace, selector string, n int, timeout time.Duration,
	what string, cond func(*corev1.Pod) bool,
) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	f.WaitFor(t, timeout, fmt.Sprintf("%d pods %q in %s to be %s", n, selector, namespace, what), func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		if len(list.Items) != n {
			return false, nil
		}
		for i := range list.Items {
			if !cond(&list.Items[i]) {
				return false, nil
			}
		}
		pods = list.Items
		return true, nil
	})
	return pods
}

// PodRunning reports whether p is Running with every container running.
func PodRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}
