package cells

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// spotTypes is a catalog of two types, each sold spot and on demand.
func spotTypes() []pluginapi.InstanceType {
	offers := func(spot, onDemand float64) []pluginapi.Offering {
		return []pluginapi.Offering{
			{Zone: pluginfake.DefaultZone, CapacityType: pluginapi.CapacitySpot, HourlyPrice: spot, PriceKnown: true, Available: true},
			{Zone: pluginfake.DefaultZone, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: onDemand, PriceKnown: true, Available: true},
		}
	}
	return []pluginapi.InstanceType{
		{Name: "fake.small", MilliCPU: 2000, MemoryBytes: 4 << 30, Arch: pluginapi.ArchAMD64, Offerings: offers(0.02, 0.05)},
		{Name: "fake.medium", MilliCPU: 4000, MemoryBytes: 8 << 30, Arch: pluginapi.ArchAMD64, Offerings: offers(0.04, 0.10)},
	}
}

// launched is each launch as "type/capacity type".
func (h *harness) launched() []string {
	var out []string
	for _, l := range h.launches() {
		out = append(out, l.InstanceType+"/"+string(l.CapacityType))
	}
	return out
}

// The reaction to each kind of launch refusal a quota or the account
// causes (plugins/aws maps EC2's codes to these).
func TestLaunchRefusals(t *testing.T) {
	spotPod := func(p *corev1.Pod) {
		p.Annotations = map[string]string{match.AnnotationCapacityType: "spot", match.AnnotationSpotFallback: "true"}
	}
	tests := []struct {
		name   string
		pod    func(*corev1.Pod)
		fail   []error
		want   []string // the launches, in order, the last one running
		events []string
	}{
		{
			name: "spot quota falls back to on-demand",
			pod:  spotPod,
			fail: []error{pluginapi.NewQuotaExceededFor(nil, pluginapi.CapacitySpot, "MaxSpotInstanceCountExceeded")},
			// fake.medium spot is covered by the quota: skipped.
			want:   []string{"fake.small/spot", "fake.small/on-demand"},
			events: []string{"Warning QuotaExceeded fake.small in fake-a (spot, $0.0200/h): quota exceeded: MaxSpotInstanceCountExceeded; skipping the offerings the quota covers for 3m0s"},
		},
		{
			name: "vCPU quota skips the types it covers with its capacity type",
			pod:  spotPod,
			fail: []error{pluginapi.NewQuotaExceededFor([]string{"fake.small"}, pluginapi.CapacitySpot, "VcpuLimitExceeded")},
			want: []string{"fake.small/spot", "fake.medium/spot"},
		},
		{
			name: "insufficient capacity marks the offering only",
			pod:  spotPod,
			fail: []error{pluginapi.NewInsufficientCapacity("fake.small", pluginfake.DefaultZone, pluginapi.CapacitySpot, "Unsupported")},
			want: []string{"fake.small/spot", "fake.medium/spot"},
		},
		{
			name:   "an unscoped quota is retried after RefusedRetry",
			fail:   []error{pluginapi.NewQuotaExceeded("InstanceLimitExceeded")},
			want:   []string{"fake.small/on-demand", "fake.small/on-demand"},
			events: []string{"Warning LaunchFailed launching cell kip-uid-refusal on fake.small in fake-a (on-demand, $0.0500/h): quota exceeded: InstanceLimitExceeded"},
		},
		{
			name: "a refusal for good backs off, doubling",
			fail: []error{
				pluginapi.NewInvalidConfig("credentials", "AuthFailure.ServiceLinkedRoleCreationNotPermitted"),
				pluginapi.NewInvalidConfig("credentials", "AuthFailure.ServiceLinkedRoleCreationNotPermitted"),
			},
			want: []string{"fake.small/on-demand", "fake.small/on-demand", "fake.small/on-demand"},
			events: []string{
				"ServiceLinkedRoleCreationNotPermitted (refused until the configuration changes; trying again in 50ms or when the pod changes)",
				"ServiceLinkedRoleCreationNotPermitted (refused until the configuration changes; trying again in 100ms or when the pod changes)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessSetup(t, setup{plugin: []pluginfake.Option{
				pluginfake.WithInstanceTypes(spotTypes()),
				pluginfake.WithCapabilities(pluginapi.CapabilitySpot, pluginapi.CapabilityConsoleOutput),
			}})
			h.start(t)
			for _, err := range tt.fail {
				h.plugin.FailNext("Launch", err)
			}
			pod := newPod("refusal", "uid-refusal")
			if tt.pod != nil {
				tt.pod(pod)
			}
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			_ = h.m.CreatePod(t.Context(), pod)
			h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if diff := cmp.Diff(tt.want, h.launched()); diff != "" {
				t.Errorf("launches (-want +got):\n%s", diff)
			}
			ev := h.events()
			for _, want := range tt.events {
				if !strings.Contains(ev, want) {
					t.Errorf("events lack %q:\n%s", want, ev)
				}
			}
		})
	}
}

