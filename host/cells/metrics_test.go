package cells

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

func TestLaunchPhasesPlacementAndCostAreMeasured(t *testing.T) {
	m := metrics.New()
	h := newHarnessSetup(t, setup{opts: []Option{WithMetrics(m)}})
	h.start(t)
	h.plugin.FailNext("Launch", pluginapi.NewInsufficientCapacity("fake.small", "fake-a", pluginapi.CapacityOnDemand, "no capacity"))
	pod := newPod("web", "uid-m-1")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	const medium = `{capacity_type="on-demand",instance_type="fake.medium",zone="fake-a"}`
	got := samples(t, m)
	for name, want := range map[string]float64{
		`kip_launch_phase_seconds_count{phase="bound_to_launch"}`:      1,
		`kip_launch_phase_seconds_count{phase="launch_to_running"}`:    1,
		`kip_launch_phase_seconds_count{phase="running_to_agent"}`:     1,
		`kip_launch_phase_seconds_count{phase="agent_to_pod_running"}`: 1,
		`kip_launch_phase_seconds_count{phase="bound_to_pod_running"}`: 1,
		`kip_capacity_fallbacks_total{reason="insufficient_capacity"}`: 1,
		`kip_match_decisions_total{outcome="placed"}`:                  1,
		`kip_hourly_cost` + medium:                                     0.1,
		`kip_instances` + medium:                                       1,
		`kip_cells{phase="Running"}`:                                   1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	// Bound a minute ago, from the PodScheduled condition: the whole way
	// took at least that.
	if sum := got[`kip_launch_phase_seconds_sum{phase="bound_to_pod_running"}`]; sum < 60 {
		t.Errorf("bound_to_pod_running = %vs, want at least 60 s from the PodScheduled condition", sum)
	}
	cells := h.m.Cells()
	if len(cells) != 1 {
		t.Fatalf("Cells() = %+v, want one cell", cells)
	}
	c := cells[0]
	if c.Instance == "" || c.HourlyPrice == nil || *c.HourlyPrice != 0.1 || c.Created.IsZero() {
		t.Errorf("cell = %+v, want its instance, price 0.1 and creation time", c)
	}
	c.Instance, c.HourlyPrice, c.Created = "", nil, time.Time{}
	want := metrics.Cell{Namespace: "default", Pod: "web", PodUID: "uid-m-1", CellID: CellID("uid-m-1"),
		InstanceType: "fake.medium", Zone: "fake-a", CapacityType: "on-demand", Phase: metrics.CellRunning}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("cell (-want +got):\n%s", diff)
	}

	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the instance's cost to end", func() bool {
		s := samples(t, m)
		return s[`kip_instances`+medium] == 0 && s[`kip_hourly_cost`+medium] == 0
	})
}

func TestAdoptedCellIsNotMeasuredButCosts(t *testing.T) {
	m := metrics.New()
	h := newHarnessSetup(t, setup{opts: []Option{WithMetrics(m)}})
	pod := newPod("old", "uid-m-2")
	pod.Annotations = map[string]string{AnnotationPlacedType: "fake.small", AnnotationPlacedZone: "fake-a",
		AnnotationPlacedCapacityType: "on-demand", AnnotationPlacedPrice: "0.05"}
	resp, err := h.plugin.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: CellID(pod.UID), PodUID: string(pod.UID),
		InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand, NodeName: "kip"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	eventually(t, "the adopted cell to run", func() bool {
		cells := h.m.Cells()
		return len(cells) == 1 && cells[0].Phase == metrics.CellRunning
	})
	got := samples(t, m)
	if n := got[`kip_launch_phase_seconds_count{phase="bound_to_launch"}`]; n != 0 {
		t.Errorf("an adopted cell's launch was measured (%v)", n)
	}
	if cost := got[`kip_hourly_cost{capacity_type="on-demand",instance_type="fake.small",zone="fake-a"}`]; cost != 0.05 {
		t.Errorf("hourly cost of the adopted instance %s = %v, want 0.05 from its pod's annotation", resp.Instance.ID, cost)
	}
}

