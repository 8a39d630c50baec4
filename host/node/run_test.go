package node_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/node/nodetest"
)

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return ok, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestRunFakeClient runs the whole node against client-go's fake clientset:
// registration, lease, a pod reaching CreatePod and its pushed status.
func TestRunFakeClient(t *testing.T) {
	client := fake.NewClientset()
	pods := nodetest.New()
	cfg := node.DefaultConfig("kip-unit")
	cfg.InternalIP = "127.0.0.1"
	cfg.ListenAddress = "127.0.0.1:0"
	n, err := node.New(client, pods, cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Run ends with t.Context(), just before the Cleanups run.
	ctx := t.Context()
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		<-n.Done()
		if err := n.Err(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := n.WaitReady(wctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if n.Addr() == "" {
		t.Error("Addr is empty after WaitReady")
	}
	if err := n.Run(ctx); err == nil {
		t.Error("a second Run succeeded")
	}

	got, err := client.CoreV1().Nodes().Get(ctx, "kip-unit", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node not registered: %v", err)
	}
	if got.Labels["type"] != "virtual-kubelet" || len(got.Spec.Taints) != 1 {
		t.Errorf("registered node labels %v taints %v", got.Labels, got.Spec.Taints)
	}
	waitFor(t, "node lease", func(ctx context.Context) (bool, error) {
		_, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kip-unit", metav1.GetOptions{})
		return err == nil, err
	})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec:       corev1.PodSpec{NodeName: "kip-unit", Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CreatePod", func(context.Context) (bool, error) { return pods.Called(nodetest.OpCreate, "ns", "p"), nil })
	if err := pods.Run("ns", "p", "10.9.8.7"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pushed status", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP == "10.9.8.7", err
	})
}
