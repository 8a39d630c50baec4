package cells

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// A disk the instance's type cannot take is said on the pod, naming the
// volume, the disk's type and the instance type; the instance is given
// up and the cell launched on the next type, where the pod runs.
func TestDiskOfTheWrongTypePlacesTheCellAgain(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateTypedVolume(pluginfake.DefaultZone, "pd-standard", "fake.small")
	pvc, pv := claimFor("data", handle, pluginfake.DefaultZone)
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)}}, pvc, pv)
	h.create(t, podWithClaim("web", "uid-wrong-type", "data"))
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	if typ := running.Annotations[AnnotationPlacedType]; typ != "fake.medium" {
		t.Errorf("placed on %q, want fake.medium, the next type after the refusing fake.small", typ)
	}
	want := `Warning FailedAttachVolume AttachVolume.Attach failed for volume "pv-data" : instance type fake.small cannot take disk type pd-standard`
	if ev := h.events(); !strings.Contains(ev, want) || !strings.Contains(ev, "launching the pod's cell on another instance type") {
		t.Errorf("events lack\n  %s …; launching the pod's cell on another instance type\ngot:\n%s", want, ev)
	}
	insts := store.Instances()
	if len(insts) != 1 || insts[0].InstanceType != "fake.medium" {
		t.Errorf("instances = %+v, want the fake.medium one only (the fake.small terminated)", insts)
	}
	launched := func(typ string) int {
		n := 0
		for _, r := range h.plugin.Requests() {
			if l, ok := r.Request.(*pluginapi.LaunchRequest); ok && l.InstanceType == typ {
				n++
			}
		}
		return n
	}
	if n, m := launched("fake.small"), launched("fake.medium"); n != 1 || m != 1 {
		t.Errorf("launches of fake.small %d, fake.medium %d; want one each: the refused type is not tried again", n, m)
	}
	calls := methods(h, "AttachVolume", "Terminate", "Launch")
	if i := slices.Index(calls, "Terminate"); i < 0 || !slices.Contains(calls[i:], "Launch") {
		t.Errorf("plugin calls = %v, want the refused instance terminated before the next launch", calls)
	}
}

// A pod whose disk every fitting type refuses stays Pending with
// NoInstanceType naming each refusal.
func TestDiskEveryTypeRefusesLeavesThePodPending(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateTypedVolume(pluginfake.DefaultZone, "Premium_LRS", "fake.small", "fake.medium", "fake.large")
	pvc, pv := claimFor("data", handle, pluginfake.DefaultZone)
	h := diskHarness(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)}}, pvc, pv)
	h.create(t, podWithClaim("web", "uid-no-type", "data"))
	p := h.waitNotified(t, "NoInstanceType", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonNoInstanceType })
	for _, typ := range []string{"fake.small", "fake.medium", "fake.large"} {
		if want := "instance type " + typ + " cannot take disk type Premium_LRS"; !strings.Contains(p.Status.Message, want) {
			t.Errorf("status message %q lacks %q", p.Status.Message, want)
		}
	}
	eventually(t, "every instance terminated", func() bool { return len(store.Instances()) == 0 })
	if n := h.plugin.Calls("Launch"); n != 3 {
		t.Errorf("%d launches, want 3: one a type, each refused once", n)
	}
}

// A cell given up for its disk's type booted: it does not count among the
// cells that did not, so the pod still gets BootAttempts cells whose
// agents may stay silent.
func TestCellGivenUpForADiskTypeIsNoBootFailure(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateTypedVolume(pluginfake.DefaultZone, "pd-standard", "fake.small")
	pvc, pv := claimFor("data", handle, pluginfake.DefaultZone)
	first := cellIDAttempt("uid-silent-after", 0)
	h := diskHarness(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithStore(store)},
		silent: func(cellID string) bool { return cellID != first },
		config: func(c *Config) {
			c.AgentTimeout = 300 * time.Millisecond
			c.BootRetry = 10 * time.Millisecond
			c.BootAttempts = 2
		},
	}, pvc, pv)
	h.create(t, podWithClaim("web", "uid-silent-after", "data"))
	failed := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if !strings.Contains(failed.Status.Message, "the pod had 2 cells, none of which booted") {
		t.Errorf("status = %s: %s; want 2 cells that did not boot", failed.Status.Reason, failed.Status.Message)
	}
	if n := h.plugin.Calls("Launch"); n != 3 {
		t.Errorf("Launch called %d times, want 3: the cell the disk's type refused, then 2 silent ones", n)
	}
}

// A conflict of a reason this kip does not know is a plain refusal: said
// on the pod and tried again on the same instance, never a reason to
// launch elsewhere.
func TestUnknownConflictReasonIsAPlainRefusal(t *testing.T) {
	store := pluginfake.NewStore()
	handle := store.CreateVolume(pluginfake.DefaultZone)
	pvc, pv := claimFor("data", handle, pluginfake.DefaultZone)
	h := diskHarness(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithStore(store)},
		config: func(c *Config) { c.RematchInterval = 50 * time.Millisecond },
	}, pvc, pv)
	h.plugin.FailNext("AttachVolume", pluginapi.NewVolumeConflict("some-later-reason", handle, "", "refused for now"))
	h.create(t, podWithClaim("web", "uid-later-reason", "data"))
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if ev := h.events(); !strings.Contains(ev, `Warning FailedAttachVolume AttachVolume.Attach failed for volume "pv-data"`) ||
		!strings.Contains(ev, "some-later-reason") {
		t.Errorf("events lack the refusal:\n%s", ev)
	}
	if n := h.plugin.Calls("Launch"); n != 1 {
		t.Errorf("Launch called %d times, want 1: an unknown reason places nothing again", n)
	}
}
