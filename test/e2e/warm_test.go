//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/test/e2e/framework"
)

// warmNode is the kip node TestWarmPool runs, beside the shared one, with
// a warm pool of its own.
const warmNode = "kip-warm"

// TestWarmPool: a kip with a pool of two standby cells (local.nano, or
// f1-micro in the gce pass: the type a pod that asks for nothing is
// matched to) gives each pod that fits a standby rather than
// a launch of its own (an AssignedWarmCell event naming a standby, the
// pod's cell that standby), refills the pool to two and never more,
// adopts its standbys and the pods' cells after a kill and restart (the
// same cells, no launch), and launches a cell for a pod no standby fits.
// It logs how long each pod on a standby took from its creation to
// Running (the goal: a median within a second of its binding).
func TestWarmPool(t *testing.T) {
	framework.AlsoIn(t, framework.PluginGCE, "standbys launched without a pod, and adopted after a restart, through the gce plugin")
	// The type a pod that asks for nothing gets (TestPodsAreRightSized).
	// The test finds the cells by their directories in the state
	// directory: the local plugin's, or the simulator's, whose instances
	// are named after their cells in the gce pass.
	standby, ok := map[string]string{framework.PluginLocal: "local.nano", framework.PluginGCE: "f1-micro"}[kip.Plugin]
	if !ok {
		t.Skipf("runs with the local and gce plugins: the %s simulator names its instances otherwise than their cells", kip.Plugin)
	}
	wk := startSideKip(t, framework.KipOptions{
		NodeName: warmNode, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-warm", Network: 4,
		WarmPool: "pools:\n  - name: small\n    instanceType: " + standby + "\n    count: 2\n",
	})
	ns := f.Namespace(t)
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = framework.Poll(bg, 60*time.Second, func(context.Context) (bool, error) {
			return len(podCells(t, wk)) == 0, nil // the standbys stay, until kip's Stop
		})
	})
	ready := `kip_warm_cells{pool="small",state="ready"}`
	booting := `kip_warm_cells{pool="small",state="booting"}`
	given := map[string]string{} // pod → the standby cell it was given
	// waitPool waits until the pool has its two standbys ready, checking
	// at every look that it never has more than two.
	waitPool := func(what string) {
		t.Helper()
		f.WaitFor(t, 2*time.Minute, what, func(context.Context) (bool, error) {
			got := scrape(t, wk)
			if n := got[ready] + got[booting]; n > 2 {
				t.Fatalf("the pool has %v standby cells, more than its 2", n)
			}
			if n := len(standbyCells(t, wk)); n > 2+len(given) {
				t.Fatalf("%d standby cells on the machine, more than the pool's 2 and the %d given to pods", n, len(given))
			}
			return got[ready] == 2, nil
		})
	}
	waitPool("two standby cells ready")

	// Pods that fit, one after the other, each on a standby.
	var took []time.Duration
	for i := range 3 {
		before := standbyCells(t, wk)
		name := fmt.Sprintf("warm-%d", i)
		start := time.Now()
		createPod(t, ns, name, onNode(warmNode, sleeper()))
		pod := f.WaitForPods(t, ns, "app="+name, 1, 2*time.Minute, "Running", running)[0]
		took = append(took, time.Since(start))
		events := podEvents(t, ns, name)
		cell := assignedCell(events)
		if cell == "" || !before[cell] {
			t.Fatalf("pod %s: no AssignedWarmCell event naming one of the standbys %v:\n%s", name, sortedKeys(before), events)
		}
		if strings.Contains(events, "LaunchingCell") || podCells(t, wk)["kip-"+string(pod.UID)] {
			t.Errorf("pod %s was launched a cell of its own:\n%s", name, events)
		}
		given[name] = cell
		waitPool(fmt.Sprintf("the pool refilled after %s", name))
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("pods on standby cells, creation to Running (as the test sees it, polling): %v, median %v", took, sorted[len(sorted)/2])
	got := scrape(t, wk)
	t.Logf("bound_to_pod_running: %v pods, %v s in all (the binding's time has whole seconds)",
		got[`kip_launch_phase_seconds_count{phase="bound_to_pod_running"}`], got[`kip_launch_phase_seconds_sum{phase="bound_to_pod_running"}`])
	if n := got[`kip_warm_assignments_total{pool="small"}`]; n != 3 {
		t.Errorf("kip_warm_assignments_total = %v, want 3", n)
	}

	// A restart adopts the standbys and the pods' cells: the same cells,
	// no launch.
	standbys := standbyCells(t, wk)
	wk.Kill()
	if err := wk.Restart(); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, time.Minute, "kip's admin server after the restart", func(ctx context.Context) (bool, error) {
		resp, err := wk.AdminGet(ctx, "/metrics")
		if err != nil {
			return false, nil //nolint:nilerr // not up yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	waitPool("the standbys adopted after the restart")
	time.Sleep(3 * time.Second) // room for a wrong launch to show
	if after := standbyCells(t, wk); !sameKeys(after, standbys) {
		t.Errorf("standby cells after the restart %v, want those before %v", sortedKeys(after), sortedKeys(standbys))
	}
	got = scrape(t, wk)
	if n := got[`kip_warm_launches_total{pool="small"}`]; n != 0 {
		t.Errorf("kip_warm_launches_total after the restart = %v, want 0", n)
	}
	for name, cell := range given {
		pod := getPod(t, ns, name)
		if !running(pod) || !strings.Contains(podEvents(t, ns, name), cell) {
			t.Errorf("pod %s after the restart: phase %s, want Running on %s", name, pod.Status.Phase, cell)
		}
	}

	// A pod no standby fits launches its own cell.
	big := sleeper()
	big.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
	createPod(t, ns, "big", onNode(warmNode, big))
	pod := f.WaitForPods(t, ns, "app=big", 1, 2*time.Minute, "Running", running)[0]
	if events := podEvents(t, ns, "big"); strings.Contains(events, "AssignedWarmCell") ||
		!strings.Contains(events, "LaunchingCell launching cell kip-"+string(pod.UID)) {
		t.Errorf("the big pod was not launched a cell of its own:\n%s", events)
	}
}

// assignedCell is the standby cell an AssignedWarmCell event names, or "".
func assignedCell(events string) string {
	for _, line := range strings.Split(events, "\n") {
		if rest, ok := strings.CutPrefix(line, "Normal AssignedWarmCell assigned warm cell "); ok {
			return strings.Fields(rest)[0]
		}
	}
	return ""
}

// localCells are the local plugin's live cells of kip k whose name ok
// accepts.
func localCells(t *testing.T, k *framework.Kip, ok func(string) bool) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(k.StateDir, "cells"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && ok(e.Name()) {
			out[e.Name()] = true
		}
	}
	return out
}

// standbyCells are k's cells launched as standbys (given to a pod or not).
func standbyCells(t *testing.T, k *framework.Kip) map[string]bool {
	return localCells(t, k, func(n string) bool { return strings.HasPrefix(n, "kip-warm-") })
}

// podCells are k's cells launched for a pod.
func podCells(t *testing.T, k *framework.Kip) map[string]bool {
	return localCells(t, k, func(n string) bool { return !strings.HasPrefix(n, "kip-warm-") })
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameKeys(a, b map[string]bool) bool { return slices.Equal(sortedKeys(a), sortedKeys(b)) }
