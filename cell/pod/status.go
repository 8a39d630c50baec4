package pod

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// computeStatusLocked builds the pod status from the container states, as
// the kubelet's status manager does. Conditions keep their transition time
// while their status does not change.
func (m *Manager) computeStatusLocked() corev1.PodStatus {
	st := corev1.PodStatus{Phase: corev1.PodPending, StartTime: m.startTime}
	if ip := m.podIPLocked(); ip != "" {
		st.PodIP = ip
		st.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	if m.cfg.HostIP != "" {
		st.HostIP = m.cfg.HostIP
		st.HostIPs = []corev1.HostIP{{IP: m.cfg.HostIP}}
	}
	if m.desired == nil {
		return st
	}
	for _, cs := range m.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, *cs.status.DeepCopy())
	}
	for _, cs := range m.apps {
		st.ContainerStatuses = append(st.ContainerStatuses, *cs.status.DeepCopy())
	}
	for _, cs := range m.ephems {
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, *cs.status.DeepCopy())
	}
	st.Phase = m.phaseLocked()
	if m.deleted && st.Phase != corev1.PodSucceeded && st.Phase != corev1.PodFailed {
		st.Phase = corev1.PodFailed
		if m.allExitedZeroLocked() {
			st.Phase = corev1.PodSucceeded
		}
	}
	switch {
	case m.deadline:
		st.Phase, st.Reason, st.Message = corev1.PodFailed, ReasonDeadlineExceeded, messageDeadlineExceeded
	case m.evicted != "":
		st.Phase, st.Reason, st.Message = corev1.PodFailed, ReasonEvicted, m.evicted
	}
	st.QOSClass = qosClass(m.desired.Pod)

	st.Conditions = m.conditionsLocked(st.Phase)
	now := metav1.NewTime(m.now())
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.LastTransitionTime = now
		for _, old := range m.status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return st
}

// conditionsLocked are the Initialized, ContainersReady and Ready
// conditions as the kubelet generates them (pkg/kubelet/status/generate.go
// of v1.36), without their times.
func (m *Manager) conditionsLocked(phase corev1.PodPhase) []corev1.PodCondition {
	incompleteInit, unready := m.incompleteLocked()
	condition := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		if ok {
			return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
		}
		return corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	}
	var initialized, containersReady corev1.PodCondition
	switch {
	case phase == corev1.PodSucceeded:
		initialized = corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: "PodCompleted"}
	case m.anyAppStartedLocked():
		initialized = condition(corev1.PodInitialized, true, "", "")
	default:
		initialized = condition(corev1.PodInitialized, len(incompleteInit) == 0, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incompleteInit, " ")))
	}
	switch phase {
	case corev1.PodSucceeded:
		containersReady = condition(corev1.ContainersReady, false, "PodCompleted", "")
	case corev1.PodFailed:
		containersReady = condition(corev1.ContainersReady, false, "PodFailed", "")
	default:
		containersReady = condition(corev1.ContainersReady, len(unready) == 0, "ContainersNotReady",
			fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " ")))
	}
	ready := containersReady
	ready.Type = corev1.PodReady
	return []corev1.PodCondition{initialized, containersReady, ready}
}

// anyAppStartedLocked is the kubelet's HasAnyRegularContainerStarted: an
// app container runs or has run.
func (m *Manager) anyAppStartedLocked() bool {
	for _, cs := range m.apps {
		if cs.status.State.Running != nil || cs.status.State.Terminated != nil {
			return true
		}
	}
	return false
}

// incompleteLocked lists the init containers that have not completed (a
// sidecar is complete while started) and the containers that are not
// ready (sidecars and app containers).
func (m *Manager) incompleteLocked() (incompleteInit, unready []string) {
	for _, cs := range m.inits {
		started := cs.status.Started != nil && *cs.status.Started
		if !cs.succeeded && (!cs.sidecar || !started) {
			incompleteInit = append(incompleteInit, cs.name)
		}
		if cs.sidecar && !cs.status.Ready {
			unready = append(unready, cs.name)
		}
	}
	for _, cs := range m.apps {
		if !cs.status.Ready {
			unready = append(unready, cs.name)
		}
	}
	return incompleteInit, unready
}

// phaseLocked is the kubelet's getPhase.
func (m *Manager) phaseLocked() corev1.PodPhase {
	if m.initFail {
		return corev1.PodFailed
	}
	if !m.initDone {
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range m.apps {
		s := cs.status
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch policy := m.desired.Pod.Spec.RestartPolicy; {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch policy {
		case corev1.RestartPolicyNever:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		case corev1.RestartPolicyOnFailure:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		default:
			return corev1.PodRunning
		}
	}
	return corev1.PodPending
}

func (m *Manager) allExitedZeroLocked() bool {
	for _, cs := range m.apps {
		t := cs.status.State.Terminated
		if t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return true
}

// qosClass is the pod's QoS class, as the API server computes it.
func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	all := append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...)
	any, guaranteed := false, true
	for _, c := range all {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
