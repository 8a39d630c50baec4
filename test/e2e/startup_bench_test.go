//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kipcell/kip/test/bench"
)

// BenchmarkPodStartup measures a pod's start on kip, one pod at a time so
// that every pod gets a cold cell (a new agent, containerd namespace and
// netns), with the image already in the registry:
//
//   - created → Running: from just before Create to the watch event that
//     shows the pod Running with its container running;
//   - bound → Launch issued: from kip seeing the pod bound to its node
//     (virtual-kubelet's CreatePod) to the plugin Launch call, from kip's
//     log timestamps;
//   - cell Running → pod Running: from kip receiving the agent's Running
//     status (kip's log) to the watch event showing Running in the API.
//
// Run it alone: go test -tags e2e -run '^$' -bench PodStartup -benchtime=1x ./test/e2e/
func BenchmarkPodStartup(b *testing.B) {
	const pods = 20
	for b.Loop() {
		measureStartup(b, pods)
	}
}

type startup struct {
	created, apiRunning              time.Time
	bound, launchIssued, cellRunning time.Time
	// assigned is when kip gave the pod a standby cell of the warm pool
	// (BenchmarkWarmStartup).
	assigned time.Time
	// up, joined and diskAttached are when kip found the instance up
	// and began to join its agent and attach the pod's disks (the cell
	// phase joining), the agent joined, and kip saw the pod's last disk
	// attached (BenchmarkDiskStartup).
	up, joined, diskAttached time.Time
	// cell and instance are the pod's cell and the plugin's instance
	// ("cell launched"), which name its agent's directory.
	cell, instance string
	// agentApplied, diskSetUp and containerStarted are from the cell's
	// agent's log: the host's first Apply, the pod's disk formatted and
	// mounted, its container started (BenchmarkDiskStartup).
	agentApplied, diskSetUp, containerStarted time.Time
}

// runningWatch notes when the watch of a namespace's pods first shows
// each pod Running with its containers running, on this machine's clock.
type runningWatch struct {
	w         watch.Interface
	runningAt map[string]time.Time
}

// watchRunning starts a runningWatch of ns's pods.
func watchRunning(b *testing.B, ns string) *runningWatch {
	b.Helper()
	w, err := f.Client.CoreV1().Pods(ns).Watch(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return &runningWatch{w: w, runningAt: map[string]time.Time{}}
}

// wait returns when the watch first showed pod name Running; it fails b
// after timeout.
func (rw *runningWatch) wait(b *testing.B, name string, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.After(timeout)
	for {
		if t, ok := rw.runningAt[name]; ok {
			return t
		}
		select {
		case ev := <-rw.w.ResultChan():
			now := time.Now()
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if _, seen := rw.runningAt[p.Name]; !seen && running(p) {
				rw.runningAt[p.Name] = now
			}
		case <-deadline:
			b.Fatalf("pod %s not Running after %v", name, timeout)
		}
	}
}

func (rw *runningWatch) stop() { rw.w.Stop() }

func measureStartup(b *testing.B, n int) {
	ctx := b.Context()
	ns := f.Namespace(b)
	before := cellNames(b) // CoreDNS's, when the cluster DNS runs
	pods := watchRunning(b, ns)
	defer pods.stop()
	results := map[string]*startup{}
	for i := range n {
		name := fmt.Sprintf("start-%02d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "startup"}},
			Spec: onKip(corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref})}
		r := &startup{created: time.Now()}
		f.CreatePod(b, ns, pod)
		r.apiRunning = pods.wait(b, name, 60*time.Second)
		results[name] = r
	}
	b.StopTimer()
	readKipLog(b, kip.LogPath, ns, results)

	var createdToRunning, boundToLaunch, cellToAPI []time.Duration
	for _, r := range results {
		createdToRunning = append(createdToRunning, r.apiRunning.Sub(r.created))
		if !r.bound.IsZero() && !r.launchIssued.IsZero() {
			boundToLaunch = append(boundToLaunch, r.launchIssued.Sub(r.bound))
		}
		if !r.cellRunning.IsZero() {
			cellToAPI = append(cellToAPI, r.apiRunning.Sub(r.cellRunning))
		}
	}
	report(b, "created-to-running", createdToRunning)
	report(b, "bound-to-launch", boundToLaunch)
	report(b, "cell-to-api", cellToAPI)

	// Delete them all and wait for their cells to end before the next run.
	if err := f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=startup"}); err != nil {
		b.Fatal(err)
	}
	f.WaitFor(b, 60*time.Second, "the benchmark's cells to end", func(context.Context) (bool, error) { return newCells(b, before) == 0, nil })
	b.StartTimer()
}

var logLine = regexp.MustCompile(`^time=(\S+) .*msg="([^"]+)".* pod=(\S+)`)

// readKipLog fills bound, launchIssued, assigned, cell, instance, up,
// joined, diskAttached and cellRunning from the kip log at path.
func readKipLog(b *testing.B, path, ns string, results map[string]*startup) {
	file, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		podNS, podName, ok := strings.Cut(m[3], "/")
		r := results[podName]
		if !ok || podNS != ns || r == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		switch {
		case m[2] == "pod bound to the node" && r.bound.IsZero():
			r.bound = at
		case m[2] == "launch issued" && r.launchIssued.IsZero():
			r.launchIssued = at
		case m[2] == "assigned a standby cell of the warm pool" && r.assigned.IsZero():
			r.assigned = at
		case m[2] == "cell launched" && r.cell == "":
			r.cell, r.instance = logAttr(sc.Text(), "cell"), logAttr(sc.Text(), "instance")
		case m[2] == "cell phase" && logAttr(sc.Text(), "phase") == "joining" && r.up.IsZero():
			r.up = at
		case m[2] == "cell joined: its agent holds a certificate for its own key" && r.joined.IsZero():
			r.joined = at
		case m[2] == "disk attached" && at.After(r.diskAttached):
			// A pod's disks attach each in its own goroutine; the
			// last one holds the pod.
			r.diskAttached = at
		case m[2] == "cell reported pod phase" && strings.Contains(sc.Text(), "phase=Running") && r.cellRunning.IsZero():
			r.cellRunning = at
		}
	}
}

// logAttr is the value of key in a kip log line, unquoted; "" when it
// has none.
func logAttr(line, key string) string {
	_, rest, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	value, _, _ := strings.Cut(rest, " ")
	return value
}

// report reports the percentiles of ds, in milliseconds, and logs them.
func report(b *testing.B, name string, ds []time.Duration) {
	b.Helper()
	if s := bench.Report(b, name, time.Millisecond, ds); s.N > 0 {
		b.Logf("%-20s %v", name, s)
	}
}
