package cells

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/host/clusterip"
)

// TestServicesReachTheCellBeforeItsPod: a cell's agent gets the
// cluster's ClusterIP services before the pod (so that a pod calling a
// Service at start finds it), and every change after.
func TestServicesReachTheCellBeforeItsPod(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.0.0.10", Ports: []corev1.ServicePort{{Port: 80}}},
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	table, err := clusterip.New(clusterip.Config{NodeName: "kip"}, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	go func() { _ = table.Run(t.Context()) }()

	h := newHarnessSetup(t, setup{opts: []Option{WithServices(table)}})
	h.start(t)
	pod := newPod("web", "uid-s")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	calls := func() []string {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		return slices.Clone(h.agent.calls)
	}
	if got := calls(); len(got) < 2 || !strings.HasPrefix(got[0], "services ") || got[1] != "pod 1" {
		t.Fatalf("agent calls %q, want the services, then the pod", got)
	}

	rev, _ := table.Revision()
	if _, err := client.CoreV1().Services("default").Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.0.0.11", Ports: []corev1.ServicePort{{Port: 443}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new revision applied", func() bool {
		now, _ := table.Revision()
		return now > rev && slices.Contains(calls(), "services "+strconv.FormatUint(now, 10))
	})
}
