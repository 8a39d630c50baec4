package cells

import (
	"crypto/tls"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/setting"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/syncbuf"
)

func TestWarmPoolConfigValidate(t *testing.T) {
	good := WarmPool{Name: "small", InstanceType: "fake.small", Count: 2}
	tests := []struct {
		name string
		cfg  WarmPoolConfig
		want []string
	}{
		{"none", WarmPoolConfig{}, nil},
		{"an instance type", WarmPoolConfig{Pools: []WarmPool{good}}, nil},
		{"a size", WarmPoolConfig{MaxPremium: 0.5, Pools: []WarmPool{{Name: "s", Size: WarmPoolSize{CPU: "500m", Memory: "1Gi"}, Count: 1,
			CapacityType: pluginapi.CapacitySpot, MaxAge: time.Minute, MaxPricePerHour: 0.1}}}, nil},
		{"negative premium", WarmPoolConfig{MaxPremium: -0.1}, []string{"warmPool.maxPremium"}},
		{"no name", WarmPoolConfig{Pools: []WarmPool{{InstanceType: "t", Count: 1}}}, []string{"warmPool.pools[0].name"}},
		{"a name not a DNS label", WarmPoolConfig{Pools: []WarmPool{{Name: "Small_1", InstanceType: "t"}}}, []string{"warmPool.pools[0].name"}},
		{"a name twice", WarmPoolConfig{Pools: []WarmPool{good, good}}, []string{"warmPool.pools[1].name"}},
		{"neither type nor size", WarmPoolConfig{Pools: []WarmPool{{Name: "a"}}}, []string{"warmPool.pools[0].instanceType"}},
		{"type and size", WarmPoolConfig{Pools: []WarmPool{{Name: "a", InstanceType: "t", Size: WarmPoolSize{CPU: "1", Memory: "1Gi"}}}},
			[]string{"warmPool.pools[0].size"}},
		{"a bad size", WarmPoolConfig{Pools: []WarmPool{{Name: "a", Size: WarmPoolSize{CPU: "lots", Memory: "-1Gi"}}}},
			[]string{"warmPool.pools[0].size.cpu", "warmPool.pools[0].size.memory"}},
		{"a bad capacity type", WarmPoolConfig{Pools: []WarmPool{{Name: "a", InstanceType: "t", CapacityType: "reserved"}}},
			[]string{"warmPool.pools[0].capacityType"}},
		{"negative count, age and price", WarmPoolConfig{Pools: []WarmPool{{Name: "a", InstanceType: "t", Count: -1, MaxAge: -time.Second, MaxPricePerHour: -1}}},
			[]string{"warmPool.pools[0].count", "warmPool.pools[0].maxAge", "warmPool.pools[0].maxPricePerHour"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.WarmPool = tt.cfg
			if got := setting.Keys(cfg.Validate()); !slices.Equal(got, tt.want) {
				t.Errorf("Validate keys = %q, want %q (%v)", got, tt.want, cfg.Validate())
			}
		})
	}
	// The defaults: on-demand, an hour.
	cfg := Config{WarmPool: WarmPoolConfig{Pools: []WarmPool{good}}}
	pools := cfg.WarmPool.Pools
	cfg.defaults()
	if p := cfg.WarmPool.Pools[0]; p.CapacityType != pluginapi.CapacityOnDemand || p.MaxAge != time.Hour {
		t.Errorf("defaults = %s, %s; want on-demand, 1h", p.CapacityType, p.MaxAge)
	}
	if pools[0].MaxAge != 0 {
		t.Error("defaults changed the caller's pools")
	}
}