func TestRefusalWait(t *testing.T) {
	var got []time.Duration
	for n := range 10 {
		got = append(got, refusalWait(30*time.Second, n))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute,
		30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusalWait (-want +got):\n%s", diff)
	}
	if w := refusalWait(30*time.Second, 1000); w != refusedRetryMax {
		t.Errorf("refusalWait(1000) = %s, want %s", w, refusedRetryMax)
	}
}

// A kip killed between a Launch and its answer left an instance the next
// kip did not adopt (the cloud's List had not shown it yet); its placement
// has changed since (another type is cheapest now). The cell takes that
// instance instead of launching a second one elsewhere.
func TestLaunchTakesTheCellsInstanceFromALostAnswer(t *testing.T) {
	h := newHarnessSetup(t, setup{config: func(c *Config) { c.GCInterval = time.Hour }})
	h.start(t)
	earlier := pluginfake.New(pluginfake.WithStore(h.plugin.Store()))
	if _, err := earlier.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
		t.Fatal(err)
	}
	lost, err := earlier.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: "kip-uid-lost", NodeName: "kip", PodUID: "uid-lost",
		InstanceType: "fake.large", CapacityType: pluginapi.CapacityOnDemand})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("lost", "uid-lost")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times, want 0: the cell had an instance", n)
	}
	if got := running.Annotations[AnnotationPlacedType]; got != "fake.large" {
		t.Errorf("placed type = %q, want the instance's fake.large", got)
	}
	var mine []string
	for _, inst := range h.plugin.Store().Instances() {
		if inst.CellID == "kip-uid-lost" {
			mine = append(mine, inst.ID)
		}
	}
	if diff := cmp.Diff([]string{lost.Instance.ID}, mine); diff != "" {
		t.Errorf("instances of the cell (-want +got):\n%s", diff)
	}
}

// A cell that waits long to be launched (a refusal, no capacity) gets a
// fresh join token once half of its lifetime has passed, so that the
// instance it finally launches can still join; before that, every retry
// carries the same bootstrap.
func TestLaunchRenewsAnAgingJoinToken(t *testing.T) {
	tests := []struct {
		name    string
		wait    time.Duration // between the first launch and the retry
		renewed bool
	}{
		{name: "young token kept", wait: 20 * time.Minute},
		{name: "aged token renewed", wait: 31 * time.Minute, renewed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now atomic.Int64
			now.Store(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixNano())
			h := newHarnessSetup(t, setup{config: func(c *Config) {
				c.JoinTokenTTL = time.Hour
				c.RefusedRetry = 300 * time.Millisecond
				c.Now = func() time.Time { return time.Unix(0, now.Load()) }
			}})
			h.start(t)
			h.plugin.FailNext("Launch", pluginapi.NewInvalidConfig("credentials", "AuthFailure.ServiceLinkedRoleCreationNotPermitted"))
			pod := newPod("aging", "uid-aging")
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			_ = h.m.CreatePod(t.Context(), pod)
			// The first launch is refused; the clock moves while the cell
			// waits to try again.
			for len(h.launches()) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			now.Add(int64(tt.wait))
			h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			l := h.launches()
			if len(l) != 2 {
				t.Fatalf("%d launches, want 2", len(l))
			}
			token := func(req *pluginapi.LaunchRequest) string {
				var b cellapi.Bootstrap
				if err := json.Unmarshal(req.Bootstrap, &b); err != nil || b.JoinToken == "" {
					t.Fatalf("launch bootstrap %q: %v", req.Bootstrap, err)
				}
				return b.JoinToken
			}
			if renewed := token(l[0]) != token(l[1]); renewed != tt.renewed {
				t.Errorf("after %s the retry's token renewed = %v, want %v (%s, %s)", tt.wait, renewed, tt.renewed, token(l[0]), token(l[1]))
			}
		})
	}
}

// A Launch that answers the cell's instance from an earlier launch placed
// otherwise (idempotent on the cell ID) is told apart from the candidate.
func TestEarlierInstance(t *testing.T) {
	cand := match.Candidate{InstanceType: "t3.small", CapacityType: pluginapi.CapacityOnDemand}
	tests := []struct {
		name string
		inst pluginapi.Instance
		want bool
	}{
		{name: "the candidate", inst: pluginapi.Instance{InstanceType: "t3.small", CapacityType: pluginapi.CapacityOnDemand}, want: false},
		{name: "plugin leaves type and capacity out", inst: pluginapi.Instance{}, want: false},
		{name: "another type", inst: pluginapi.Instance{InstanceType: "t3a.nano", CapacityType: pluginapi.CapacityOnDemand}, want: true},
		{name: "another capacity type", inst: pluginapi.Instance{InstanceType: "t3.small", CapacityType: pluginapi.CapacitySpot}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := earlier(tt.inst, cand); got != tt.want {
				t.Errorf("earlier(%+v) = %v, want %v", tt.inst, got, tt.want)
			}
		})
	}
}
