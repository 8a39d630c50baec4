package cells

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// claimFor returns a claim named name bound to a PV of the fake's driver
// for handle, the PV reachable only from zone (when set).
func claimFor(name, handle, zone string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvName := "pv-" + name
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("claim-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeName:  pvName,
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: pluginfake.VolumeDriver, VolumeHandle: handle, FSType: "ext4",
			}},
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: name, UID: pvc.UID},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	if zone != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}}}
	}
	return pvc, pv
}

// podWithClaim is a pod mounting claim at /data.
func podWithClaim(name string, uid types.UID, claim string) *corev1.Pod {
	pod := newPod(name, uid)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return pod
}

// diskHarness is a harness whose Manager reads claims from objs.
func diskHarness(t *testing.T, s setup, objs ...runtime.Object) *harness {
	t.Helper()
	s.opts = append(s.opts, WithVolumes(volumes.NewSource(fake.NewClientset(objs...))))
	h := newHarnessSetup(t, s)
	h.start(t)
	return h
}

// methods lists the plugin calls made, in order, of the given methods.
func methods(h *harness, of ...string) []string {
	var out []string
	for _, r := range h.plugin.Requests() {
		if slices.Contains(of, r.Method) {
			out = append(out, r.Method)
		}
	}
	return out
}

// A pod's disk is attached to its instance before the agent gets the pod,
// the agent gets what finds the device, and at the pod's end the disk is
// detached before the instance is terminated, so that the next pod can
// have it.
func TestPodDiskAttachedThenDetachedBeforeTerminate(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateVolume(pluginfake.DefaultZone)
	pvc, pv := claimFor("data-web-0", handle, pluginfake.DefaultZone)
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store), pluginfake.WithAttachDelay(50 * time.Millisecond)}}, pvc, pv)
	pod := podWithClaim("web-0", "uid-disk", "data-web-0")
	h.create(t, pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	insts := store.Instances()
	if len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
	atts := store.VolumeAttachments()
	if len(atts) != 1 || atts[0].InstanceID != insts[0].ID || atts[0].VolumeHandle != handle || atts[0].State != pluginapi.AttachmentAttached {
		t.Fatalf("attachments = %+v, want %s attached to %s", atts, handle, insts[0].ID)
	}
	h.agent.mu.Lock()
	got := h.agent.disks["data"]
	h.agent.mu.Unlock()
	if want := strings.ReplaceAll(handle, "-", ""); got.Serial != want || got.FSType != "ext4" || got.ReadOnly || got.Block {
		t.Errorf("the agent got disk %+v, want serial %s, ext4, read-write", got, want)
	}
	name := volumes.UniqueName(pluginfake.VolumeDriver, handle)
	if attached, inUse := h.m.Volumes(); len(attached) != 1 || attached[0].Name != name || attached[0].DevicePath != got.Serial ||
		!slices.Equal(inUse, []corev1.UniqueVolumeName{name}) {
		t.Errorf("the node's volumes: attached %+v, in use %v; want %s", attached, inUse, name)
	}
	if ev := h.events(); !strings.Contains(ev, `Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "pv-data-web-0"`) {
		t.Errorf("events lack the attachment:\n%s", ev)
	}

	grace := int64(0)
	pod.DeletionGracePeriodSeconds = &grace
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the instance terminated", func() bool { return len(store.Instances()) == 0 })
	if atts := store.VolumeAttachments(); len(atts) != 0 {
		t.Errorf("attachments after the pod's end = %+v, want none", atts)
	}
	if attached, inUse := h.m.Volumes(); len(attached)+len(inUse) != 0 {
		t.Errorf("the node's volumes after the pod's end: %+v, %v", attached, inUse)
	}
	// Deleted at once (grace 0), the pod was still stopped on its agent,
	// which unmounts its disks, for them to detach.
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	if h.agent.deleted != 1 || len(h.agent.graces) != 1 || h.agent.graces[0] != 0 {
		t.Errorf("agent DeletePod calls %d with graces %v, want one with grace 0", h.agent.deleted, h.agent.graces)
	}
	calls := methods(h, "AttachVolume", "DetachVolume", "Terminate")
	if len(calls) < 3 || calls[0] != "AttachVolume" || !slices.Contains(calls, "DetachVolume") ||
		slices.Index(calls, "DetachVolume") > slices.Index(calls, "Terminate") {
		t.Errorf("plugin calls = %v, want the attach, then the detach before the terminate", calls)
	}
}

