package node

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestStatusWriteKeepsTheAPIsMetadata: a status write of a pod as the
// provider reported it carries the stored pod's finalizers, labels and
// annotations when the cache has that resource version (the Job
// controller's removed finalizer stays removed), with the provider's own
// annotations on top.
func TestStatusWriteKeepsTheAPIsMetadata(t *testing.T) {
	stored := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"app": "x", "new": "label"}, Annotations: map[string]string{"a": "1"}}}
	provider := stored.DeepCopy()
	provider.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	provider.Labels = map[string]string{"app": "x"}
	provider.Annotations = map[string]string{"a": "old", "cell.kipcell.io/instance-type": "t3.micro"}
	provider.Status.Phase = corev1.PodSucceeded

	client := fake.NewClientset(stored.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(stored); err != nil {
		t.Fatal(err)
	}
	c := podStatusClient{PodsGetter: client.CoreV1(), pods: corev1listers.NewPodLister(indexer), ownedPrefix: "cell.kipcell.io/"}
	got, err := c.Pods("ns").UpdateStatus(t.Context(), provider, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"app": "x", "new": "label"}, Annotations: map[string]string{"a": "1", "cell.kipcell.io/instance-type": "t3.micro"}}
	if diff := cmp.Diff(want, got.ObjectMeta); diff != "" {
		t.Errorf("written metadata (-want +got):\n%s", diff)
	}
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("status phase %s, want the provider's", got.Status.Phase)
	}

	// Without an owned prefix none of the provider's annotations stays.
	if out := withMetadataOf(provider, stored, ""); out.Labels["new"] != "label" || out.Annotations["cell.kipcell.io/instance-type"] != "" {
		t.Errorf("withMetadataOf without an owned prefix = %v %v", out.Labels, out.Annotations)
	}
}