// TestWarmTake: which ready standby a pod is given, if any.
func TestWarmTake(t *testing.T) {
	cand := func(typ string, price float64) match.Candidate {
		return match.Candidate{InstanceType: typ, Zone: "z", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: price, PriceKnown: true}
	}
	sb := func(id, typ string, ready bool, age time.Duration) *standby {
		return &standby{pool: "p", cellID: id, ready: ready, created: time.Unix(1000, 0).Add(-age),
			inst: &pluginapi.Instance{ID: "i-" + id, InstanceType: typ, Zone: "z", CapacityType: pluginapi.CapacityOnDemand}}
	}
	small, medium, large := cand("small", 0.05), cand("medium", 0.10), cand("large", 0.40)
	unlimited := small
	unlimited.UnlimitedCredits = true
	spot := small
	spot.CapacityType = pluginapi.CapacitySpot
	tests := []struct {
		name     string
		premium  float64
		cands    []match.Candidate
		standbys []*standby
		want     string // the cell ID taken, or ""
	}{
		{"the best candidate's type", 0, []match.Candidate{small, medium}, []*standby{sb("a", "small", true, 0)}, "a"},
		{"not ready", 0, []match.Candidate{small}, []*standby{sb("a", "small", false, 0)}, ""},
		{"dearer, no premium", 0, []match.Candidate{small, medium}, []*standby{sb("a", "medium", true, 0)}, ""},
		{"dearer within the premium", 1, []match.Candidate{small, medium}, []*standby{sb("a", "medium", true, 0)}, "a"},
		{"dearer beyond the premium", 1, []match.Candidate{small, large}, []*standby{sb("a", "large", true, 0)}, ""},
		{"not a candidate", 10, []match.Candidate{medium}, []*standby{sb("a", "small", true, 0)}, ""},
		{"another capacity type", 0, []match.Candidate{spot}, []*standby{sb("a", "small", true, 0)}, ""},
		{"a candidate needing unlimited credits", 0, []match.Candidate{unlimited}, []*standby{sb("a", "small", true, 0)}, ""},
		{"the cheapest of two", 10, []match.Candidate{small, medium}, []*standby{sb("a", "medium", true, 0), sb("b", "small", true, 0)}, "b"},
		{"the oldest of the same price", 0, []match.Candidate{small}, []*standby{sb("a", "small", true, time.Minute), sb("b", "small", true, time.Hour)}, "b"},
		{"unknown prices: the best candidate only", 10,
			[]match.Candidate{{InstanceType: "small", Zone: "z", CapacityType: pluginapi.CapacityOnDemand}, {InstanceType: "medium", Zone: "z", CapacityType: pluginapi.CapacityOnDemand}},
			[]*standby{sb("a", "medium", true, 0)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &warmPool{d: &cellDeps{log: slog.New(slog.DiscardHandler)}, maxPremium: tt.premium, standbys: map[string]*standby{},
				wake: make(chan struct{}, 1), pools: []*poolState{{cfg: WarmPool{Name: "p", Count: 5}}}}
			for _, s := range tt.standbys {
				w.standbys[s.cellID] = s
			}
			var got string
			ok := w.take(tt.cands, func(s *standby, _ match.Candidate) { got = s.cellID })
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("take = %q, %v; want %q", got, ok, tt.want)
			}
			if _, still := w.standbys[got]; ok && still {
				t.Error("the standby taken is still in the pool")
			}
		})
	}
}

// warmHarness is a harness with a warm pool of fake.small cells.
func warmHarness(t *testing.T, pools []WarmPool, seed func(*harness)) *harness {
	t.Helper()
	h := newHarnessSetup(t, setup{config: func(c *Config) {
		c.WarmPool = WarmPoolConfig{Pools: pools}
		c.WarmInterval = 20 * time.Millisecond
	}})
	if seed != nil {
		seed(h)
	}
	h.start(t)
	return h
}

// warmLaunches are the cell IDs of the plugin's Launch calls for
// standby cells, and the others'.
func (h *harness) warmLaunches() (standbys, pods []string) {
	for _, r := range h.plugin.Requests() {
		if r.Method != "Launch" {
			continue
		}
		id := r.Request.(*pluginapi.LaunchRequest).CellID
		if isWarmCellID(id) {
			standbys = append(standbys, id)
		} else {
			pods = append(pods, id)
		}
	}
	return standbys, pods
}

// ready is how many standbys pool name has ready, and in all.
func (h *harness) warmCount(name string) (ready, all int) {
	n := h.m.deps.warm.counts()[name]
	return n[1], n[0] + n[1]
}

