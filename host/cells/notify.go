package cells

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// notifier pushes pod statuses to virtual-kubelet (PodNotifier) as cells
// report them: one at a time, as its callback may block for seconds, and
// coalescing repeats of a pod, whose latest status is what is sent.
type notifier struct {
	cells   *cellSet
	changed chan types.UID // statuses to push, coalesced by run

	mu sync.Mutex
	cb func(*corev1.Pod) // virtual-kubelet's, from NotifyPods
}

func newNotifier(cells *cellSet) *notifier {
	return &notifier{cells: cells, changed: make(chan types.UID, 1024)}
}

// setCallback registers virtual-kubelet's status callback.
func (n *notifier) setCallback(cb func(*corev1.Pod)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cb = cb
}

// statusChanged queues the status of pod uid for virtual-kubelet.
func (n *notifier) statusChanged(uid types.UID) {
	select {
	case n.changed <- uid:
	default:
		// Queue full: the loop is behind; it will catch up and the
		// latest status is what it sends anyway.
		go func() { n.changed <- uid }()
	}
}

// run pushes the queued statuses until ctx ends.
func (n *notifier) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case uid := <-n.changed:
			pending := map[types.UID]bool{uid: true}
		drain:
			for {
				select {
				case more := <-n.changed:
					pending[more] = true
				default:
					break drain
				}
			}
			for uid := range pending {
				c := n.cells.get(uid)
				n.mu.Lock()
				cb := n.cb
				n.mu.Unlock()
				if c != nil && cb != nil {
					cb(c.podWithStatus())
				}
			}
		}
	}
}
