//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/test/e2e/framework"
)

// BenchmarkWarmStartup measures a pod's start on a standby cell of the
// warm pool (issue 19's goal: Running p50 ≤ 1 s from bound), against the
// same pods on a kip without a pool. Each runs on a kip of its own beside
// the shared one, with the run's plugin (KIP_E2E_PLUGIN); behind a
// simulator every instance boots in 20 s, as in BenchmarkBurstStartup,
// which a standby has done before its pod comes.
//
// The pool keeps warmBenchCount standbys of warmBenchSize, and every pod
// asks for that size: the matcher maps both to the same offering, with
// every plugin. The pods start one after the other, each once the pool
// has all its standbys ready (kip_warm_cells{state="ready"}), and each is
// measured:
//
//   - bound → Running: from kip's log line "pod bound to the node"
//     (virtual-kubelet's CreatePod; milliseconds) to the watch event that
//     shows the pod Running with its container running;
//   - created → Running: from just before Create to that watch event;
//   - bound → assigned (with the pool) or bound → Launch issued (without):
//     kip's log, to where the cell comes from;
//   - cell Running → pod Running: from kip receiving the agent's Running
//     status (kip's log) to the watch event.
//
// A pod with the pool that was not given a standby (no AssignedWarmCell
// event) is counted in warm-misses and left out of the figures. Both
// clocks are this machine's.
//
//	go test -tags e2e -run '^$' -bench WarmStartup -benchtime=1x ./test/e2e/
//	KIP_E2E_PLUGIN=aws go test -tags e2e -run '^$' -bench WarmStartup -benchtime=1x ./test/e2e/
func BenchmarkWarmStartup(b *testing.B) {
	const pods = 10
	for _, warm := range []bool{false, true} {
		name := "pool=none"
		if warm {
			name = "pool=warm"
		}
		b.Run(name, func(b *testing.B) { warmStartup(b, warm, pods) })
	}
}

// The warm pool BenchmarkWarmStartup gives its kip, and the size its pods
// ask for.
const (
	warmBenchPool  = "bench"
	warmBenchCount = 2
	warmBenchCPU   = "100m"
	warmBenchMem   = "128Mi"
)

// warmBenchBoot is how long the simulators' instances take to boot.
const warmBenchBoot = 20 * time.Second

func warmStartup(b *testing.B, warm bool, pods int) {
	opts := framework.KipOptions{
		NodeName: "kip-cold-bench", Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-cold-bench", Network: 4,
	}
	if warm {
		opts.NodeName, opts.ClusterID = "kip-warm-bench", "e2e-warm-bench"
		opts.WarmPool = fmt.Sprintf("pools:\n  - name: %s\n    size: {cpu: %s, memory: %s}\n    count: %d\n",
			warmBenchPool, warmBenchCPU, warmBenchMem, warmBenchCount)
	}
	wk := startSideKip(b, opts)
	boot := time.Duration(0)
	if sim := wk.Sim(); sim != nil {
		boot = warmBenchBoot // the standbys launched as kip started boot at once
		sim.SetBootDelay(boot)
	}
	ns := f.Namespace(b)
	b.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: b.Context() has ended
		_ = f.Client.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = framework.Poll(bg, 90*time.Second, func(ctx context.Context) (bool, error) {
			list, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
	})
	ready := fmt.Sprintf(`kip_warm_cells{pool=%q,state="ready"}`, warmBenchPool)
	requests := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(warmBenchCPU), corev1.ResourceMemory: resource.MustParse(warmBenchMem),
	}

	for b.Loop() {
		rw := watchRunning(b, ns)
		results := map[string]*startup{}
		missed := map[string]string{} // pod → its events, with the pool and no standby given
		for i := range pods {
			name := fmt.Sprintf("pod-%02d", i)
			if warm {
				f.WaitFor(b, boot+2*time.Minute, fmt.Sprintf("the pool's %d standbys ready before %s", warmBenchCount, name),
					func(context.Context) (bool, error) { return scrape(b, wk)[ready] == warmBenchCount, nil })
			}
			hello := corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref, Resources: corev1.ResourceRequirements{Requests: requests}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "warm-bench"}},
				Spec: onNode(opts.NodeName, hello)}
			r := &startup{created: time.Now()}
			f.CreatePod(b, ns, pod)
			r.apiRunning = rw.wait(b, name, boot+90*time.Second)
			results[name] = r
			if warm {
				if events, given := warmGiven(b, ns, name); !given {
					missed[name] = events
				}
			}
		}
		rw.stop()
		b.StopTimer()
		wk.KeepAgentLogs()
		readKipLog(b, wk.LogPath, ns, results)

		var boundToRunning, createdToRunning, boundToCell, cellToAPI []time.Duration
		for name, r := range results {
			if _, ok := missed[name]; ok {
				continue
			}
			createdToRunning = append(createdToRunning, r.apiRunning.Sub(r.created))
			if !r.bound.IsZero() {
				boundToRunning = append(boundToRunning, r.apiRunning.Sub(r.bound))
			}
			cellAt := r.launchIssued
			if warm {
				cellAt = r.assigned
			}
			if !r.bound.IsZero() && !cellAt.IsZero() {
				boundToCell = append(boundToCell, cellAt.Sub(r.bound))
			}
			if !r.cellRunning.IsZero() {
				cellToAPI = append(cellToAPI, r.apiRunning.Sub(r.cellRunning))
			}
		}
		reportWithMax(b, "bound-to-running", boundToRunning)
		reportWithMax(b, "created-to-running", createdToRunning)
		if warm {
			reportWithMax(b, "bound-to-assigned", boundToCell)
		} else {
			reportWithMax(b, "bound-to-launch", boundToCell)
		}
		reportWithMax(b, "cell-to-api", cellToAPI)
		if warm {
			b.ReportMetric(float64(len(missed)), "warm-misses")
			for name, events := range missed {
				b.Logf("pod %s was given no standby (left out of the figures); its events:\n%s", name, events)
			}
		}
		b.Logf("plugin %s, boot delay %v, %d pods of %s CPU and %s memory", wk.Plugin, boot, pods, warmBenchCPU, warmBenchMem)
		b.StartTimer()
	}
}

// warmGiven reports whether pod name got an AssignedWarmCell event naming
// a standby cell, waiting up to 10 s for the event that says where its
// cell came from (AssignedWarmCell or LaunchingCell); it returns the
// pod's events too.
func warmGiven(b *testing.B, ns, name string) (string, bool) {
	b.Helper()
	var events string
	_ = framework.Poll(b.Context(), 10*time.Second, func(context.Context) (bool, error) {
		events = podEvents(b, ns, name)
		return strings.Contains(events, "AssignedWarmCell") || strings.Contains(events, "LaunchingCell"), nil
	})
	cell := assignedCell(events)
	return events, strings.HasPrefix(cell, "kip-warm-") && !strings.Contains(events, "LaunchingCell")
}

// reportWithMax reports the percentiles of ds (report) and their maximum
// as NAME-max-ms.
func reportWithMax(b *testing.B, name string, ds []time.Duration) {
	b.Helper()
	report(b, name, ds)
	if len(ds) > 0 {
		b.ReportMetric(float64(slices.Max(ds))/float64(time.Millisecond), name+"-max-ms")
	}
}