func TestWarmPoolGivesAPodAStandbyAndRefills(t *testing.T) {
	h := warmHarness(t, []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 2, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}}, nil)
	eventually(t, "two standbys ready", func() bool { r, _ := h.warmCount("small"); return r == 2 })
	// Never more than the count: the pool keeps launching nothing.
	time.Sleep(100 * time.Millisecond)
	if sb, _ := h.warmLaunches(); len(sb) != 2 {
		t.Fatalf("standby launches = %v, want 2", sb)
	}
	standbys := map[string]string{} // instance ID → cell ID
	for _, inst := range h.plugin.Store().Instances() {
		if inst.Tags[TagWarmPool] != "small" || inst.Tags[pluginapi.TagPodUID] != "" {
			t.Fatalf("standby instance %s has tags %v, want the pool's and no pod", inst.ID, inst.Tags)
		}
		standbys[inst.ID] = inst.CellID
	}

	pod := newPod("web", "uid-1")
	pod.Annotations = map[string]string{match.AnnotationInstanceType: "fake.small"}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	running := h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	c := h.m.cells.get("uid-1")
	cellID, ok := standbys[c.instanceID()]
	if !ok || c.cellID() != cellID {
		t.Fatalf("the pod's cell is %s on %s, want one of the standbys %v", c.cellID(), c.instanceID(), standbys)
	}
	if _, pods := h.warmLaunches(); len(pods) != 0 {
		t.Errorf("launches for pods = %v, want none", pods)
	}
	if got := running.Annotations[AnnotationPlacedType]; got != "fake.small" || running.Annotations[AnnotationPlacedPrice] != "0.05" {
		t.Errorf("placement annotations = %v, want fake.small at 0.05", running.Annotations)
	}
	if ev := h.events(); !strings.Contains(ev, "Normal "+ReasonAssignedWarmCell+" assigned warm cell "+cellID+" of pool small on fake.small in fake-a") ||
		!strings.Contains(ev, c.instanceID()) {
		t.Errorf("events lack the assignment:\n%s", ev)
	}
	// The pool refills to two, never more.
	eventually(t, "the pool refilled", func() bool { r, _ := h.warmCount("small"); return r == 2 })
	time.Sleep(100 * time.Millisecond)
	if sb, _ := h.warmLaunches(); len(sb) != 3 {
		t.Errorf("standby launches = %v, want 3", sb)
	}
	if _, all := h.warmCount("small"); all != 2 {
		t.Errorf("standbys = %d, want 2", all)
	}

	// A pod that no standby fits launches its own cell.
	big := newPod("big", "uid-2")
	big.Annotations = map[string]string{match.AnnotationInstanceType: "fake.large"}
	if err := h.indexer.Add(big); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the big pod's launch", func() bool { _, pods := h.warmLaunches(); return slices.Equal(pods, []string{"kip-uid-2"}) })

	// The pod's end terminates its cell like any other; the standbys stay.
	grace := int64(1)
	pod.DeletionGracePeriodSeconds = &grace
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's cell terminated", func() bool {
		for _, inst := range h.plugin.Store().Instances() {
			if inst.CellID == cellID {
				return false
			}
		}
		return true
	})
	if r, _ := h.warmCount("small"); r != 2 {
		t.Errorf("ready standbys after the pod ended = %d, want 2", r)
	}
}

func TestWarmPoolReplacesAgedStandbys(t *testing.T) {
	h := warmHarness(t, []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand,
		MaxAge: 150 * time.Millisecond}}, nil)
	eventually(t, "an aged standby replaced", func() bool {
		sb, _ := h.warmLaunches()
		return len(sb) >= 2 && h.plugin.Calls("Terminate") >= 1
	})
	if _, all := h.warmCount("small"); all > 1 {
		t.Errorf("standbys = %d, want at most 1", all)
	}
}

func TestWarmPoolAboveItsPriceCeilingLaunchesNothing(t *testing.T) {
	h := warmHarness(t, []WarmPool{
		{Name: "dear", InstanceType: "fake.large", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour, MaxPricePerHour: 0.1},
		{Name: "sized", Size: WarmPoolSize{CPU: "1", Memory: "1Gi"}, Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour, MaxPricePerHour: 0.1},
	}, nil)
	eventually(t, "the sized pool's standby", func() bool { r, _ := h.warmCount("sized"); return r == 1 })
	time.Sleep(100 * time.Millisecond)
	for _, inst := range h.plugin.Store().Instances() {
		if inst.Tags[TagWarmPool] == "dear" || inst.InstanceType != "fake.small" {
			t.Errorf("launched %s (%s, pool %q); want only the sized pool's cheapest fit, fake.small", inst.ID, inst.InstanceType, inst.Tags[TagWarmPool])
		}
	}
}

