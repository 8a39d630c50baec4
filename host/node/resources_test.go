package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// reporter is a ResourceReporter whose answer the test changes.
type reporter struct {
	mu  sync.Mutex
	res []corev1.ResourceName
}

func (r *reporter) ExtendedResources(context.Context) ([]corev1.ResourceName, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]corev1.ResourceName(nil), r.res...), nil
}

func (r *reporter) set(res ...corev1.ResourceName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res = res
}

// TestNodeListsExtendedResources: the Node's capacity and allocatable
// list each extended resource the backend offers, Capacity.GPUs of each,
// and follow when that changes (a plugin swap).
func TestNodeListsExtendedResources(t *testing.T) {
	cfg := DefaultConfig("kip")
	rep := &reporter{}
	rep.set("nvidia.com/gpu")
	p := &nodeProvider{resources: rep, log: slog.New(slog.DiscardHandler), now: time.Now, interval: 20 * time.Millisecond,
		kick: make(chan struct{}, 1),
		node: func(st nodeState) *corev1.Node {
			return nodeObject(cfg, "10.0.0.7", 10250, st, time.Now())
		}}
	got := make(chan *corev1.Node, 10)
	p.NotifyNodeStatus(t.Context(), func(n *corev1.Node) { got <- n })
	next := func() *corev1.Node {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("no node status sent")
			return nil
		}
	}
	n := next()
	want := resource.MustParse(DefaultGPUs)
	for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q, ok := list["nvidia.com/gpu"]; !ok || q.Cmp(want) != 0 {
			t.Errorf("nvidia.com/gpu = %v (listed %v), want %s", q.String(), ok, DefaultGPUs)
		}
	}
	if cpu := n.Status.Capacity[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse(DefaultCPU)) != 0 {
		t.Errorf("cpu = %s, want %s", cpu.String(), DefaultCPU)
	}
	// Without it the scheduler places no pod with an ephemeral-storage
	// request or limit here.
	for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q := list[corev1.ResourceEphemeralStorage]; q.Cmp(resource.MustParse(DefaultEphemeralStorage)) != 0 {
			t.Errorf("ephemeral-storage = %s, want %s", q.String(), DefaultEphemeralStorage)
		}
	}
	rep.set()
	n = next()
	if _, ok := n.Status.Capacity["nvidia.com/gpu"]; ok {
		t.Error("nvidia.com/gpu still listed after the backend stopped offering it")
	}
	select {
	case n := <-got:
		t.Errorf("a status sent without a change: %v", n.Status.Capacity)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestNodeFollowsItsAddress: when the host's address changes (none
// configured), the next status reports the new InternalIP.
func TestNodeFollowsItsAddress(t *testing.T) {
	cfg := DefaultConfig("kip")
	var mu sync.Mutex
	addr := "10.0.0.7"
	p := &nodeProvider{log: slog.New(slog.DiscardHandler), now: time.Now, interval: 20 * time.Millisecond,
		kick: make(chan struct{}, 1), address: addr,
		refreshAddress: func() string { mu.Lock(); defer mu.Unlock(); return addr },
		node:           func(st nodeState) *corev1.Node { return nodeObject(cfg, st.address, 10250, st, time.Now()) }}
	got := make(chan *corev1.Node, 10)
	p.NotifyNodeStatus(t.Context(), func(n *corev1.Node) { got <- n })
	select {
	case <-got: // sent once at the start (sendAgain)
	case <-time.After(5 * time.Second):
		t.Fatal("no status sent at the start")
	}
	select {
	case n := <-got:
		t.Fatalf("a status sent without a change: %v", n.Status.Addresses)
	case <-time.After(100 * time.Millisecond):
	}
	mu.Lock()
	addr = "10.0.0.8"
	mu.Unlock()
	select {
	case n := <-got:
		if a := n.Status.Addresses; len(a) != 1 || a[0].Address != "10.0.0.8" {
			t.Errorf("addresses %v, want the new 10.0.0.8", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no status sent after the address changed")
	}
}

// volumeReporter is a VolumeReporter whose answer the test changes.
type volumeReporter struct {
	mu       sync.Mutex
	attached []corev1.AttachedVolume
	inUse    []corev1.UniqueVolumeName
}

func (r *volumeReporter) Volumes() ([]corev1.AttachedVolume, []corev1.UniqueVolumeName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]corev1.AttachedVolume(nil), r.attached...), append([]corev1.UniqueVolumeName(nil), r.inUse...)
}

// TestNodeListsItsVolumes: the Node's status lists the disks attached to
// its cells and in use by their pods, and follows when they change.
func TestNodeListsItsVolumes(t *testing.T) {
	cfg := DefaultConfig("kip")
	rep := &volumeReporter{}
	p := &nodeProvider{volumes: rep, log: slog.New(slog.DiscardHandler), now: time.Now, interval: 20 * time.Millisecond,
		kick: make(chan struct{}, 1),
		node: func(st nodeState) *corev1.Node { return nodeObject(cfg, "10.0.0.7", 10250, st, time.Now()) }}
	got := make(chan *corev1.Node, 10)
	p.NotifyNodeStatus(t.Context(), func(n *corev1.Node) { got <- n })
	name := corev1.UniqueVolumeName("kubernetes.io/csi/ebs.csi.aws.com^vol-1")
	rep.mu.Lock()
	rep.attached = []corev1.AttachedVolume{{Name: name, DevicePath: "/dev/xvdba"}}
	rep.inUse = []corev1.UniqueVolumeName{name}
	rep.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case n := <-got:
			if len(n.Status.VolumesAttached) == 1 && n.Status.VolumesAttached[0].Name == name &&
				n.Status.VolumesAttached[0].DevicePath == "/dev/xvdba" && len(n.Status.VolumesInUse) == 1 && n.Status.VolumesInUse[0] == name {
				return
			}
		case <-deadline:
			t.Fatal("no node status listing the attached disk")
		}
	}
}

