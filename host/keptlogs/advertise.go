package keptlogs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation on the virtual Node says where its leader serves its kept
// logs (an Advertisement as JSON). The leader writes it with the Node it
// registers (host/node's Config.Annotations, sent by every status
// update), under the node's own identity: NodeRestriction lets a node
// change its own Node's annotations (not its taints, nor labels outside
// the kubelet's). Not the election's Lease: client-go's leader election
// rewrites the Lease every retryPeriod from the copy it last read, and a
// second writer would make its renewals conflict. Every kip process of
// the node, leader or standby, may read its Node.
const Annotation = "kipcell.io/kept-logs"

// Advertisement is where a leader serves its kept logs.
type Advertisement struct {
	// Identity is the leader's name in the election's Lease: a standby
	// mirrors only the Lease's holder, never an old leader whose
	// annotation the new one has not replaced yet.
	Identity string `json:"identity"`
	// URL is the leader's admin server, as a standby reaches it
	// (keptLogs.advertiseURL): Path is under it.
	URL string `json:"url"`
}

// Encode is a's value of Annotation.
func (a Advertisement) Encode() string {
	b, _ := json.Marshal(a) // two strings: no error
	return string(b)
}

// ErrNotAdvertised is wrapped by Leader's error when the Lease's holder
// has not said (yet) where it serves its kept logs.
var ErrNotAdvertised = errors.New("the leader does not advertise its kept logs")

// NodeGetter reads a Node (client-go's NodeInterface is one).
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Leader reads node's Annotation and returns it when it names holder()
// (the election's Lease holder as this process sees it); otherwise an
// error wrapping ErrNotAdvertised.
func Leader(ctx context.Context, nodes NodeGetter, node string, holder func() string) (Advertisement, error) {
	n, err := nodes.Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return Advertisement{}, fmt.Errorf("reading node %s's advertisement of its kept logs: %w", node, err)
	}
	want := holder()
	v, ok := n.Annotations[Annotation]
	if !ok {
		return Advertisement{}, fmt.Errorf("%w: node %s has no annotation %s (the leader %q is a kip without kept-log mirroring, or has no admin server)", ErrNotAdvertised, node, Annotation, want)
	}
	var a Advertisement
	if err := json.Unmarshal([]byte(v), &a); err != nil || a.URL == "" {
		return Advertisement{}, fmt.Errorf("%w: node %s's annotation %s is not an advertisement: %q", ErrNotAdvertised, node, Annotation, v)
	}
	if want == "" || a.Identity != want {
		return Advertisement{}, fmt.Errorf("%w: node %s's annotation %s is %q's, and the Lease's holder is %q", ErrNotAdvertised, node, Annotation, a.Identity, want)
	}
	return a, nil
}
