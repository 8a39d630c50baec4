package pod

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReasonEvicted is the kubelet's reason, in the pod's status and its
// Warning event, for a pod its eviction manager ended
// (pkg/kubelet/eviction of v1.36).
const ReasonEvicted = "Evicted"

// evictionGrace is the grace period of an evicted pod's containers: the
// kubelet's immediateEvictionGracePeriodSeconds, which its local storage
// evictions use.
const evictionGrace = time.Second

// Evict ends the pod as the kubelet's eviction manager does: a Warning
// event Evicted with message, the containers stopped with a grace period
// of one second and not restarted, and the pod Failed with reason Evicted
// and message, whatever its restart policy. It reports whether it did: a
// pod that has ended, is being deleted, is past its deadline or was
// evicted already is left alone.
func (m *Manager) Evict(ctx context.Context, message string) bool {
	m.mu.Lock()
	phase := m.status.Phase
	if !m.started || m.cancel == nil || m.deleting || m.deadline || m.evicted != "" ||
		phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		m.mu.Unlock()
		return false
	}
	m.evicted = message
	m.emitLocked(EventWarning, ReasonEvicted, "", "%s", message)
	m.publishLocked()
	cancel := m.cancel
	m.mu.Unlock()
	m.log.InfoContext(ctx, "evicting the pod", "message", message)
	cancel()
	return true
}
