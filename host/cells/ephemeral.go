package cells

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ephemeral containers (kubectl debug) come to a running pod, after the
// node admitted it; the kubelet admits pods only as they come, and leaves
// ephemeral containers to the API server's Pod Security admission. Kip's
// own rules (admit.go) keep the instance from the pod, so an ephemeral
// container that breaks one must not run either: the agent never hears of
// it, the pod gets a Warning event with the rule's reason and message on
// the container's field path, and the container's status is Terminated
// with exit code 128 (the kubelet's for a container that could not start,
// StartError) and the rule's reason and message: final, as an ephemeral
// container is never started again, and what kubectl debug shows when it
// stops waiting for the container. The pod runs on.

// refusedContainer is an ephemeral container the node does not run.
type refusedContainer struct {
	reason, message string
	at              metav1.Time
}

// admitEphemeral says why the node does not run ephemeral container i of
// pod, or ok; the rules of the containers in admit.
func (a admission) admitEphemeral(pod *corev1.Pod, i int) (reason, message string, ok bool) {
	var reasons, messages []string
	refuse := func(r, format string, args ...any) {
		reasons, messages = append(reasons, r), append(messages, fmt.Sprintf(format, args...))
	}
	c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	a.admitPrivileged(c, refuse)
	a.admitContainer(fmt.Sprintf("spec.ephemeralContainers[%d]", i), c, refuse)
	if len(reasons) == 0 {
		return "", "", true
	}
	return reasons[0], strings.Join(messages, "; "), false
}

// withoutRefusedEphemeral is pod, a copy of the desired one, without the
// ephemeral containers the node does not run. Each is refused once, with
// a Warning event.
func (c *cell) withoutRefusedEphemeral(pod *corev1.Pod) *corev1.Pod {
	var (
		keep    []corev1.EphemeralContainer
		refused []corev1.EphemeralContainer
	)
	c.mu.Lock()
	for i, ec := range pod.Spec.EphemeralContainers {
		if _, ok := c.refusedEphemeral[ec.Name]; ok {
			continue // refused earlier
		}
		reason, message, ok := c.d.admission.admitEphemeral(pod, i)
		if ok {
			keep = append(keep, ec)
			continue
		}
		if c.refusedEphemeral == nil {
			c.refusedEphemeral = map[string]refusedContainer{}
		}
		c.refusedEphemeral[ec.Name] = refusedContainer{reason: reason, message: message, at: metav1.NewTime(c.d.cfg.Now())}
		refused = append(refused, ec)
	}
	rc := make([]refusedContainer, len(refused))
	for i, ec := range refused {
		rc[i] = c.refusedEphemeral[ec.Name]
	}
	c.mu.Unlock()
	for i, ec := range refused {
		c.log().Warn("ephemeral container refused", "container", ec.Name, "reason", rc[i].reason, "message", rc[i].message)
		ref := &corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			FieldPath: containerFieldPath(pod, ec.Name),
		}
		c.d.recorder.Event(ref, corev1.EventTypeWarning, rc[i].reason, rc[i].message)
	}
	if len(refused) > 0 && c.d.statusChanged != nil {
		c.d.statusChanged(c.uid)
	}
	pod.Spec.EphemeralContainers = keep
	return pod
}

// addRefusedEphemeralLocked adds to pod's status the ephemeral containers
// the node refused, in the pod's order with those the agent reports.
func (c *cell) addRefusedEphemeralLocked(pod *corev1.Pod) {
	if len(c.refusedEphemeral) == 0 {
		return
	}
	reported := map[string]corev1.ContainerStatus{}
	for _, s := range pod.Status.EphemeralContainerStatuses {
		reported[s.Name] = s
	}
	var out []corev1.ContainerStatus
	for _, ec := range pod.Spec.EphemeralContainers {
		if r, ok := c.refusedEphemeral[ec.Name]; ok {
			out = append(out, corev1.ContainerStatus{
				Name: ec.Name, Image: ec.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 128, Reason: r.reason, Message: r.message, StartedAt: r.at, FinishedAt: r.at,
				}},
			})
		} else if s, ok := reported[ec.Name]; ok {
			out = append(out, s)
		}
	}
	pod.Status.EphemeralContainerStatuses = out
}