func TestWarmPoolBacksOffRefusedLaunches(t *testing.T) {
	h := warmHarness(t, []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}},
		func(h *harness) {
			h.plugin.FailNext("Launch", pluginapi.NewInvalidConfig("image", "no such image"))
		})
	// The refusal waits RefusedRetry (50 ms in the harness), then the
	// next launch succeeds.
	eventually(t, "a standby after the refusal", func() bool { r, _ := h.warmCount("small"); return r == 1 })
	if n := h.plugin.Calls("Launch"); n != 2 {
		t.Errorf("Launch calls = %d, want 2", n)
	}
}

// TestWarmAdoption: at start-up, standby instances are asked which pod
// their agent runs.
func TestWarmAdoption(t *testing.T) {
	pools := []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}}
	var (
		agents map[string]*fakeAgent // by cell ID
		ids    map[string]string     // name → cell ID
	)
	h := warmHarness(t, pools, func(h *harness) {
		agents, ids = map[string]*fakeAgent{}, map[string]string{}
		launch := func(name, pool, podUID string) {
			id := newWarmCellID()
			ids[name] = id
			if _, err := h.plugin.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: id, NodeName: "kip", InstanceType: "fake.small",
				Tags: map[string]string{TagWarmPool: pool}}); err != nil {
				t.Fatal(err)
			}
			agents[id] = &fakeAgent{phases: make(chan corev1.PodPhase, 4), uid: podUID}
		}
		launch("given", "small", "uid-1")    // runs a pod still here
		launch("spare", "small", "")         // back to its pool
		launch("extra", "small", "")         // the pool has its one
		launch("orphan", "gone", "")         // its pool is no longer configured
		launch("ended", "small", "uid-gone") // its pod is gone
		pod := newPod("web", "uid-1")
		if err := h.indexer.Add(pod); err != nil {
			t.Fatal(err)
		}
		h.plugin.Reset()
		lis := map[string]func() (*cellclient.Agent, error){}
		var mu sync.Mutex
		for id, a := range agents {
			l := serveAgent(t, a)
			lis[id] = func() (*cellclient.Agent, error) { return dialAgent(id, l) }
		}
		h.m.deps.dial = func(cellID, _ string, _ *tls.Config) (*cellclient.Agent, error) {
			mu.Lock()
			defer mu.Unlock()
			return lis[cellID]()
		}
	})
	c := h.m.cells.get("uid-1")
	if c == nil || c.cellID() != ids["given"] {
		t.Fatalf("the pod's cell = %v, want the standby it was given (%s)", c, ids["given"])
	}
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.UID == "uid-1" && p.Status.Phase == corev1.PodRunning })
	alive := map[string]bool{}
	eventually(t, "the unneeded standbys terminated", func() bool {
		clear(alive)
		for _, inst := range h.plugin.Store().Instances() {
			if inst.State != pluginapi.StateTerminated && inst.State != pluginapi.StateTerminating {
				alive[inst.CellID] = true
			}
		}
		return len(alive) == 2
	})
	// Which of spare and extra went back to the pool is the order of the
	// plugin's list; one did.
	if !alive[ids["given"]] || alive[ids["orphan"]] || alive[ids["ended"]] || alive[ids["spare"]] == alive[ids["extra"]] {
		t.Errorf("alive cells %v; want the given one and one spare (%v)", alive, ids)
	}
	time.Sleep(100 * time.Millisecond)
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch calls after the restart = %d, want 0", n)
	}
	if r, _ := h.warmCount("small"); r != 1 {
		t.Errorf("ready standbys = %d, want 1", r)
	}
	if ev := h.events(); strings.Contains(ev, ReasonLaunching) {
		t.Errorf("the adopted pod was launched again:\n%s", ev)
	}
}

