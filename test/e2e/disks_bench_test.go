//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/bench"
)

// BenchmarkDiskStartup measures what a PersistentVolume disk adds to a
// pod's start (issue 31): N pods with one disk each, bound ahead to
// their claims, beside N pods without, started one at a time so that
// each gets a cold cell, the two kinds alternating so that the load of
// the machine weighs on both alike. Each disk is a fresh blank one of
// the pass's cloud (newDisk), so the agent formats it (ext4) before it
// mounts it; its claim is Bound before its pod is created. For each
// kind, in milliseconds:
//
//   - created → Running: from just before Create to the watch event that
//     shows the pod Running with its container running;
//   - bound → Running: from kip's log line "pod bound to the node"
//     (virtual-kubelet's CreatePod) to that watch event;
//   - ready → cell Running: from the cell ready for its pod (the agent
//     joined and, with a disk, the disk attached: the later of kip's
//     log lines) to kip receiving the agent's Running status: the
//     agent's apply, with a disk its format and mount, and the first
//     sync of the ClusterIP services, which an attach ending after the
//     join hides;
//   - agent: applied → container started: from the agent's log line
//     "applied pod" (the host's first Apply) to its "container started":
//     the pod's network, volumes and, with a disk, its format and mount
//     (its "disk set up"), then the container's start;
//   - agent: applied → disk set up, for the pods with a disk: the pod's
//     network and volumes, then the disk found, formatted and mounted;
//
// and for the pods with a disk, from kip's log:
//
//   - up → attached: from kip finding the instance up (its debug line
//     "cell phase" joining), when it starts the attach beside the
//     agent's join, to "disk attached": the plugin's AttachVolume and
//     kip's polls of the attachment until attached;
//   - attach past join: how long the attach went on after the agent
//     joined (0 when it was done before): the attach's share of the
//     start, what the pod waited for it.
//
// added-p50-ms is the difference of the two kinds' created → Running
// medians, agent-added-p50-ms that of their agent figures: the format
// and mount, beside the machine's noise. The clocks are this machine's.
//
//	KIP_E2E_PLUGIN=<local|aws|gce|azure> go test -tags e2e -race -count=1 -run '^$' -bench DiskStartup -benchtime=1x -timeout 20m ./test/e2e/
func BenchmarkDiskStartup(b *testing.B) {
	const pods = 5 // of each kind: the machine has 2 cores, shared
	for b.Loop() {
		measureDiskStartup(b, pods)
	}
}

func measureDiskStartup(b *testing.B, n int) {
	b.StopTimer()
	ctx := b.Context()
	ns := f.Namespace(b)
	before := cellNames(b) // CoreDNS's, when the cluster DNS runs
	zone := passZone()
	for i := range n {
		claim := fmt.Sprintf("data-%02d", i)
		driver, handle := newDisk(b, claim, zone)
		staticPV(b, ns, claim, driver, handle, corev1.PersistentVolumeFilesystem)
		createClaim(b, ns, claim, corev1.PersistentVolumeFilesystem)
	}
	// After the disks: cleanups run last first, so a failed run's pods
	// are deleted, and their disks detached, before the disks are.
	deletePodsAtEnd(b, ns)
	f.WaitFor(b, time.Minute, "the benchmark's claims Bound", func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range list.Items {
			if c.Status.Phase != corev1.ClaimBound {
				return false, nil
			}
		}
		return len(list.Items) == n, nil
	})

	runningPods := watchRunning(b, ns)
	defer runningPods.stop()
	plain, disk := map[string]*startup{}, map[string]*startup{}
	b.StartTimer()
	for i := range n {
		for _, withDisk := range []bool{false, true} {
			name, spec, results := fmt.Sprintf("plain-%02d", i), onKip(sleeper()), plain
			if withDisk {
				name, results = fmt.Sprintf("disk-%02d", i), disk
				spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
				spec.Volumes = []corev1.Volume{claimVolume("data", fmt.Sprintf("data-%02d", i))}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "diskstart"}}, Spec: spec}
			r := &startup{created: time.Now()}
			f.CreatePod(b, ns, pod)
			r.apiRunning = runningPods.wait(b, name, 3*time.Minute)
			results[name] = r
		}
	}
	b.StopTimer()
	all := map[string]*startup{}
	for name, r := range plain {
		all[name] = r
	}
	for name, r := range disk {
		all[name] = r
	}
	readKipLog(b, kip.LogPath, ns, all)
	// The agents' logs go with their cells: read them before the pods
	// are deleted.
	for name, r := range all {
		readAgentLog(b, name, r)
	}

	plainRunning, plainAgent := reportDiskStartup(b, "plain", plain, false)
	diskRunning, diskAgent := reportDiskStartup(b, "disk", disk, true)
	reportAdded(b, "added-p50-ms", plainRunning, diskRunning)
	reportAdded(b, "agent-added-p50-ms", plainAgent, diskAgent)

	// Delete the pods and wait for their cells to end, which detaches
	// their disks, before the disks' cleanups delete them.
	if err := f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app=diskstart"}); err != nil {
		b.Fatal(err)
	}
	f.WaitFor(b, 2*time.Minute, "the benchmark's cells to end", func(context.Context) (bool, error) { return newCells(b, before) == 0, nil })
	b.StartTimer()
}