// TestNodeStatusCoalescesChanges: many changes said at once (disks
// attached together, each telling the node) make one status update, and
// a poke that changed nothing sends none.
func TestNodeStatusCoalescesChanges(t *testing.T) {
	cfg := DefaultConfig("kip")
	rep := &volumeReporter{}
	p := &nodeProvider{volumes: rep, log: slog.New(slog.DiscardHandler), now: time.Now, interval: time.Hour,
		kick: make(chan struct{}, 1),
		node: func(st nodeState) *corev1.Node { return nodeObject(cfg, "10.0.0.7", 10250, st, time.Now()) }}
	got := make(chan *corev1.Node, 20)
	p.NotifyNodeStatus(t.Context(), func(n *corev1.Node) { got <- n })
	select {
	case <-got: // sent once at the start (sendAgain)
	case <-time.After(5 * time.Second):
		t.Fatal("no status sent at the start")
	}
	rep.mu.Lock()
	for i := range 10 {
		name := corev1.UniqueVolumeName(fmt.Sprintf("kubernetes.io/csi/ebs.csi.aws.com^vol-%d", i))
		rep.attached = append(rep.attached, corev1.AttachedVolume{Name: name})
		rep.inUse = append(rep.inUse, name)
	}
	rep.mu.Unlock()
	for range 10 {
		p.poke()
	}
	select {
	case n := <-got:
		if len(n.Status.VolumesAttached) != 10 {
			t.Errorf("%d disks in the status, want the 10 attached", len(n.Status.VolumesAttached))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no status sent after the disks were attached")
	}
	p.poke()
	select {
	case n := <-got:
		t.Errorf("a second status for one change, or for a poke that changed nothing: %d disks", len(n.Status.VolumesAttached))
	case <-time.After(200 * time.Millisecond):
	}
}
