// Package nodetest provides a recording, in-memory node.Pods for tests of
// the virtual node (host/node) and of anything that drives it.
//
// It imports host/node, virtual-kubelet and the Kubernetes API types only.
package nodetest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/host/node"
)

// Op names a recorded call.
type Op string

// The recorded calls.
const (
	OpCreate Op = "CreatePod"
	OpUpdate Op = "UpdatePod"
	OpDelete Op = "DeletePod"
	OpLogs   Op = "GetContainerLogs"
	OpExec   Op = "RunInContainer"
	OpAttach Op = "AttachToContainer"
	OpPortFw Op = "PortForward"
)

// Call is one recorded call.
type Call struct {
	Op        Op
	Namespace string
	Name      string
	Container string
	Cmd       []string
}

// ExecFunc runs a command for RunInContainer. Return node.ExitCode(n) for
// a non-zero exit.
type ExecFunc func(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error

// Pods is a fake node.Pods. CreatePod stores the pod as Pending and does
// nothing else: tests move it on with SetStatus or Run, which push the
// status through NotifyPods as a real backend does. DeletePod records the
// call, reports every container terminated and forgets the pod. The zero
// value is not usable; call New.
type Pods struct {
	mu      sync.Mutex
	pods    map[string]*corev1.Pod // namespace/name
	calls   []Call
	notify  func(*corev1.Pod)
	logs    map[string]string // namespace/pod/container
	exec    ExecFunc
	healthy error
}

var (
	_ node.Pods          = (*Pods)(nil)
	_ node.HealthChecker = (*Pods)(nil)
)

// New returns an empty fake.
func New() *Pods {
	return &Pods{pods: map[string]*corev1.Pod{}, logs: map[string]string{}}
}

func key(namespace, name string) string { return namespace + "/" + name }

func (p *Pods) record(c Call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
}

// Calls returns the calls so far, oldest first.
func (p *Pods) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// Called reports whether op was called for namespace/name.
func (p *Pods) Called(op Op, namespace, name string) bool {
	for _, c := range p.Calls() {
		if c.Op == op && c.Namespace == namespace && c.Name == name {
			return true
		}
	}
	return false
}

// SetLog sets what GetContainerLogs serves for a container.
func (p *Pods) SetLog(namespace, pod, container, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logs[key(namespace, pod)+"/"+container] = text
}

// SetExec sets what RunInContainer runs; without one it writes the command
// line to stdout and succeeds.
func (p *Pods) SetExec(f ExecFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exec = f
}

// SetHealthy sets what Healthy returns.
func (p *Pods) SetHealthy(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healthy = err
}

// SetStatus changes a known pod's status with mutate and pushes it through
// the NotifyPods callback. It fails for an unknown pod.
func (p *Pods) SetStatus(namespace, name string, mutate func(*corev1.PodStatus)) error {
	p.mu.Lock()
	pod, ok := p.pods[key(namespace, name)]
	if !ok {
		p.mu.Unlock()
		return fmt.Errorf("nodetest: no pod %s/%s", namespace, name)
	}
	pod = pod.DeepCopy()
	mutate(&pod.Status)
	p.pods[key(namespace, name)] = pod
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(pod.DeepCopy()) // may block; never under the lock
	}
	return nil
}

