package cells

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

func TestPollDelay(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, 20 * time.Millisecond},
		{2, 40 * time.Millisecond},
		{3, 80 * time.Millisecond},
		{7, 1280 * time.Millisecond},
		{8, 2 * time.Second},
		{100, 2 * time.Second},
	} {
		if got := pollDelay(tc.n); got != tc.want {
			t.Errorf("pollDelay(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

// describeCounter stands between the cells and the plugin's
// DescribeVolumeAttachments: it counts the calls and how many were in
// flight at once, each taking hold long enough for calls made together
// to overlap.
type describeCounter struct {
	volumeAPI
	hold            time.Duration
	calls, inFlight atomic.Int32
	mu              sync.Mutex
	maxInFlight     int32
}

func (d *describeCounter) DescribeVolumeAttachments(ctx context.Context, req *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	d.calls.Add(1)
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	d.mu.Lock()
	d.maxInFlight = max(d.maxInFlight, n)
	d.mu.Unlock()
	time.Sleep(d.hold)
	return d.volumeAPI.DescribeVolumeAttachments(ctx, req)
}

// The disks of one instance are polled together: a pod with three disks
// attaching costs one DescribeVolumeAttachments a round, never three at
// once, and each disk is attached with its own device.
func TestDisksOfAnInstanceShareOnePoll(t *testing.T) {
	store := pluginfake.NewStore()
	var objs []runtime.Object
	pod := newPod("three", "uid-three")
	for i := range 3 {
		name := fmt.Sprintf("data-%d", i)
		pvc, pv := claimFor(name, store.CreateVolume(pluginfake.DefaultZone), "")
		objs = append(objs, pvc, pv)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/" + name})
	}
	counter := &describeCounter{hold: 30 * time.Millisecond}
	h := diskHarness(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithStore(store), pluginfake.WithAttachDelay(400 * time.Millisecond)},
		opts: []Option{func(d *cellDeps) {
			counter.volumeAPI = d.volumes
			d.volumes = counter
		}},
	}, objs...)
	h.create(t, pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	if n := counter.calls.Load(); n < 2 {
		t.Errorf("%d DescribeVolumeAttachments while attaching for 400 ms, want the disks polled", n)
	}
	counter.mu.Lock()
	maxInFlight := counter.maxInFlight
	counter.mu.Unlock()
	if maxInFlight != 1 {
		t.Errorf("%d DescribeVolumeAttachments of the instance at once, want one a round for its three disks", maxInFlight)
	}
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	if len(h.agent.disks) != 3 {
		t.Fatalf("the agent got disks %+v, want three", h.agent.disks)
	}
	serials := map[string]bool{}
	for _, d := range h.agent.disks {
		serials[d.Serial] = true
	}
	if len(serials) != 3 {
		t.Errorf("the agent got disks %+v, want each its own device", h.agent.disks)
	}
}

// stubDescribe answers DescribeVolumeAttachments with the attachments it
// holds, counting the calls.
type stubDescribe struct {
	volumeAPI
	calls atomic.Int32
	atts  []pluginapi.VolumeAttachment
}

func (s *stubDescribe) DescribeVolumeAttachments(context.Context, *pluginapi.DescribeVolumeAttachmentsRequest) (*pluginapi.DescribeVolumeAttachmentsResponse, error) {
	s.calls.Add(1)
	return &pluginapi.DescribeVolumeAttachmentsResponse{Attachments: s.atts}, nil
}

// Every waiter of a round gets its one answer; a waiter that leaves
// (its ctx ends) leaves no round to be made for nobody.
func TestAttachPollerRounds(t *testing.T) {
	stub := &stubDescribe{atts: []pluginapi.VolumeAttachment{{InstanceID: "i-1", VolumeHandle: "vol-1", State: pluginapi.AttachmentAttached}}}
	p := newAttachPoller(stub, "i-1")
	var wg sync.WaitGroup
	got := make([]*pluginapi.DescribeVolumeAttachmentsResponse, 3)
	for i := range got {
		wg.Go(func() {
			resp, err := p.wait(t.Context())
			if err != nil {
				t.Errorf("wait: %v", err)
			}
			got[i] = resp
		})
	}
	// The round starts once the three wait: its one Describe answers them all.
	eventually(t, "three waiters", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next != nil && p.next.waiters == 3
	})
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	running.Go(func() { p.run(ctx) })
	wg.Wait()
	if n := stub.calls.Load(); n != 1 {
		t.Errorf("%d Describe calls for three waiters of one round, want 1", n)
	}
	for i, resp := range got {
		if resp == nil || len(resp.Attachments) != 1 || resp.Attachments[0].VolumeHandle != "vol-1" {
			t.Errorf("waiter %d got %+v, want the round's answer", i, resp)
		}
	}

	// A waiter that gives up before its round: no Describe for nobody.
	wctx, wcancel := context.WithCancel(t.Context())
	wcancel()
	if _, err := p.wait(wctx); err == nil {
		t.Error("wait with an ended context answered")
	}
	time.Sleep(3 * pollFirst)
	if n := stub.calls.Load(); n != 1 {
		t.Errorf("%d Describe calls after a waiter left, want still 1", n)
	}
	cancel()
	running.Wait()
}

// The node is told (NotifyNodeChanges) once a pod's disks are attached
// and once they are detached, and Volumes then answers the change: the
// Node's volumesAttached follows without waiting for its status interval.
func TestNodeToldOfAttachAndDetach(t *testing.T) {
	store := pluginfake.NewStore()
	pvc, pv := claimFor("data", store.CreateVolume(pluginfake.DefaultZone), "")
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)}}, pvc, pv)
	var mu sync.Mutex
	var seen []int // how many disks Volumes listed at each call
	h.m.NotifyNodeChanges(func() {
		attached, _ := h.m.Volumes()
		mu.Lock()
		seen = append(seen, len(attached))
		mu.Unlock()
	})
	told := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) > 0 && seen[len(seen)-1] == n
		}
	}
	pod := podWithClaim("web-0", "uid-told", "data")
	h.create(t, pod)
	eventually(t, "the node told of the attached disk", told(1))
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node told of the detached disk", told(0))
}

