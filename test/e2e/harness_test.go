//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	virtualTaint = "virtual-kubelet.io/provider"
	// harnessLabel keeps the self-test's pods on its own node.
	harnessLabel = "e2e.kipcell.io/node"
)

// TestHarnessNodeIdentityAndScheduling is the harness's self-test: a node
// registered with its own system:node identity (as kip will) gets the pods
// of a Deployment that selects and tolerates it, bound by the real
// scheduler.
func TestHarnessNodeIdentityAndScheduling(t *testing.T) {
	ctx := t.Context()
	node := "e2e-virtual"
	nodeClient, _ := f.NodeClient(t, node)

	// NodeRestriction is on: a node may not give itself kubernetes.io/
	// labels outside the kubelet's own set, such as kubernetes.io/role.
	newNode := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: virtualTaint, Value: "kip", Effect: corev1.TaintEffectNoSchedule}}},
		}
	}
	_, err := nodeClient.CoreV1().Nodes().Create(ctx, newNode(map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent"}), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kubernetes.io/role") {
		t.Errorf("a node setting its own kubernetes.io/role label = %v, want Forbidden by NodeRestriction", err)
	}

	// The node identity may create its own Node, and only its own.
	// Its own label too: other tests' nodes are virtual-kubelet nodes.
	created, err := nodeClient.CoreV1().Nodes().Create(ctx, newNode(map[string]string{"type": "virtual-kubelet", harnessLabel: node}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Node %s with its own identity: %v", node, err)
	}
	t.Cleanup(func() { _ = f.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) }) //nolint:usetesting // a Cleanup: t.Context() has ended
	_, err = nodeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating another Node with %s's identity = %v, want Forbidden (Node authorizer + NodeRestriction)", node, err)
	}

	// Report the node Ready with capacity, as a kubelet does.
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "E2EReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
	}
	f.WaitFor(t, 20*time.Second, "node status update", func(ctx context.Context) (bool, error) {
		cur, err := nodeClient.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Status = created.Status
		_, err = nodeClient.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		// The node lifecycle controller taints a new node (not-ready)
		// between our Get and UpdateStatus: NodeRestriction then sees a
		// taint change and refuses before the conflict check. Read again.
		if apierrors.IsConflict(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "not allowed to modify taints")) {
			return false, nil
		}
		return err == nil, err
	})

	ns := f.Namespace(t)
	labels := map[string]string{"app": "harness"}
	_, err = f.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "harness"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"type": "virtual-kubelet", harnessLabel: node},
					Tolerations:  []corev1.Toleration{{Key: virtualTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers:   []corev1.Container{{Name: "c", Image: "registry.invalid/busybox", Command: []string{"sleep", "3600"}}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Deployment: %v", err)
	}
	pods := f.WaitForPods(t, ns, "app=harness", 2, 60*time.Second, "bound to "+node, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == node
	})
	for _, p := range pods {
		// The node's identity sees the pods bound to it, as kip will.
		got, err := nodeClient.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.Spec.NodeName != node {
			t.Errorf("node %s reading its pod %s: %v", node, p.Name, err)
		}
	}
}

// TestHarnessKubectl checks the built kubectl works with the admin
// kubeconfig, as `make cluster-env` tells users to use it.
func TestHarnessKubectl(t *testing.T) {
	out, err := exec.Command(f.Cluster.BinDir+"/kubectl", "--kubeconfig", f.Cluster.Kubeconfig, "get", "ns", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ns: %v\n%s", err, out)
	}
	for _, ns := range []string{"namespace/default", "namespace/kube-system"} {
		if !strings.Contains(string(out), ns) {
			t.Errorf("kubectl get ns = %q, want %s", out, ns)
		}
	}
}
