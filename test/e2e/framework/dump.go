package framework

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/test/controlplane"
)

// Dump writes what a person debugging a failed test looks at first: the
// namespace's events in time order, each pod's node, phase, conditions and
// container states, the nodes, and the last lines of every control-plane
// component's log.
func (f *Framework) Dump(t testing.TB, namespace string) {
	t.Helper()
	ctx := context.Background() //nolint:usetesting // called from Namespace's Cleanup, when t.Context() has ended
	var b strings.Builder
	fmt.Fprintf(&b, "\n===== dump of namespace %s =====\n", namespace)
	if events, err := f.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "listing events: %v\n", err)
	} else {
		sort.Slice(events.Items, func(i, j int) bool {
			return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
		})
		fmt.Fprintf(&b, "--- events (%d)\n", len(events.Items))
		for i, e := range events.Items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", eventTime(&events.Items[i]).Format("15:04:05.000"), e.Type,
				strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	if pods, err := f.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "listing pods: %v\n", err)
	} else {
		fmt.Fprintf(&b, "--- pods (%d)\n", len(pods.Items))
		for i := range pods.Items {
			describePod(&b, &pods.Items[i])
		}
	}
	if nodes, err := f.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(&b, "--- nodes (%d)\n", len(nodes.Items))
		for _, n := range nodes.Items {
			fmt.Fprintf(&b, "%s labels=%v taints=%v\n", n.Name, n.Labels, n.Spec.Taints)
			for _, c := range n.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	for _, comp := range controlplane.Components {
		data, err := os.ReadFile(f.Cluster.LogPath(comp))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- last lines of %s\n%s\n", f.Cluster.LogPath(comp), tail(string(data), 25))
	}
	t.Log(b.String())
}

// eventTime is when an event last happened: LastTimestamp for events from
// the old API, EventTime for those from events.k8s.io.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

func describePod(b *strings.Builder, p *corev1.Pod) {
	fmt.Fprintf(b, "pod %s node=%q phase=%s reason=%q message=%q\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Reason, p.Status.Message)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(b, "  condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		state := "unknown"
		switch {
		case cs.State.Running != nil:
			state = "running since " + cs.State.Running.StartedAt.Format("15:04:05")
		case cs.State.Waiting != nil:
			state = fmt.Sprintf("waiting %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated exit %d %s", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		}
		fmt.Fprintf(b, "  container %s ready=%t restarts=%d %s\n", cs.Name, cs.Ready, cs.RestartCount, state)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