func samples(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	got, err := metrics.Samples(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPendingReason(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	tests := []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"the pod's reason first", corev1.PodStatus{Phase: corev1.PodPending, Reason: ReasonNoInstanceType, ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating")}}, ReasonNoInstanceType},
		{"an init container's reason before the containers'", corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull")}, ContainerStatuses: []corev1.ContainerStatus{waiting("PodInitializing")}}, "ErrImagePull"},
		{"a container's reason", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{}, waiting("ContainerCreating")}}, "ContainerCreating"},
		{"no reason said", corev1.PodStatus{Phase: corev1.PodPending}, "Unknown"},
		{"not pending", corev1.PodStatus{Phase: corev1.PodRunning, Reason: "x"}, ""},
	}
	for _, tt := range tests {
		if got := pendingReason(&tt.st); got != tt.want {
			t.Errorf("%s: pendingReason = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPlacementOfAnnotations(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want metrics.Placement
	}{
		{"placed at a known price", placedAnnotations(match.Candidate{InstanceType: "m5.large", CapacityType: pluginapi.CapacitySpot, HourlyPrice: 0.031, PriceKnown: true}, "us-east-1a"),
			metrics.Placement{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", HourlyPrice: 0.031, PriceKnown: true}},
		{"unknown price", placedAnnotations(match.Candidate{InstanceType: "x", CapacityType: pluginapi.CapacityOnDemand}, ""),
			metrics.Placement{InstanceType: "x", CapacityType: "on-demand"}},
		{"not placed", nil, metrics.Placement{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, placementOf(tt.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestCellPhasesThroughALife: the phase /cells and kip_cells report for a
// cell at each step of its life: Pending while nothing fits, Booting,
// Running, Gone once its pod ended and its instance was terminated; a
// rejected pod's cell is Gone from the start.
func TestCellPhasesThroughALife(t *testing.T) {
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithBootDelay(time.Hour)},
		config: func(c *Config) { c.BootPoll, c.BootPollWatched = 10*time.Millisecond, 10*time.Millisecond },
	})
	h.start(t)
	phaseOf := func(uid string) string {
		for _, c := range h.m.Cells() {
			if c.PodUID == uid {
				return c.Phase
			}
		}
		return ""
	}
	waitPhase := func(uid, want string) {
		t.Helper()
		eventually(t, uid+" "+want, func() bool { return phaseOf(uid) == want })
	}

	nothing := newPod("huge", "uid-huge")
	nothing.Annotations = map[string]string{match.AnnotationInstanceType: "no.such.type"}
	h.create(t, nothing)
	h.waitNotified(t, "NoInstanceType", func(p *corev1.Pod) bool { return p.Status.Reason == ReasonNoInstanceType })
	if got := phaseOf("uid-huge"); got != metrics.CellPending {
		t.Errorf("a pod nothing fits: phase %s, want %s", got, metrics.CellPending)
	}

	h.create(t, newPod("web", "uid-web"))
	waitPhase("uid-web", metrics.CellBooting)
	insts := h.plugin.Store().Instances()
	if len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
	if err := h.plugin.Store().SetState(insts[0].ID, pluginapi.StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	waitPhase("uid-web", metrics.CellRunning)
	h.agent.phases <- corev1.PodSucceeded
	waitPhase("uid-web", metrics.CellGone)

	priv := newPod("priv", "uid-priv")
	priv.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	h.create(t, priv)
	waitPhase("uid-priv", metrics.CellGone)
}

// TestCellPhaseWhileItsNextCellWaits: a pod whose cell's agent never
// answered waits BootRetry for its next cell as Launching; one whose cell
// was adopted after a restart (this kip launched none) as Pending.
func TestCellPhaseWhileItsNextCellWaits(t *testing.T) {
	h := newHarnessSetup(t, setup{
		silent: func(id string) bool { return id == CellID("uid-new") || id == CellID("uid-old") },
		config: func(c *Config) {
			c.AgentTimeout = 200 * time.Millisecond
			c.BootRetry = time.Hour
		},
	})
	old := newPod("old", "uid-old")
	if _, err := h.plugin.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: CellID(old.UID), PodUID: string(old.UID),
		InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand, NodeName: "kip"}); err != nil {
		t.Fatal(err)
	}
	if err := h.indexer.Add(old); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	h.create(t, newPod("new", "uid-new"))
	for uid, want := range map[string]string{"uid-new": metrics.CellLaunching, "uid-old": metrics.CellPending} {
		eventually(t, uid+" waiting for its next cell as "+want, func() bool {
			for _, c := range h.m.Cells() {
				if c.PodUID == uid {
					return c.Phase == want && c.CellID == cellIDAttempt(types.UID(uid), 1)
				}
			}
			return false
		})
	}
}
