package cells

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod conditions, as the kubelet's status manager keeps them
// (pkg/kubelet/types/pod_status.go, pkg/kubelet/status/generate.go):
// virtual-kubelet writes the whole status the cell reports, so the
// conditions that others own (a load balancer controller's readiness gate,
// a disruption target) would be lost; they are taken over from the API's
// pod, and the Ready condition honours the pod's readinessGates.

// ReasonReadinessGatesNotReady is the Ready condition's reason while a
// readiness gate's condition is missing or not True.
const ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"

// kubeletCondition reports whether the node owns conditions of type t
// (PodConditionByKubelet, and kip's own ConditionCellReachable;
// PodScheduled is the scheduler's, which the cell keeps as it was).
func kubeletCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady,
		corev1.PodReadyToStartContainers, corev1.PodResizePending, corev1.PodResizeInProgress,
		ConditionCellReachable:
		return true
	}
	return false
}

// foreignConditions are the API pod's conditions the node does not own.
func foreignConditions(p *corev1.Pod) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if !kubeletCondition(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// mergeConditions adds to st the conditions of api (the pod as the API
// server has it) that others own, and turns Ready False while a readiness
// gate is not True, with the kubelet's reason and message.
func mergeConditions(st *corev1.PodStatus, api *corev1.Pod) {
	for _, c := range foreignConditions(api) {
		if findCondition(st.Conditions, c.Type) == nil {
			st.Conditions = append(st.Conditions, c)
		}
	}
	var unready []string
	for _, g := range api.Spec.ReadinessGates {
		c := findCondition(st.Conditions, g.ConditionType)
		switch {
		case c == nil:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case c.Status != corev1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	ready := findCondition(st.Conditions, corev1.PodReady)
	if len(unready) == 0 || ready == nil || ready.Status != corev1.ConditionTrue {
		return
	}
	ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, ReasonReadinessGatesNotReady, strings.Join(unready, ", ")
	ready.LastTransitionTime = metav1.Now()
	if old := findCondition(api.Status.Conditions, corev1.PodReady); old != nil && old.Status == corev1.ConditionFalse {
		ready.LastTransitionTime = old.LastTransitionTime
	}
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// foreignConditionsChanged reports whether an update of a pod changed the
// conditions others own, which the pod's status (its Ready condition
// among them) must then be computed again for. The node's own status
// writes never change them, so they do not loop back.
func foreignConditionsChanged(old, cur *corev1.Pod) bool {
	a, b := foreignConditions(old), foreignConditions(cur)
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason || a[i].Message != b[i].Message {
			return true
		}
	}
	return false
}

// PodUpdated is the pod informer's update handler: when others changed a
// pod's conditions (a readiness gate's), its status is sent again, with
// Ready computed anew.
func (m *Manager) PodUpdated(old, cur *corev1.Pod) {
	if m.cells.get(cur.UID) == nil || !foreignConditionsChanged(old, cur) {
		return
	}
	m.notifier.statusChanged(cur.UID)
}
