package cells

import (
	"context"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
)

// CreatePod records the pod and starts its cell. Idempotent on the UID.
// The cell outlives the call: it runs until the pod is deleted or Run
// ends.
func (m *Manager) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	c := newCell(m.deps, pod, nil)
	if have := m.cells.add(c); have != nil {
		have.setDesired(pod)
		return nil
	}
	c.log().Info("pod bound to the node")
	c.start(context.WithoutCancel(ctx))
	return nil
}

// UpdatePod records a new desired pod; a running cell gets it re-applied.
func (m *Manager) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	c := m.cells.get(pod.UID)
	if c == nil {
		return m.CreatePod(ctx, pod)
	}
	c.setDesired(pod)
	return nil
}

// DeletePod starts terminating the pod's cell within its grace period.
// Idempotent; unknown pods are NotFound, as virtual-kubelet expects. The
// termination outlives the call.
func (m *Manager) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	c := m.cells.get(pod.UID)
	if c == nil {
		return errdefs.NotFoundf("pod %s/%s (%s) has no cell", pod.Namespace, pod.Name, pod.UID)
	}
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	c.end(ctx, deletedEnd("pod deleted", grace))
	return nil
}

// GetPod returns the pod with its current status.
func (m *Manager) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	c := m.cells.byKey(namespace, name)
	if c == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return c.podWithStatus(), nil
}

// GetPodStatus returns the pod's current status.
func (m *Manager) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := m.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the Manager knows.
func (m *Manager) GetPods(context.Context) ([]*corev1.Pod, error) {
	cells := m.cells.all()
	out := make([]*corev1.Pod, 0, len(cells))
	for _, c := range cells {
		out = append(out, c.podWithStatus())
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's status callback.
func (m *Manager) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	m.notifier.setCallback(cb)
}
