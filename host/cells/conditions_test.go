package cells

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func cond(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s}
}

func TestMergeConditions(t *testing.T) {
	const gate = corev1.PodConditionType("example.com/lb")
	tests := []struct {
		name        string
		gates       []corev1.PodConditionType
		apiConds    []corev1.PodCondition
		cellReady   corev1.ConditionStatus
		wantReady   corev1.ConditionStatus
		wantReason  string
		wantMsg     string
		wantForeign bool // the API's gate condition kept
	}{
		{name: "no gates", cellReady: corev1.ConditionTrue, wantReady: corev1.ConditionTrue},
		{name: "gate missing", gates: []corev1.PodConditionType{gate}, cellReady: corev1.ConditionTrue,
			wantReady: corev1.ConditionFalse, wantReason: ReasonReadinessGatesNotReady,
			wantMsg: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`},
		{name: "gate False", gates: []corev1.PodConditionType{gate}, apiConds: []corev1.PodCondition{cond(gate, corev1.ConditionFalse)},
			cellReady: corev1.ConditionTrue, wantReady: corev1.ConditionFalse, wantReason: ReasonReadinessGatesNotReady,
			wantMsg: `the status of pod readiness gate "example.com/lb" is not "True", but False`, wantForeign: true},
		{name: "gate True", gates: []corev1.PodConditionType{gate}, apiConds: []corev1.PodCondition{cond(gate, corev1.ConditionTrue)},
			cellReady: corev1.ConditionTrue, wantReady: corev1.ConditionTrue, wantForeign: true},
		{name: "containers not ready wins", gates: []corev1.PodConditionType{gate}, cellReady: corev1.ConditionFalse,
			wantReady: corev1.ConditionFalse, wantReason: "ContainersNotReady"},
		{name: "the API's Ready is the node's, not kept", apiConds: []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionFalse)},
			cellReady: corev1.ConditionTrue, wantReady: corev1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &corev1.Pod{Status: corev1.PodStatus{Conditions: tt.apiConds}}
			for _, g := range tt.gates {
				api.Spec.ReadinessGates = append(api.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
			}
			ready := cond(corev1.PodReady, tt.cellReady)
			if tt.cellReady != corev1.ConditionTrue {
				ready.Reason = "ContainersNotReady"
			}
			st := &corev1.PodStatus{Conditions: []corev1.PodCondition{cond(corev1.ContainersReady, tt.cellReady), ready}}
			mergeConditions(st, api)
			got := findCondition(st.Conditions, corev1.PodReady)
			if got.Status != tt.wantReady || got.Reason != tt.wantReason || got.Message != tt.wantMsg {
				t.Errorf("Ready = %s %q %q, want %s %q %q", got.Status, got.Reason, got.Message, tt.wantReady, tt.wantReason, tt.wantMsg)
			}
			if kept := findCondition(st.Conditions, gate) != nil; kept != tt.wantForeign {
				t.Errorf("gate condition kept = %v, want %v", kept, tt.wantForeign)
			}
			if n := len(st.Conditions); n != 2+map[bool]int{true: 1}[tt.wantForeign] {
				t.Errorf("conditions = %+v, want ContainersReady, Ready and the gate's when the API has it", st.Conditions)
			}
		})
	}
}

func TestForeignConditionsChanged(t *testing.T) {
	gate := corev1.PodConditionType("example.com/lb")
	pod := func(conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: conds}}
	}
	tests := []struct {
		name     string
		old, cur *corev1.Pod
		want     bool
	}{
		{"the node's own write", pod(cond(corev1.PodReady, corev1.ConditionFalse)), pod(cond(corev1.PodReady, corev1.ConditionTrue)), false},
		{"a gate set", pod(), pod(cond(gate, corev1.ConditionTrue)), true},
		{"a gate flipped", pod(cond(gate, corev1.ConditionTrue)), pod(cond(gate, corev1.ConditionFalse)), true},
		{"a gate unchanged", pod(cond(gate, corev1.ConditionTrue)), pod(cond(gate, corev1.ConditionTrue), cond(corev1.PodReady, corev1.ConditionTrue)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := foreignConditionsChanged(tt.old, tt.cur); got != tt.want {
				t.Errorf("foreignConditionsChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatusOfAPod: the pod sent with a status keeps a condition another
// party set (sent again at once), reports the generation seen on the pod
// and the node's conditions, and keeps the desired pod's labels and
// finalizers: virtual-kubelet compares GetPod's labels with the API's to
// call UpdatePod, so the API's there would hide a label change from the
// cell (host/node writes the API's metadata with a status).
func TestStatusOfAPod(t *testing.T) {
	h := newHarness(t)
	pod := newPod("tracked", "uid-tracked")
	pod.Generation = 3
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	api := pod.DeepCopy()
	api.Finalizers = nil
	api.Labels = map[string]string{"added": "later"}
	api.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}
	if err := h.indexer.Update(api); err != nil {
		t.Fatal(err)
	}
	h.m.PodUpdated(pod, api)
	// (The fake agent reports no conditions of its own: Ready is
	// TestMergeConditions's.)
	got := h.waitNotified(t, "the gate's condition", func(p *corev1.Pod) bool {
		c := findCondition(p.Status.Conditions, "example.com/lb")
		return c != nil && c.Status == corev1.ConditionTrue
	})
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", got.Status.ObservedGeneration)
	}
	if len(got.Finalizers) != 1 || got.Labels["added"] != "" {
		t.Errorf("status pod finalizers %v labels %v, want the desired pod's", got.Finalizers, got.Labels)
	}
	p, err := h.m.GetPod(t.Context(), pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels["added"] != "" {
		t.Errorf("GetPod labels %v: the API's, so virtual-kubelet would not see the change", p.Labels)
	}
}