// reportAdded reports, as metric, the p50 of with less the p50 of
// without, in milliseconds.
func reportAdded(b *testing.B, metric string, without, with []time.Duration) {
	b.Helper()
	if len(without) == 0 || len(with) == 0 {
		return
	}
	added := bench.Of(with).P50 - bench.Of(without).P50
	b.ReportMetric(float64(added)/float64(time.Millisecond), metric)
	b.Logf("%-28s %v", metric, added)
}

// reportDiskStartup reports one kind's figures, each metric named after
// kind, and returns its created → Running and agent durations. A pod
// whose kip or agent log lacks a line is left out of the figures that
// need it; with withDisk, a pod whose disk kip never logged attached, or
// its agent never set up, fails b.
func reportDiskStartup(b *testing.B, kind string, results map[string]*startup, withDisk bool) (createdToRunning, agent []time.Duration) {
	b.Helper()
	var boundToRunning, readyToCell, upToAttach, attachPastJoin, appliedToSetUp []time.Duration
	for name, r := range results {
		createdToRunning = append(createdToRunning, r.apiRunning.Sub(r.created))
		if !r.agentApplied.IsZero() && !r.containerStarted.IsZero() {
			agent = append(agent, r.containerStarted.Sub(r.agentApplied))
		}
		switch {
		case withDisk && r.diskSetUp.IsZero():
			b.Errorf("%s: Running, but its agent's log has no \"disk set up\"", name)
		case withDisk && !r.agentApplied.IsZero():
			appliedToSetUp = append(appliedToSetUp, r.diskSetUp.Sub(r.agentApplied))
		}
		if !r.bound.IsZero() {
			boundToRunning = append(boundToRunning, r.apiRunning.Sub(r.bound))
		}
		if withDisk && r.diskAttached.IsZero() {
			b.Errorf("%s: Running, but kip's log has no \"disk attached\" for it", name)
			continue
		}
		ready := r.joined
		if withDisk && r.diskAttached.After(ready) {
			ready = r.diskAttached
		}
		if !r.joined.IsZero() && !r.cellRunning.IsZero() {
			readyToCell = append(readyToCell, r.cellRunning.Sub(ready))
		}
		if !withDisk {
			continue
		}
		if !r.up.IsZero() {
			upToAttach = append(upToAttach, r.diskAttached.Sub(r.up))
		}
		if !r.joined.IsZero() {
			attachPastJoin = append(attachPastJoin, max(0, r.diskAttached.Sub(r.joined)))
		}
	}
	report(b, kind+"-created-to-running", createdToRunning)
	report(b, kind+"-bound-to-running", boundToRunning)
	report(b, kind+"-ready-to-cell-running", readyToCell)
	report(b, kind+"-agent-applied-to-started", agent)
	if withDisk {
		report(b, kind+"-up-to-attached", upToAttach)
		report(b, kind+"-attach-past-join", attachPastJoin)
		report(b, kind+"-agent-applied-to-disk-set-up", appliedToSetUp)
	}
	return createdToRunning, agent
}

// readAgentLog fills agentApplied, diskSetUp and containerStarted from
// the agent.log of pod name's cell (JSON lines, kip-cell's slog), in the
// local plugin's state directory, which the simulators' cells share:
// <StateDir>/cells/<cell ID>/, the cell ID kip's with the local plugin,
// the instance's behind a simulator (localcells). A pod whose log cannot
// be read fails b.
func readAgentLog(b *testing.B, name string, r *startup) {
	b.Helper()
	var data []byte
	err := os.ErrNotExist
	for _, id := range []string{r.cell, r.instance} {
		if id == "" {
			continue
		}
		if data, err = os.ReadFile(filepath.Join(kip.StateDir, "cells", id, "agent.log")); err == nil {
			break
		}
	}
	if err != nil {
		b.Errorf("%s: reading its agent's log (cell %q, instance %q): %v", name, r.cell, r.instance, err)
		return
	}
	for line := range strings.Lines(string(data)) {
		var entry struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		switch {
		case entry.Msg == "applied pod" && r.agentApplied.IsZero():
			r.agentApplied = entry.Time
		case entry.Msg == "disk set up" && r.diskSetUp.IsZero():
			r.diskSetUp = entry.Time
		case entry.Msg == "container started" && r.containerStarted.IsZero():
			r.containerStarted = entry.Time
		}
	}
}
