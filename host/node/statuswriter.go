package node

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// podStatusClient is the pod client virtual-kubelet writes pod statuses
// with. A pods/status write stores the pod's labels, annotations and
// finalizers too, and virtual-kubelet sends the pod as the provider last
// reported it, with the resource version of its cache: metadata that
// others changed since (the Job controller removing its job-tracking
// finalizer from a pod being deleted) would be written back, and the API
// server refuses a new finalizer on a pod being deleted. So UpdateStatus
// takes the labels, annotations and finalizers of the cached pod of that
// very resource version (the write then either matches the stored pod or
// conflicts and is retried), keeping only the annotations under
// ownedPrefix (the placement annotations kip reports) from the provider.
type podStatusClient struct {
	corev1client.PodsGetter
	pods        corev1listers.PodLister
	ownedPrefix string
}

func (c podStatusClient) Pods(namespace string) corev1client.PodInterface {
	return podStatusWriter{PodInterface: c.PodsGetter.Pods(namespace), cached: c.pods.Pods(namespace), ownedPrefix: c.ownedPrefix}
}

type podStatusWriter struct {
	corev1client.PodInterface
	cached      corev1listers.PodNamespaceLister
	ownedPrefix string
}

func (w podStatusWriter) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	if cur, err := w.cached.Get(pod.Name); err == nil && cur.UID == pod.UID && cur.ResourceVersion == pod.ResourceVersion {
		pod = withMetadataOf(pod, cur, w.ownedPrefix)
	}
	return w.PodInterface.UpdateStatus(ctx, pod, opts)
}

// withMetadataOf is pod with the labels, annotations and finalizers of
// cur, but for the annotations of pod under ownedPrefix ("" owns none).
func withMetadataOf(pod, cur *corev1.Pod, ownedPrefix string) *corev1.Pod {
	out := pod.DeepCopy()
	out.Labels = maps.Clone(cur.Labels)
	out.Finalizers = slices.Clone(cur.Finalizers)
	out.Annotations = maps.Clone(cur.Annotations)
	if ownedPrefix == "" {
		return out
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, ownedPrefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}
