//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/pluginapi"
	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
	"github.com/kipcell/kip/test/e2e/framework"
)

// settle makes the test, when it ends, delete its namespace's Deployments
// and pods and wait until their cells are gone, so that the next test
// counts only its own cells. Call it right after f.Namespace.
func settle(t *testing.T, ns string) {
	before := cellNames(t)
	t.Cleanup(func() {
		ctx := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		f.WaitFor(t, 60*time.Second, "the test's cells to end", func(context.Context) (bool, error) { return newCells(t, before) == 0, nil })
	})
}

// TestInsufficientCapacityFallsToTheNextType: with no capacity for the
// cheapest type that fits (t3a.small, in every zone), the pod runs on the
// next candidate, and says why.
func TestInsufficientCapacityFallsToTheNextType(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // EC2's InsufficientInstanceCapacity; gce and azure have their own
	kipLogOnFailure(t)
	kip.EC2.InjectInsufficientCapacity("t3a.small", "")
	got, events := squeezedPod(t, func() { kip.EC2.ClearInsufficientCapacity("t3a.small", "") })
	if typ := got.Annotations["cell.kipcell.io/instance-type"]; typ != "t3.small" {
		t.Errorf("placed on %q, want t3.small: the next candidate after t3a.small ($0.0188) is t3.small ($0.0208)", typ)
	}
	for _, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		if !strings.Contains(events, "Warning InsufficientCapacity t3a.small in "+zone+" (on-demand, $0.0188/h): ") ||
			!strings.Contains(events, `insufficient capacity for t3a.small (zone "`+zone+`", on-demand)`) {
			t.Errorf("no InsufficientCapacity event for t3a.small in %s:\n%s", zone, events)
		}
	}
}

// spotDeployment runs a Deployment of one spot pod named name in a
// namespace of its own, and returns the namespace, the pod once Running
// and its instance.
func spotDeployment(t *testing.T, name string) (ns string, pod corev1.Pod, instanceID string) {
	t.Helper()
	kipLogOnFailure(t)
	ns = f.Namespace(t)
	settle(t, ns)
	helloDeployment(t, ns, name, 1, map[string]string{"kipcell.io/capacity-type": "spot"})
	pod = f.WaitForPods(t, ns, "app="+name, 1, 60*time.Second, "Running on spot", func(p *corev1.Pod) bool {
		return running(p) && p.Annotations["cell.kipcell.io/capacity-type"] == "spot"
	})[0]
	for _, in := range kip.EC2.Instances() {
		if in.Tags[pluginapi.TagPodUID] == string(pod.UID) && in.State == "running" {
			instanceID = in.ID
		}
	}
	if instanceID == "" {
		t.Fatalf("no running instance for pod %s", pod.Name)
	}
	return ns, pod, instanceID
}

// TestSpotInterruptionReplacesThePod: a Deployment's spot pod whose
// instance the cloud reclaims fails with the reason, and the Deployment
// replaces it.
func TestSpotInterruptionReplacesThePod(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // EC2's spot interruptions; gce and azure have their own
	ns, first, id := spotDeployment(t, "spotty")
	if err := kip.EC2.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 60*time.Second, "the interrupted pod Failed with the reason", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "CellLost" && strings.Contains(p.Status.Message, "Server.SpotInstanceTermination"), nil
	})
	f.WaitForPods(t, ns, "app=spotty", 2, 60*time.Second, "a replacement Running beside the failed pod", func(p *corev1.Pod) bool {
		return p.Name == first.Name || running(p)
	})
	events := podEvents(t, ns, first.Name)
	if !strings.Contains(events, "Warning CellLost ") || !strings.Contains(events, "SpotInstanceTermination") {
		t.Errorf("the interrupted pod's events do not say why:\n%s", events)
	}
	t.Logf("events of the interrupted pod:\n%s", events)
}

// TestSpotInterruptionNoticeDrainsThePod: an interruption drained before
// termination. A Deployment's spot pod gets EC2's two-minute warning (90 s
// here) in its instance's metadata, where only the cell's agent sees it;
// kip records SpotInterruption and evicts the pod as the kubelet's node
// shutdown does (Failed, Terminated, DisruptionTarget) so that the
// Deployment replaces it, and ends the cell itself: the instance is
// terminated by kip (Client.UserInitiatedShutdown), not reclaimed by EC2.
func TestSpotInterruptionNoticeDrainsThePod(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // EC2's two-minute warning in the instance's metadata
	ns, first, id := spotDeployment(t, "noticed")
	at, err := kip.EC2.NoticeInterruption(id, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var evicted *corev1.Pod
	f.WaitFor(t, 60*time.Second, "the noticed pod evicted", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		evicted = p
		return p.Status.Phase == corev1.PodFailed, nil
	})
	if in, _ := kip.EC2.Instance(id); in.StateReason == ec2sim.ReasonSpotTermination {
		t.Errorf("the instance was reclaimed (%s) before the pod was evicted", in.State)
	}
	if evicted.Status.Reason != "Terminated" || !strings.Contains(evicted.Status.Message, "imminent node shutdown") || !strings.Contains(evicted.Status.Message, id) {
		t.Errorf("evicted pod: reason %q message %q, want Terminated naming the node shutdown and instance %s", evicted.Status.Reason, evicted.Status.Message, id)
	}
	var disruption *corev1.PodCondition
	for i, c := range evicted.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			disruption = &evicted.Status.Conditions[i]
		}
	}
	if disruption == nil || disruption.Status != corev1.ConditionTrue || disruption.Reason != corev1.PodReasonTerminationByKubelet {
		t.Errorf("DisruptionTarget condition %+v, want True TerminationByKubelet", disruption)
	}
	f.WaitForPods(t, ns, "app=noticed", 2, 60*time.Second, "a replacement Running beside the evicted pod", func(p *corev1.Pod) bool {
		return p.Name == first.Name || running(p)
	})
	// kip ends the cell once the pod's containers stopped: the instance
	// goes by kip's TerminateInstances, before EC2 would reclaim it.
	f.WaitFor(t, 60*time.Second, "the instance terminated by kip", func(context.Context) (bool, error) {
		in, _ := kip.EC2.Instance(id)
		if in.StateReason == ec2sim.ReasonSpotTermination {
			return false, fmt.Errorf("instance %s reclaimed by EC2 at %s: kip did not end it first", id, at)
		}
		return in.StateReason == ec2sim.ReasonUserShutdown, nil
	})
	events := podEvents(t, ns, first.Name)
	want := "Warning SpotInterruption the cloud is reclaiming cell "
	if !strings.Contains(events, want) || !strings.Contains(events, "by "+at.UTC().Format(time.RFC3339)+": spot/instance-action terminate from the instance's metadata") {
		t.Errorf("the evicted pod's events lack the SpotInterruption notice by %s:\n%s", at.UTC().Format(time.RFC3339), events)
	}
	t.Logf("events of the evicted pod:\n%s", events)
}

// TestThrottledPluginStillRunsEveryPod: with EC2 answering
// RequestLimitExceeded to a run of calls, every pod of a Deployment ends
// Running, and the plugin never calls faster than its own rate limit
// allows (two token buckets: burst 20 each, refilled at 10/s for
// Describe* and 5/s for the rest, so at most 2×20+10+5 = 55 calls in any
// second).
func TestThrottledPluginStillRunsEveryPod(t *testing.T) {
	framework.Only(t, framework.PluginAWS) // the aws plugin's rate limit and EC2's RequestLimitExceeded; gce and azure have their own
	throttledDeployment(t, kip.EC2, 15, func() { kip.EC2.InjectThrottle(15) }, 55)
}