// getInfoSwap answers GetInfo with the volume drivers the test sets, as
// a plugin swapped on SIGHUP answers its own.
type getInfoSwap struct {
	pluginapi.Client
	mu      sync.Mutex
	drivers []string
}

func (g *getInfoSwap) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	resp, err := g.Client.GetInfo(ctx, req)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	resp.VolumeDrivers = g.drivers
	return resp, nil
}

// A plugin swap (the daemon's reload calls RefreshCatalog) tells the
// node, and VolumeDrivers then answers the new plugin's drivers, which
// the Node's zone labels and CSINode follow.
func TestPluginSwapTellsTheNodeItsDrivers(t *testing.T) {
	swap := &getInfoSwap{drivers: []string{pluginfake.VolumeDriver}}
	h := newHarnessSetup(t, setup{config: func(c *Config) { c.CatalogTTL = time.Hour },
		wrap: func(p *pluginfake.Provider) pluginapi.Client { swap.Client = p; return swap }})
	var told atomic.Int32
	h.m.NotifyNodeChanges(func() { told.Add(1) })
	if got, err := h.m.VolumeDrivers(t.Context()); err != nil || !slices.Equal(got, []string{pluginfake.VolumeDriver}) {
		t.Fatalf("VolumeDrivers = %v, %v; want the plugin's", got, err)
	}
	swap.mu.Lock()
	swap.drivers = []string{"other.csi.example.com"}
	swap.mu.Unlock()
	h.m.RefreshCatalog()
	if told.Load() != 1 {
		t.Errorf("the node was told %d times of the swap, want once", told.Load())
	}
	if got, err := h.m.VolumeDrivers(t.Context()); err != nil || !slices.Equal(got, []string{"other.csi.example.com"}) {
		t.Errorf("VolumeDrivers after the swap = %v, %v; want the new plugin's", got, err)
	}
}

// An inline csi volume of a driver whose CSIDriver does not list
// Ephemeral is refused as the kubelet refuses it: the pod stays Pending
// with the kubelet's FailedMount event and message, and nothing is
// launched for it.
func TestInlineCSIOfAPersistentDriverWaitsWithFailedMount(t *testing.T) {
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "disk.csi.example.com"},
		Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}
	h := diskHarness(t, setup{}, drv)
	pod := newPod("inline", "uid-inline")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "disk.csi.example.com"}}}}
	h.create(t, pod)
	const want = `MountVolume.SetUp failed for volume "scratch" : kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: ` +
		`volume mode "Ephemeral" not supported by driver disk.csi.example.com (only supports ["Persistent"])`
	p := h.waitNotified(t, "the reason", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonFailedMount })
	if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, want) {
		t.Errorf("status %s %q, want Pending saying\n%s", p.Status.Phase, p.Status.Message, want)
	}
	var events strings.Builder // h.events drains the recorder
	eventually(t, "the event", func() bool {
		events.WriteString(h.events())
		ev := events.String()
		return strings.Contains(ev, "Warning FailedMount ") && strings.Contains(ev, want)
	})
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times for a pod whose volume the kubelet would refuse", n)
	}
}
