package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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

// TestRunZoneAndCSINode: with node.zone and the plugin's volume drivers,
// a Node registered before gets the zone labels, the CSINode is written
// owned by it, and when the Node is deleted and registered again the
// CSINode follows the new Node.
func TestRunZoneAndCSINode(t *testing.T) {
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kip-zone", UID: "uid-1", Labels: map[string]string{"example.com/kept": "yes"}}}
	client := fake.NewClientset(existing)
	// The fake keeps the UID it is given: a Node created by kip gets one
	// as from the API server.
	client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Node).UID = "uid-2"
		return false, nil, nil
	})
	cfg := node.DefaultConfig("kip-zone")
	cfg.InternalIP, cfg.ListenAddress = "127.0.0.1", "127.0.0.1:0"
	cfg.StatusUpdateInterval = 100 * time.Millisecond
	cfg.Zone, cfg.VolumeDrivers = "us-east-1a", []string{"ebs.csi.aws.com"}
	n, err := node.New(client, nodetest.New(), cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		<-n.Done()
		if err := n.Err(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}

	waitFor(t, "zone labels on the Node", func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().Nodes().Get(ctx, "kip-zone", metav1.GetOptions{})
		return err == nil && got.Labels["topology.kubernetes.io/zone"] == "us-east-1a" &&
			got.Labels["topology.ebs.csi.aws.com/zone"] == "us-east-1a" && got.Labels["example.com/kept"] == "yes", err
	})
	wantSpec := storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "kip-zone", TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"}}}}
	csiNodeOwnedBy := func(uid types.UID) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := client.StorageV1().CSINodes().Get(ctx, "kip-zone", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return cmp.Equal(wantSpec, got.Spec) && len(got.OwnerReferences) == 1 &&
				got.OwnerReferences[0].Kind == "Node" && got.OwnerReferences[0].UID == uid, nil
		}
	}
	waitFor(t, "the CSINode owned by the Node", csiNodeOwnedBy("uid-1"))

	if err := client.CoreV1().Nodes().Delete(ctx, "kip-zone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CSINode owned by the Node registered again", csiNodeOwnedBy("uid-2"))
}
