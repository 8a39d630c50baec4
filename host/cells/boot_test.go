package cells

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/syncbuf"
)

// bootHarness is a harness whose cells in silent never answer, with a
// short agent deadline and BootAttempts attempts.
func bootHarness(t *testing.T, attempts int, silent func(string) bool) *harness {
	t.Helper()
	return bootHarnessLog(t, attempts, silent, nil)
}

// bootHarnessLog is bootHarness with the Manager's log written to log.
func bootHarnessLog(t *testing.T, attempts int, silent func(string) bool, log *syncbuf.Buffer) *harness {
	t.Helper()
	h := newHarnessSetup(t, setup{
		log:    log,
		silent: silent,
		config: func(c *Config) {
			c.AgentTimeout = 300 * time.Millisecond
			c.BootRetry = 10 * time.Millisecond
			c.BootAttempts = attempts
		},
	})
	h.start(t)
	return h
}

// consoleOnLaunch sets every instance's console output as it appears.
func consoleOnLaunch(t *testing.T, h *harness, output string) {
	t.Helper()
	go func() {
		seen := map[string]bool{}
		for t.Context().Err() == nil {
			for _, inst := range h.plugin.Store().Instances() {
				if !seen[inst.ID] {
					seen[inst.ID] = true
					_ = h.plugin.Store().SetConsoleOutput(inst.ID, output)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

func TestSilentAgentFailsAPodThatNeverRestarts(t *testing.T) {
	h := bootHarness(t, 3, func(string) bool { return true })
	consoleOnLaunch(t, h, "[   1.0] booting\ncloud-init[42]: Failed to run module scripts-user\n\n")
	pod := newPod("never", "uid-never")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	failed := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if failed.Status.Reason != ReasonCellBootFailed || !strings.Contains(failed.Status.Message, "did not answer within 300ms") {
		t.Errorf("status = %s: %s; want CellBootFailed saying the agent did not answer", failed.Status.Reason, failed.Status.Message)
	}
	eventually(t, "the instance terminated", func() bool {
		insts := h.plugin.Store().Instances()
		return len(insts) == 0 || insts[0].State == pluginapi.StateTerminated
	})
	if n := h.plugin.Calls("Launch"); n != 1 {
		t.Errorf("Launch called %d times, want 1 (restartPolicy Never)", n)
	}
	ev := h.events()
	for _, want := range []string{"Warning CellBootFailed the agent of cell kip-uid-never", "restartPolicy is Never",
		"its console output ends:\n[   1.0] booting\ncloud-init[42]: Failed to run module scripts-user"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q:\n%s", want, ev)
		}
	}
}

func TestSilentAgentRelaunchesUnderTheNextCellID(t *testing.T) {
	// The first cell's agent never answers, the second's does.
	var log syncbuf.Buffer
	h := bootHarnessLog(t, 3, func(id string) bool { return id == "kip-uid-again" }, &log)
	pod := newPod("again", "uid-again")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	var cells []string
	for _, l := range h.launches() {
		cells = append(cells, l.CellID)
	}
	if diff := cmp.Diff([]string{"kip-uid-again", "kip-uid-again-r1"}, cells); diff != "" {
		t.Errorf("launched cells (-want +got):\n%s", diff)
	}
	states := map[string]pluginapi.InstanceState{}
	for _, inst := range h.plugin.Store().Instances() {
		states[inst.CellID] = inst.State
	}
	if states["kip-uid-again"] == pluginapi.StateRunning || states["kip-uid-again-r1"] != pluginapi.StateRunning {
		t.Errorf("instances by cell = %v; want the first ended and the second running", states)
	}
	if ev := h.events(); !strings.Contains(ev, "launching cell kip-uid-again-r1 in 10ms (attempt 2 of 3)") {
		t.Errorf("events lack the relaunch:\n%s", ev)
	}
	// An event about the first cell's instance is not the second's.
	if c := h.m.cells.find("kip-uid-again", ""); c != nil {
		t.Errorf("find(first cell) = %s, want none", c.cellID())
	}
	if c := h.m.cells.find("kip-uid-again-r1", ""); c == nil {
		t.Error("find(second cell) = nil, want the pod's cell")
	}
	// The pod's log lines name the cell they are about, once: the first
	// cell until it is given up, the second from its launch on (they named
	// the first cell's ID for ever, and the agent's silence twice).
	var sawSecond bool
	for _, line := range podLogLines(t, log.String(), "default/again") {
		switch {
		case strings.Contains(line, "cell=kip-uid-again-r1 "):
			sawSecond = true
		case sawSecond:
			t.Errorf("a log line after the relaunch names the first cell: %s", line)
		case strings.Contains(line, "launch issued") && !strings.Contains(line, "cell=kip-uid-again "):
			t.Errorf("the first launch's line names another cell: %s", line)
		}
	}
	if !sawSecond {
		t.Errorf("no log line of the pod names its second cell kip-uid-again-r1:\n%s", log.String())
	}
}

// podLogLines are the lines of log about pod (namespace/name); each must
// name one cell.
func podLogLines(t *testing.T, log, pod string) []string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "pod="+pod) {
			continue
		}
		if n := strings.Count(line, " cell="); n != 1 {
			t.Errorf("a log line names %d cells: %s", n, line)
		}
		lines = append(lines, line)
	}
	return lines
}

func TestSilentAgentsFailThePodAfterTheLastAttempt(t *testing.T) {
	h := bootHarness(t, 2, func(string) bool { return true })
	pod := newPod("hopeless", "uid-hopeless")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), pod)
	failed := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if failed.Status.Reason != ReasonCellBootFailed || !strings.Contains(failed.Status.Message, "the pod had 2 cells, none of which booted") {
		t.Errorf("status = %s: %s", failed.Status.Reason, failed.Status.Message)
	}
	eventually(t, "every instance ended", func() bool {
		for _, inst := range h.plugin.Store().Instances() {
			if inst.State != pluginapi.StateTerminated {
				return false
			}
		}
		return true
	})
	if n := h.plugin.Calls("Launch"); n != 2 {
		t.Errorf("Launch called %d times, want 2", n)
	}
}

