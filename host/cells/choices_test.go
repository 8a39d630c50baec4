package cells

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/match"
)

// TestChoicesBoundWhatAPodAsksFor runs pods of the default namespace under
// a cells.choices rule that lets them name fake.* types up to twice the
// price of the cheapest that fits (fake.small, $0.05), and no instance
// profile: what the rule refuses stays Pending with ChoiceForbidden and
// launches nothing; what it allows launches.
func TestChoicesBoundWhatAPodAsksFor(t *testing.T) {
	rules := choices.Config{Rules: []choices.Rule{{Name: "default-ns", Namespaces: []string{"default"}, InstanceTypes: []string{"fake.*"}, MaxPriceRatio: 2}}}
	tests := []struct {
		name        string
		annotations map[string]string
		refused     string // a part of the message; "" when it launches
		placed      string
	}{
		{"above the ceiling", map[string]string{match.AnnotationInstanceType: "fake.large"}, // $0.40
			`annotation kipcell.io/instance-type asks for instance type "fake.large": rule "default-ns" of kip's cells.choices (for namespace "default") allows at most 2× the hourly price of fake.small ($0.0500)`, ""},
		{"an identity the rule does not list", map[string]string{AnnotationInstanceProfile: "admin"},
			`annotation kipcell.io/instance-profile asks for instance profile "admin": rule "default-ns"`, ""},
		{"within the ceiling", map[string]string{match.AnnotationInstanceType: "fake.medium"}, "", "fake.medium"}, // $0.10
		{"nothing asked", nil, "", "fake.small"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessSetup(t, setup{config: func(c *Config) { c.Choices = rules }})
			h.start(t)
			pod := newPod("chooser", types.UID(fmt.Sprintf("uid-choice-%d", i)))
			pod.Annotations = tt.annotations
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			_ = h.m.CreatePod(t.Context(), pod)
			if tt.refused == "" {
				p := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
				if got := p.Annotations[AnnotationPlacedType]; got != tt.placed {
					t.Errorf("placed on %q, want %q", got, tt.placed)
				}
				return
			}
			p := h.waitNotified(t, "the reason", func(p *corev1.Pod) bool { return p.Status.Reason == choices.ReasonChoiceForbidden })
			if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, tt.refused) {
				t.Errorf("status = %s %q, want Pending with a message containing %q", p.Status.Phase, p.Status.Message, tt.refused)
			}
			eventually(t, "the event", func() bool {
				return strings.Contains(h.events(), "Warning ChoiceForbidden "+tt.refused)
			})
			if n := h.plugin.Calls("Launch"); n != 0 {
				t.Errorf("Launch called %d times for a pod whose choice the rule refuses", n)
			}
		})
	}
}