// A pod without disk volumes costs no volume call, at its start or its
// end.
func TestPodWithoutDisksMakesNoVolumeCall(t *testing.T) {
	h := diskHarness(t, setup{})
	pod := newPod("plain", "uid-plain")
	h.create(t, pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the instance terminated", func() bool { return len(h.plugin.Store().Instances()) == 0 })
	if calls := methods(h, "AttachVolume", "DetachVolume", "DescribeVolumeAttachments"); len(calls) != 0 {
		t.Errorf("volume calls for a pod without disks: %v", calls)
	}
}

// A claim that is not bound keeps the pod Pending, with the reason on the
// pod and an event, and launches nothing; once it is bound the pod runs.
func TestUnboundClaimWaitsWithTheReason(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateVolume(pluginfake.DefaultZone)
	pvc, pv := claimFor("data", handle, "")
	pvc.Spec.VolumeName, pvc.Status.Phase = "", corev1.ClaimPending
	client := fake.NewClientset(pvc, pv)
	h := newHarnessSetup(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)},
		config: func(c *Config) { c.RematchInterval = 50 * time.Millisecond },
		opts:   []Option{WithVolumes(volumes.NewSource(client))}})
	h.start(t)
	h.create(t, podWithClaim("web", "uid-unbound", "data"))
	p := h.waitNotified(t, "the reason", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonFailedAttachVolume })
	if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, "data") {
		t.Errorf("status = %s %q, want Pending naming the claim", p.Status.Phase, p.Status.Message)
	}
	eventually(t, "the event", func() bool { return strings.Contains(h.events(), "Warning FailedAttachVolume ") })
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times for a pod whose claim is not bound", n)
	}
	pvc.Spec.VolumeName, pvc.Status.Phase = pv.Name, corev1.ClaimBound
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Update(t.Context(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// A disk's zone is a constraint of the placement: the cell is launched
// in it, and a pod whose disk lies where nothing is offered stays
// Pending with the PV named.
func TestDiskZoneConstrainsPlacement(t *testing.T) {
	types := pluginfake.DefaultInstanceTypes()
	for i := range types {
		o := types[i].Offerings[0]
		o.Zone = "fake-b"
		types[i].Offerings = append(types[i].Offerings, o)
	}
	store := pluginfake.NewStore()
	inB := store.CreateVolume("fake-b")
	inC := store.CreateVolume("fake-c")
	pvcB, pvB := claimFor("in-b", inB, "fake-b")
	pvcC, pvC := claimFor("in-c", inC, "fake-c")
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store), pluginfake.WithInstanceTypes(types)}}, pvcB, pvB, pvcC, pvC)

	h.create(t, podWithClaim("b", "uid-b", "in-b"))
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if z := running.Annotations[AnnotationPlacedZone]; z != "fake-b" {
		t.Errorf("placed in %q, want fake-b, the disk's zone", z)
	}

	h.create(t, podWithClaim("c", "uid-c", "in-c"))
	p := h.waitNotified(t, "the reason", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonNoInstanceType })
	if !strings.Contains(p.Status.Message, "fake-c") || !strings.Contains(p.Status.Message, "pv-in-c") {
		t.Errorf("message %q, want the zone and the PersistentVolume named", p.Status.Message)
	}
}

// Two pods of one claim: the second waits with the kubelet's Multi-Attach
// message while the first has the disk, and gets it once the first ended.
func TestDiskInUseWaitsForTheOtherCell(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateVolume(pluginfake.DefaultZone)
	pvc, pv := claimFor("shared", handle, "")
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)}}, pvc, pv)
	first := podWithClaim("first", "uid-first", "shared")
	h.create(t, first)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Name == "first" && p.Status.Phase == corev1.PodRunning })

	h.create(t, podWithClaim("second", "uid-second", "shared"))
	h.waitNotified(t, "the Multi-Attach reason", func(p *corev1.Pod) bool {
		return p.Name == "second" && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			strings.Contains(p.Status.ContainerStatuses[0].State.Waiting.Message, "Multi-Attach error for volume \"pv-shared\"")
	})
	if !strings.Contains(h.events(), "Warning FailedAttachVolume Multi-Attach error for volume \"pv-shared\"") {
		t.Error("no Multi-Attach event")
	}
	if err := h.m.DeletePod(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "the second Running", func(p *corev1.Pod) bool { return p.Name == "second" && p.Status.Phase == corev1.PodRunning })
	eventually(t, "the first instance terminated", func() bool { return len(store.Instances()) == 1 })
	atts := store.VolumeAttachments()
	insts := store.Instances()
	if len(atts) != 1 || len(insts) != 1 || atts[0].InstanceID != insts[0].ID || insts[0].CellID != "kip-uid-second" {
		t.Errorf("attachments %+v on instances %+v, want the disk on the second pod's only", atts, insts)
	}
}