func TestAdoptionTakesThePodsNewestCell(t *testing.T) {
	store := pluginfake.NewStore()
	earlier := pluginfake.New(pluginfake.WithStore(store))
	if _, err := earlier.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, cell := range []string{"kip-uid-adopt", "kip-uid-adopt-r1"} {
		resp, err := earlier.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: cell, NodeName: "kip", PodUID: "uid-adopt",
			InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Instance.ID)
	}
	h := newHarnessSetup(t, setup{plugin: []pluginfake.Option{pluginfake.WithStore(store)}})
	pod := newPod("adopt", "uid-adopt")
	pod.Status.Phase = corev1.PodRunning
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	c := h.m.cells.find("kip-uid-adopt-r1", "")
	if c == nil {
		t.Fatal("the pod's newest cell was not adopted")
	}
	eventually(t, "the older cell's instance ended", func() bool {
		for _, inst := range store.Instances() {
			if inst.ID == ids[0] {
				return inst.State == pluginapi.StateTerminated
			}
		}
		return true
	})
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times after adoption, want 0", n)
	}
}

func TestCellOf(t *testing.T) {
	tests := []struct {
		id      string
		uid     string
		attempt int
		ok      bool
	}{
		{"kip-0f5c3a7e-1b2c-4d5e-8f90-123456789abc", "0f5c3a7e-1b2c-4d5e-8f90-123456789abc", 0, true},
		{"kip-0f5c3a7e-1b2c-4d5e-8f90-123456789abc-r2", "0f5c3a7e-1b2c-4d5e-8f90-123456789abc", 2, true},
		{"kip-uid-1", "uid-1", 0, true},
		{"kip-uid-r", "uid-r", 0, true},
		{"kip-uid-r0", "uid-r0", 0, true},
		{"other-cell", "", 0, false},
		{"kip-", "", 0, false},
	}
	for _, tt := range tests {
		uid, n, ok := cellOf(tt.id)
		if string(uid) != tt.uid || n != tt.attempt || ok != tt.ok {
			t.Errorf("cellOf(%q) = %q, %d, %v; want %q, %d, %v", tt.id, uid, n, ok, tt.uid, tt.attempt, tt.ok)
		}
		if ok && n > 0 && cellIDAttempt(uid, n) != tt.id {
			t.Errorf("cellIDAttempt(%q, %d) = %q, want %q", uid, n, cellIDAttempt(uid, n), tt.id)
		}
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		n     int
		limit int
		want  string
	}{
		{"empty", "", 3, 100, ""},
		{"fewer lines", "a\nb\n", 3, 100, "a\nb"},
		{"last n", "1\n2\n3\n4\n\n\n", 2, 100, "3\n4"},
		{"crlf", "1\r\n2\r\n", 5, 100, "1\n2"},
		{"bytes bound whole lines", "aaaa\nbbbb\ncccc", 3, 9, "bbbb\ncccc"},
		{"one long line", "0123456789", 3, 4, "6789"},
	}
	for _, tt := range tests {
		if got := lastLines(tt.in, tt.n, tt.limit); got != tt.want {
			t.Errorf("%s: lastLines = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A cell adopted after a restart is held to the agent deadline only when
// its pod never started: a silent agent of a pod that ran is not a failed
// boot (no CellBootFailed, no second launch).
func TestAdoptedCellDeadline(t *testing.T) {
	tests := []struct {
		name    string
		started bool
		failed  bool
	}{
		{name: "pod never started", started: false, failed: true},
		{name: "pod started before the restart", started: true, failed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := pluginfake.NewStore()
			earlier := pluginfake.New(pluginfake.WithStore(store))
			if _, err := earlier.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := earlier.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: "kip-uid-adopted", NodeName: "kip", PodUID: "uid-adopted",
				InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand}); err != nil {
				t.Fatal(err)
			}
			h := newHarnessSetup(t, setup{
				plugin: []pluginfake.Option{pluginfake.WithStore(store)},
				silent: func(string) bool { return true },
				config: func(c *Config) {
					c.AgentTimeout = 200 * time.Millisecond
					c.BootRetry = 10 * time.Millisecond
				},
			})
			pod := newPod("adopted", "uid-adopted")
			pod.Status.Phase = corev1.PodPending
			if tt.started {
				pod.Status.Phase = corev1.PodRunning
				start := metav1.NewTime(time.Now().Add(-time.Hour))
				pod.Status.StartTime = &start
			}
			if err := h.indexer.Add(pod); err != nil {
				t.Fatal(err)
			}
			h.start(t)
			if tt.failed {
				eventually(t, "a CellBootFailed event", func() bool { return strings.Contains(h.events(), ReasonCellBootFailed) })
				return
			}
			// Well past the deadline: nothing ended the cell.
			time.Sleep(1 * time.Second)
			if ev := h.events(); strings.Contains(ev, ReasonCellBootFailed) {
				t.Errorf("a started pod's silent adopted cell was taken for a failed boot:\n%s", ev)
			}
			if n := h.plugin.Calls("Launch"); n != 0 {
				t.Errorf("Launch called %d times, want 0", n)
			}
		})
	}
}
