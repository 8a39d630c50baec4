package cells

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestEvictionGrace(t *testing.T) {
	seconds := func(s int64) *int64 { return &s }
	for _, tc := range []struct {
		name  string
		grace *int64
		left  time.Duration
		want  time.Duration
	}{
		{"the pod's default, two minutes left", nil, 2 * time.Minute, 30 * time.Second},
		{"the pod's own, two minutes left", seconds(5), 2 * time.Minute, 5 * time.Second},
		{"a long grace cut to the time left less the margin", seconds(300), 2 * time.Minute, 110 * time.Second},
		{"less than the margin left", nil, 8 * time.Second, 0},
		{"partial seconds left are dropped", nil, 25*time.Second + 900*time.Millisecond, 15 * time.Second},
		{"a grace of zero", seconds(0), 2 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.grace}}
			if got := evictionGrace(pod, tc.left); got != tc.want {
				t.Errorf("evictionGrace(%v, %s) = %s, want %s", tc.grace, tc.left, got, tc.want)
			}
		})
	}
}

func TestEvictedStatus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase corev1.PodPhase
		want  corev1.PodPhase
	}{
		{"running", corev1.PodRunning, corev1.PodFailed},
		{"pending", corev1.PodPending, corev1.PodFailed},
		{"succeeded stays", corev1.PodSucceeded, corev1.PodSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := corev1.PodStatus{Phase: tc.phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			evictedStatus(&st, "gone")
			if st.Phase != tc.want || st.Reason != ReasonTerminated || st.Message != "gone" {
				t.Errorf("status %s %s %q, want %s %s", st.Phase, st.Reason, st.Message, tc.want, ReasonTerminated)
			}
			first := *findCondition(st.Conditions, corev1.DisruptionTarget)
			if first.Status != corev1.ConditionTrue || first.Reason != corev1.PodReasonTerminationByKubelet || first.Message != "gone" {
				t.Errorf("DisruptionTarget %+v", first)
			}
			// Again (every status from the agent): one condition, its
			// transition time kept.
			evictedStatus(&st, "gone")
			n := 0
			for _, c := range st.Conditions {
				if c.Type == corev1.DisruptionTarget {
					n++
					if !c.LastTransitionTime.Equal(&first.LastTransitionTime) {
						t.Errorf("transition time moved from %s to %s", first.LastTransitionTime, c.LastTransitionTime)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d DisruptionTarget conditions, want 1", n)
			}
		})
	}
}