// A booting standby is ready once the plugin's event says its instance
// runs, as a pod's cell is: while the event stream is up it does not wait
// for its own slow look (BootPollWatched, an hour here).
func TestBootingStandbyWakesOnTheRunningEvent(t *testing.T) {
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithBootDelay(200 * time.Millisecond)},
		config: func(c *Config) {
			c.WarmPool = WarmPoolConfig{Pools: []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}}}
			c.WarmInterval = 20 * time.Millisecond
			c.BootPoll, c.BootPollWatched = time.Hour, time.Hour
		},
	})
	h.start(t)
	eventually(t, "a standby ready on the running event", func() bool { r, _ := h.warmCount("small"); return r == 1 })
}

// A booting standby whose instance disappears (the plugin no longer knows
// it) is given up after the looks a pod's cell gives such an instance
// (awaitRunning's vanishLooks), and replaced: not after the whole boot
// timeout (an hour here), which the standby used to wait out.
func TestBootingStandbyWhoseInstanceDisappearsIsReplaced(t *testing.T) {
	h := newHarnessSetup(t, setup{
		plugin: []pluginfake.Option{pluginfake.WithBootDelay(time.Hour)},
		config: func(c *Config) {
			c.WarmPool = WarmPoolConfig{Pools: []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}}}
			c.WarmInterval = 20 * time.Millisecond
			c.BootTimeout = time.Hour
			c.BootPoll, c.BootPollWatched = 10*time.Millisecond, 10*time.Millisecond
		},
	})
	h.start(t)
	eventually(t, "a standby launched", func() bool { sb, _ := h.warmLaunches(); return len(sb) == 1 })
	first, _ := h.warmLaunches()
	var gone string
	for _, inst := range h.plugin.Store().Instances() {
		if inst.CellID == first[0] {
			gone = inst.ID
		}
	}
	if gone == "" {
		t.Fatalf("no instance of standby %s", first[0])
	}
	// Terminated behind kip's back: the fake forgets the instance at once
	// (Describe no longer answers it), as a cloud does after a while.
	if _, err := h.plugin.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: gone}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the standby replaced", func() bool {
		sb, _ := h.warmLaunches()
		return len(sb) == 2
	})
	if sb, _ := h.warmLaunches(); sb[1] == first[0] {
		t.Errorf("the replacement has the lost standby's cell ID %s", sb[1])
	}
	eventually(t, "the lost standby dropped from the pool", func() bool {
		h.m.deps.warm.mu.Lock()
		defer h.m.deps.warm.mu.Unlock()
		_, still := h.m.deps.warm.standbys[first[0]]
		return !still
	})
	if _, all := h.warmCount("small"); all != 1 {
		t.Errorf("standbys = %d, want 1 (the replacement, booting)", all)
	}
}

// A pod given a standby takes its cell ID, and its log lines name that
// ID from then on, once (they named the pod's own cell ID, which no
// instance has, for good).
func TestAssignedStandbyNamesItsCellInTheLog(t *testing.T) {
	var log syncbuf.Buffer
	h := newHarnessSetup(t, setup{log: &log, config: func(c *Config) {
		c.WarmPool = WarmPoolConfig{Pools: []WarmPool{{Name: "small", InstanceType: "fake.small", Count: 1, CapacityType: pluginapi.CapacityOnDemand, MaxAge: time.Hour}}}
		c.WarmInterval = 20 * time.Millisecond
	}})
	h.start(t)
	eventually(t, "a standby ready", func() bool { r, _ := h.warmCount("small"); return r == 1 })
	pod := newPod("web", "uid-1")
	pod.Annotations = map[string]string{match.AnnotationInstanceType: "fake.small"}
	h.create(t, pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	id := h.m.cells.get("uid-1").cellID()
	if !isWarmCellID(id) {
		t.Fatalf("the pod's cell is %s, want a standby's", id)
	}
	var assigned bool
	for _, line := range podLogLines(t, log.String(), "default/web") {
		if strings.Contains(line, "assigned a standby cell") {
			assigned = true
		}
		if assigned && !strings.Contains(line, "cell="+id+" ") && !strings.HasSuffix(line, "cell="+id) {
			t.Errorf("a log line from the assignment on names another cell than %s: %s", id, line)
		}
	}
	if !assigned {
		t.Errorf("no log line of the assignment:\n%s", log.String())
	}
}