// Run marks a known pod Running and Ready with podIP and every container
// running, and pushes the status.
func (p *Pods) Run(namespace, name, podIP string) error {
	p.mu.Lock()
	pod, ok := p.pods[key(namespace, name)]
	var containers []corev1.Container
	if ok {
		containers = pod.Spec.Containers
	}
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("nodetest: no pod %s/%s", namespace, name)
	}
	now := metav1.Now()
	return p.SetStatus(namespace, name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = podIP
		s.PodIPs = []corev1.PodIP{{IP: podIP}}
		s.HostIP = podIP
		s.StartTime = &now
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		s.ContainerStatuses = nil
		for _, c := range containers {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptrTo(true),
				ContainerID: "kip://" + name + "/" + c.Name,
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// CreatePod implements node.Pods.
func (p *Pods) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.record(Call{Op: OpCreate, Namespace: pod.Namespace, Name: pod.Name})
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodPending
	p.mu.Lock()
	p.pods[key(pod.Namespace, pod.Name)] = pod
	p.mu.Unlock()
	return nil
}

// UpdatePod implements node.Pods.
func (p *Pods) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.record(Call{Op: OpUpdate, Namespace: pod.Namespace, Name: pod.Name})
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.pods[key(pod.Namespace, pod.Name)]
	if !ok {
		return errdefs.NotFoundf("pod %s/%s", pod.Namespace, pod.Name)
	}
	pod = pod.DeepCopy()
	pod.Status = old.Status
	p.pods[key(pod.Namespace, pod.Name)] = pod
	return nil
}

// DeletePod implements node.Pods.
func (p *Pods) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.record(Call{Op: OpDelete, Namespace: pod.Namespace, Name: pod.Name})
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	stored, ok := p.pods[k]
	if !ok {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s/%s", pod.Namespace, pod.Name)
	}
	delete(p.pods, k)
	notify := p.notify
	p.mu.Unlock()

	stored = stored.DeepCopy()
	now := metav1.NewTime(time.Now())
	stored.Status.Phase = corev1.PodSucceeded
	for i := range stored.Status.ContainerStatuses {
		cs := &stored.Status.ContainerStatuses[i]
		cs.Ready = false
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", FinishedAt: now, ContainerID: cs.ContainerID,
		}}
	}
	for i := range stored.Status.Conditions {
		if t := stored.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
			stored.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if notify != nil {
		notify(stored)
	}
	return nil
}

// GetPod implements node.Pods.
func (p *Pods) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[key(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s", namespace, name)
	}
	return pod.DeepCopy(), nil
}

// GetPodStatus implements node.Pods.
func (p *Pods) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods implements node.Pods.
func (p *Pods) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod.DeepCopy())
	}
	return out, nil
}

// NotifyPods implements node.Pods.
func (p *Pods) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = cb
}

// Healthy implements node.HealthChecker.
func (p *Pods) Healthy(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthy
}

// GetContainerLogs implements node.Pods: the text set with SetLog, or
// NotFound.
func (p *Pods) GetContainerLogs(_ context.Context, namespace, pod, container string, _ api.ContainerLogOpts) (io.ReadCloser, error) {
	p.record(Call{Op: OpLogs, Namespace: namespace, Name: pod, Container: container})
	p.mu.Lock()
	text, ok := p.logs[key(namespace, pod)+"/"+container]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("no logs for %s/%s/%s", namespace, pod, container)
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

// RunInContainer implements node.Pods.
func (p *Pods) RunInContainer(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error {
	p.record(Call{Op: OpExec, Namespace: namespace, Name: pod, Container: container, Cmd: slices.Clone(cmd)})
	p.mu.Lock()
	exec := p.exec
	p.mu.Unlock()
	if exec != nil {
		return exec(ctx, namespace, pod, container, cmd, attach)
	}
	if out := attach.Stdout(); out != nil {
		_, err := fmt.Fprintln(out, strings.Join(cmd, " "))
		return err
	}
	return nil
}

// AttachToContainer implements node.Pods: it writes a greeting and returns.
func (p *Pods) AttachToContainer(_ context.Context, namespace, pod, container string, attach api.AttachIO) error {
	p.record(Call{Op: OpAttach, Namespace: namespace, Name: pod, Container: container})
	if out := attach.Stdout(); out != nil {
		_, err := fmt.Fprintf(out, "attached to %s/%s/%s\n", namespace, pod, container)
		return err
	}
	return nil
}

// PortForward implements node.Pods: every port echoes what it receives.
func (p *Pods) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	p.record(Call{Op: OpPortFw, Namespace: namespace, Name: pod})
	defer stream.Close()
	done := make(chan error, 1)
	go func() { _, err := io.Copy(stream, stream); done <- err }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
