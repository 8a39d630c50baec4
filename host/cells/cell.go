package cells

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/host/dispatch"
	"github.com/kipcell/kip/pluginapi"
)

// Event reasons on pods.
const (
	ReasonLaunching      = "LaunchingCell"
	ReasonLaunchFailed   = "LaunchFailed"
	ReasonCellRunning    = "CellRunning"
	ReasonCellLost       = "CellLost"
	ReasonResolveFailed  = "CreateContainerConfigError"
	ReasonTerminating    = "TerminatingCell"
	ReasonCellTerminated = "CellTerminated"
)

// cell is one pod's cell and the goroutine that drives it.
type cell struct {
	m         *Manager
	id        string
	uid       types.UID
	namespace string
	name      string
	key       string
	log       *slog.Logger
	adopted   *pluginapi.Instance // set when re-adopted after a restart

	mu         sync.Mutex
	desired    *corev1.Pod
	generation int64
	status     corev1.PodStatus
	instance   *pluginapi.Instance
	agent      *dispatch.Agent
	deleting   bool
	applyCh    chan struct{} // a new desired pod to apply
	cancel     context.CancelFunc
	done       chan struct{}
	launchedAt time.Time
	placed     map[string]string // placement annotations, once launched
	// interrupted is the cloud's spot-interruption notice, if one came.
	interrupted string
	// stopWatch ends the current status stream so that serve checks the
	// instance at once (an event said it ended); nil between streams.
	stopWatch context.CancelFunc
	// booted wakes waitRunning early: an event said the instance runs.
	booted chan struct{}
	// ended is set once terminate has ended the instance, so that a pod
	// that finished and is then deleted costs one Terminate, not two.
	ended bool
}

func newCell(m *Manager, pod *corev1.Pod) *cell {
	c := &cell{
		m: m, id: CellID(pod.UID), uid: pod.UID, namespace: pod.Namespace, name: pod.Name,
		key: key(pod.Namespace, pod.Name), desired: pod.DeepCopy(), generation: 1,
		applyCh: make(chan struct{}, 1), done: make(chan struct{}), booted: make(chan struct{}, 1),
	}
	c.log = m.log.With("pod", c.key, "cell", c.id)
	c.status = *pod.Status.DeepCopy()
	c.status.Phase = corev1.PodPending
	return c
}

func (c *cell) start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	go c.run(ctx)
}

// setDesired records a new desired pod and, if what the agent acts on
// changed (spec, labels, annotations), asks for it to be applied under a
// new generation. virtual-kubelet's resyncs repeat unchanged pods.
func (c *cell) setDesired(pod *corev1.Pod) {
	c.mu.Lock()
	changed := !equality.Semantic.DeepEqual(c.desired.Spec, pod.Spec) ||
		!equality.Semantic.DeepEqual(c.desired.Labels, pod.Labels) ||
		!equality.Semantic.DeepEqual(withoutPlaced(c.desired.Annotations), withoutPlaced(pod.Annotations))
	c.desired = pod.DeepCopy()
	if changed {
		c.generation++
	}
	c.mu.Unlock()
	if !changed {
		return
	}
	select {
	case c.applyCh <- struct{}{}:
	default:
	}
}

// podWithStatus is the latest desired pod with the cell's status.
func (c *cell) podWithStatus() *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	pod := c.desired.DeepCopy()
	pod.Status = *c.status.DeepCopy()
	if len(c.placed) > 0 {
		// virtual-kubelet sends the whole pod with its status, and the
		// API server keeps a node's annotation changes on pods/status:
		// that is how the placement reaches the pod.
		if pod.Annotations == nil {
			pod.Annotations = make(map[string]string, len(c.placed))
		}
		for k, v := range c.placed {
			pod.Annotations[k] = v
		}
	}
	return pod
}

// setStatus replaces the status the cell reports and pushes it.
func (c *cell) setStatus(mutate func(*corev1.PodStatus)) {
	c.mu.Lock()
	mutate(&c.status)
	c.mu.Unlock()
	c.m.statusChanged(c)
}

// waiting reports every container as waiting for reason, with the pod Pending.
func (c *cell) waiting(reason, message string) {
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Reason, st.Message = "", ""
		st.ContainerStatuses = waitingStatuses(c.desired.Spec.Containers, reason, message)
		st.InitContainerStatuses = waitingStatuses(c.desired.Spec.InitContainers, reason, message)
	})
}

func waitingStatuses(containers []corev1.Container, reason, message string) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(containers))
	for _, ctr := range containers {
		out = append(out, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		})
	}
	return out
}

func (c *cell) event(kind, reason, format string, args ...any) {
	c.mu.Lock()
	pod := c.desired.DeepCopy()
	c.mu.Unlock()
	c.m.recorder.Eventf(pod, kind, reason, format, args...)
}

// run drives the cell from launch to a running pod and keeps it in step
// with the desired pod until the pod ends or is deleted.
func (c *cell) run(ctx context.Context) {
	defer close(c.done)
	inst, err := c.launch(ctx)
	if err != nil {
		return // deleted, or a failure already reported on the pod
	}
	inst, err = c.waitRunning(ctx, inst)
	if err != nil {
		return
	}
	c.serve(ctx, inst)
}
