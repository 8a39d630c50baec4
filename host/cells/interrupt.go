package cells

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// The eviction of a pod whose spot instance the cloud reclaims, as the
// kubelet's graceful node shutdown does it (pkg/kubelet/nodeshutdown,
// v1.36): the pod is Failed at once with the reason Terminated and a
// DisruptionTarget condition (TerminationByKubelet), so that its
// controller replaces it while its containers stop within their grace
// period, before the instance goes.
const (
	// ReasonTerminated is the reason of a pod evicted for a spot
	// interruption (the kubelet's nodeShutdownReason).
	ReasonTerminated = "Terminated"
	// evictionMessage begins its message (the kubelet's
	// nodeShutdownMessage, which ends where this goes on with the cause).
	evictionMessage = "Pod was terminated in response to imminent node shutdown"
	// evictionMargin is kept between the containers' end and the
	// instance's, for the agent to report it and the host to keep the
	// logs.
	evictionMargin = 10 * time.Second
)

// notice is a cloud's notice about the cell's instance, whichever way it
// came: the plugin's event stream (WatchEvents: EventBridge, the
// instance's state) or the agent's status stream (the instance's
// metadata).
type notice struct {
	kind string // cellapi.NoticeInterruption or cellapi.NoticeRebalance
	// at is, for an interruption, when the instance goes (zero when not
	// said: it is going now).
	at         time.Time
	instanceID string
	reason     string // the cloud's words, if any
}

// notice records a notice once: a rebalance recommendation becomes a
// Warning event; an interruption becomes the SpotInterruption event and,
// when there is time left, the pod's eviction (evictedEnd: Failed at
// once, its containers stopped within their grace cut to the time left,
// their logs kept, the cell ended). An interruption
// without time left is the instance's loss, which the cell finds when the
// instance ends (lost, whose message then names the interruption).
func (c *cell) notice(ctx context.Context, n notice) {
	reason := ""
	if n.reason != "" {
		reason = ": " + n.reason
	}
	switch n.kind {
	case cellapi.NoticeRebalance:
		c.mu.Lock()
		seen := c.rebalanced
		c.rebalanced = true
		c.mu.Unlock()
		if !seen {
			c.event(corev1.EventTypeWarning, ReasonRebalance, "the cloud recommends replacing cell %s (instance %s) soon%s", c.cellID(), n.instanceID, reason)
		}
	case cellapi.NoticeInterruption:
		by := ""
		if !n.at.IsZero() {
			by = " by " + n.at.UTC().Format(time.RFC3339)
		}
		left := n.at.Sub(c.d.cfg.Now())
		c.mu.Lock()
		if c.interrupted != "" {
			c.mu.Unlock()
			return
		}
		pod := c.desired
		evict := left > 0 && !c.deleting && !isTerminal(c.status.Phase)
		grace := evictionGrace(pod, left)
		then := "the pod will fail and its controller can replace it"
		if evict {
			then = fmt.Sprintf("the pod is evicted with a grace period of %s so that its controller replaces it before the instance goes", grace)
		}
		msg := fmt.Sprintf("the cloud is reclaiming cell %s (instance %s, spot)%s%s; %s", c.id, n.instanceID, by, reason, then)
		c.interrupted = msg
		if evict {
			// From now on every status keeps the eviction (agentStatus).
			c.evicted = fmt.Sprintf("%s: the cloud reclaims cell %s (spot instance %s)%s.", evictionMessage, c.id, n.instanceID, by)
		}
		cause := c.evicted
		c.mu.Unlock()
		c.log().Warn("spot interruption", "instance", n.instanceID, "deadline", n.at, "reason", n.reason, "evict", evict, "grace", grace)
		c.event(corev1.EventTypeWarning, ReasonSpotInterruption, "%s", msg)
		if evict {
			c.end(ctx, evictedEnd(cause, grace))
		}
	}
}

// evictionGrace is the grace period of an evicted pod: its own
// (terminationGracePeriodSeconds, 30 s by default), cut to what is left
// before the instance goes, less evictionMargin, as the kubelet cuts it
// to the shutdown grace period.
func evictionGrace(pod *corev1.Pod, left time.Duration) time.Duration {
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	return max(min(grace, (left-evictionMargin).Truncate(time.Second)), 0)
}

// evictedStatus marks a status as the kubelet marks a pod it terminates
// for a node shutdown: Failed (unless it succeeded), reason Terminated,
// and a DisruptionTarget condition.
func evictedStatus(st *corev1.PodStatus, message string) {
	if st.Phase != corev1.PodSucceeded {
		st.Phase = corev1.PodFailed
	}
	st.Reason, st.Message = ReasonTerminated, message
	cond := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: message, LastTransitionTime: metav1.Now(),
	}
	if old := findCondition(st.Conditions, corev1.DisruptionTarget); old != nil {
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		*old = cond
		return
	}
	st.Conditions = append(st.Conditions, cond)
}

// agentNotices takes the notices the agent read from the instance's
// metadata (cellapi.StatusUpdate.Notices).
func (c *cell) agentNotices(ctx context.Context, notices []cellapi.InstanceNotice) {
	for _, n := range notices {
		reason := "from the instance's metadata"
		if n.Action != "" {
			reason = "spot/instance-action " + n.Action + " " + reason
		}
		c.notice(ctx, notice{kind: n.Kind, at: n.Time, instanceID: c.instanceID(), reason: reason})
	}
}
