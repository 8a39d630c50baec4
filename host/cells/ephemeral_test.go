package cells

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestEphemeralContainerAdmission: an ephemeral container (kubectl debug)
// that breaks the node's rules never reaches the agent; it is reported
// Terminated with the rule's reason, with a Warning event on its field
// path, and the pod runs on. One that breaks none reaches the agent.
func TestEphemeralContainerAdmission(t *testing.T) {
	const privilegedMsg = `container "debugger" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`
	tests := []struct {
		name       string
		sc         *corev1.SecurityContext
		wantReason string // "": sent to the agent
		wantMsg    string
	}{
		{name: "plain", sc: nil},
		{name: "privileged", sc: &corev1.SecurityContext{Privileged: ptr.To(true)},
			wantReason: ReasonPrivilegedForbidden, wantMsg: privilegedMsg},
		{name: "SYS_ADMIN", sc: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}},
			wantReason: ReasonCapabilityForbidden,
			wantMsg:    `container "debugger" adds capability SYS_ADMIN (spec.ephemeralContainers[0].securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.runningPod(t, "web", "uid-1")
			pod := newPod("web", "uid-1")
			pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox", SecurityContext: tt.sc},
				TargetContainerName:      "main",
			}}
			if err := h.indexer.Update(pod); err != nil {
				t.Fatal(err)
			}
			if err := h.m.UpdatePod(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			// The agent takes the new generation either way (the pod
			// changed); whether it hears of the debugger is the test.
			eventually(t, "the changed pod sent", func() bool {
				h.agent.mu.Lock()
				defer h.agent.mu.Unlock()
				return len(h.agent.applied) >= 2
			})
			h.agent.mu.Lock()
			var sent corev1.Pod
			err := json.Unmarshal(h.agent.podJSON, &sent)
			h.agent.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, ec := range sent.Spec.EphemeralContainers {
				names = append(names, ec.Name)
			}
			if tt.wantReason == "" {
				if !slices.Equal(names, []string{"debugger"}) {
					t.Errorf("the agent was sent ephemeral containers %v, want [debugger]", names)
				}
				return
			}
			if len(names) != 0 {
				t.Errorf("the agent was sent ephemeral containers %v, want none", names)
			}
			p := h.waitNotified(t, "the debugger refused", func(p *corev1.Pod) bool { return len(p.Status.EphemeralContainerStatuses) == 1 })
			term := p.Status.EphemeralContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != 128 || term.Reason != tt.wantReason || term.Message != tt.wantMsg {
				t.Errorf("debugger state = %+v, want Terminated 128 %s %q", p.Status.EphemeralContainerStatuses[0].State, tt.wantReason, tt.wantMsg)
			}
			if p.Status.Phase != corev1.PodRunning {
				t.Errorf("phase = %s, want Running", p.Status.Phase)
			}
			eventually(t, "the event", func() bool {
				return strings.Contains(h.events(), "Warning "+tt.wantReason+" "+tt.wantMsg)
			})
		})
	}
}

// TestContainerFieldPath: the kubelet's field paths (fieldPath in
// pkg/kubelet/container/ref.go), on which a container's events are.
func TestContainerFieldPath(t *testing.T) {
	pod := newPod("web", "uid-1")
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger"}}}
	for name, want := range map[string]string{
		"main":     "spec.containers{main}",
		"setup":    "spec.initContainers{setup}",
		"debugger": "spec.ephemeralContainers{debugger}",
	} {
		if got := containerFieldPath(pod, name); got != want {
			t.Errorf("containerFieldPath(%s) = %q, want %q", name, got, want)
		}
	}
}
