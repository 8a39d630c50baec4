//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/e2e/framework"
)

// swapNode is the kip node TestPluginSwapUnderRunningPods runs, beside the
// shared node "kip", so that the shared node's plugin is never swapped.
const swapNode = "kip-swap"

// TestPluginSwapUnderRunningPods upgrades a pinned plugin in place, as
// an operator would: the new binary is moved over the old one, kip.yaml's
// plugin.sha256 is rewritten and kip gets a SIGHUP. The pod running
// before keeps its cell, its IP and its container; a new pod runs on the
// new plugin process. A second swap, to a binary whose checksum is not the
// pin, is refused with the plugin's name, its path and both checksums, and
// the running plugin process keeps serving.
func TestPluginSwapUnderRunningPods(t *testing.T) {
	framework.PluginPath(t)
	ctx := t.Context()
	name := kip.Plugin
	binary := plugin.BinaryPrefix + name
	pluginDir := t.TempDir()
	pluginPath := filepath.Join(pluginDir, binary)
	copyFile(t, filepath.Join(kip.BinDir, binary), pluginPath)
	sum1 := fileSum(t, pluginPath)
	version1 := describedVersion(t, pluginPath)

	sk := startSideKip(t, framework.KipOptions{
		NodeName: swapNode, Plugin: name, BinDir: kip.BinDir, PluginDir: pluginDir, PluginSHA256: sum1,
		ClusterID: "e2e-swap", Network: 1,
	})
	ns := f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, sk, ns) })

	before := runPodOn(t, ns, "before")
	cellBefore := cellOf(t, sk, before.UID)
	agents := agentPids(sk, cellBefore)
	if len(agents) == 0 {
		t.Fatalf("no cell agent process for cell %s of pod before", cellBefore)
	}
	oldPid := pluginPid(t, sk, "plugin started")

	// The upgrade: a new build beside the old binary, moved over it, its
	// checksum pinned in kip.yaml, then SIGHUP.
	const version2 = "e2e-swap"
	next := pluginPath + ".new"
	if err := framework.BuildBinary(ctx, binary, next, "-ldflags", "-X github.com/kipcell/kip/plugins/"+name+".Version="+version2); err != nil {
		t.Fatalf("%s %s: %v", binary, version2, err)
	}
	sum2 := fileSum(t, next)
	if err := os.Rename(next, pluginPath); err != nil {
		t.Fatal(err)
	}
	pin(t, sk, sum1, sum2)
	if err := sk.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloaded := waitLogLine(t, sk, "msg=\"plugin reloaded\"")
	t.Logf("swap: %s", reloaded)
	for _, want := range []string{"plugin=" + name, "path=" + pluginPath, "version=" + version2, "sha256=" + sum2,
		"old_version=" + version1, "old_sha256=" + sum1, "old_pid=" + strconv.Itoa(oldPid)} {
		if !strings.Contains(reloaded, want) {
			t.Errorf("kip's log line %q lacks %s", reloaded, want)
		}
	}
	newPid := pluginPid(t, sk, "plugin reloaded")
	f.WaitFor(t, 30*time.Second, "only the new plugin process running", func(context.Context) (bool, error) {
		pids := pluginProcs(pluginPath)
		return len(pids) == 1 && pids[0] == newPid, nil
	})

	// The pod that ran before kept its cell: same cell, agent process,
	// IP, placement and container, no restart.
	unchanged(t, sk, ns, before, cellBefore, agents)

	// A new pod runs on the new plugin process, the only one there is.
	runPodOn(t, ns, "after")
	if pids := pluginProcs(pluginPath); len(pids) != 1 || pids[0] != newPid {
		t.Errorf("plugin processes %v, want only the reloaded one %d", pids, newPid)
	}

	// A binary whose checksum is not the pin is refused; the running
	// process keeps serving.
	copyFile(t, filepath.Join(kip.BinDir, binary), next)
	if err := os.Rename(next, pluginPath); err != nil {
		t.Fatal(err)
	}
	if err := sk.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	refused := waitLogLine(t, sk, "plugin not reloaded")
	t.Logf("refused: %s", refused)
	wantErr := "plugin " + name + " (" + pluginPath + "): reloading: checksum mismatch: pinned sha256 " + sum2 + ", file has " + sum1
	if !strings.Contains(refused, "level=ERROR") || !strings.Contains(refused, wantErr) {
		t.Errorf("kip's log line %q; want an error %q", refused, wantErr)
	}
	if n := strings.Count(readLog(t, sk), "msg=\"plugin reloaded\""); n != 1 {
		t.Errorf("kip's log has %d swaps, want the first only", n)
	}
	runPodOn(t, ns, "refused")
	if pids := pluginProcs(pluginPath); len(pids) != 1 || pids[0] != newPid {
		t.Errorf("plugin processes %v after the refused swap, want the running one %d", pids, newPid)
	}
	unchanged(t, sk, ns, before, cellBefore, agents)
}

// stopOnCleanup stops a kip of the test's own when the test ends, with
// its log's tail when it failed, and deletes its Node and Lease.
func stopOnCleanup(t *testing.T, k *framework.Kip) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s's log (%s):\n%s", k.NodeName, k.LogPath, k.LogTail(120))
		}
		k.Stop()
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Nodes().Delete(bg, k.NodeName, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, k.NodeName, metav1.DeleteOptions{})
	})
}

// testWriter writes StartKip's progress to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil { //nolint:gosec // a plugin binary is executable
		t.Fatal(err)
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	sum, err := plugin.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// describedVersion is the version the plugin at path reports.
func describedVersion(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path, "describe").Output()
	if err != nil {
		t.Fatalf("%s describe: %v", path, err)
	}
	var info pluginapi.GetInfoResponse
	if err := json.Unmarshal(out, &info); err != nil || info.Version == "" {
		t.Fatalf("%s describe printed %q: %v", path, out, err)
	}
	return info.Version
}

// pin rewrites kip.yaml's plugin.sha256 from old to sum.
func pin(t *testing.T, k *framework.Kip, old, sum string) {
	t.Helper()
	data, err := os.ReadFile(k.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	line := "  sha256: " + old + "\n"
	if !strings.Contains(string(data), line) {
		t.Fatalf("%s has no line %q:\n%s", k.ConfigPath, line, data)
	}
	data = []byte(strings.Replace(string(data), line, "  sha256: "+sum+"\n", 1))
	if err := os.WriteFile(k.ConfigPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readLog(t *testing.T, k *framework.Kip) string {
	t.Helper()
	data, err := os.ReadFile(k.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitLogLine waits for a line of kip's log containing s and returns it.
func waitLogLine(t *testing.T, k *framework.Kip, s string) string {
	t.Helper()
	var line string
	f.WaitFor(t, 60*time.Second, "kip's log to say "+s, func(context.Context) (bool, error) {
		for _, l := range strings.Split(readLog(t, k), "\n") {
			if strings.Contains(l, s) {
				line = l
				return true, nil
			}
		}
		return false, nil
	})
	return line
}

var pidAttr = regexp.MustCompile(` pid=(\d+)`)

// pluginPid is the pid of the plugin process named by kip's log line msg.
func pluginPid(t *testing.T, k *framework.Kip, msg string) int {
	t.Helper()
	line := waitLogLine(t, k, "msg=\""+msg+"\"")
	m := pidAttr.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no pid in %q", line)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// pluginProcs lists the live processes running the binary at path.
func pluginProcs(path string) []int {
	return procs(func(cmdline []string) bool { return len(cmdline) > 0 && cmdline[0] == path })
}

// procs lists the live processes whose command line satisfies match.
func procs(match func(cmdline []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if s := string(stat); err != nil || strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") {
			continue // gone, or a zombie
		}
		if match(strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runPodOn creates pod name (the hello image) on swapNode and waits until
// it is Running.
func runPodOn(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return runOn(t, ns, swapNode, name)
}

// cellOf is the cell of the pod: its local cell directory's name, the
// cell ID with the local plugin, the EC2 instance ID with the aws plugin,
// the GCE instance name (the cell ID) with the gce plugin.
func cellOf(t *testing.T, k *framework.Kip, uid types.UID) string {
	t.Helper()
	id := "kip-" + string(uid)
	if k.Sim() != nil {
		id = ""
		for _, in := range simInstancesOf(t, k, uid) {
			if !in.Terminated {
				id = in.LocalCell
			}
		}
	}
	if id == "" {
		t.Fatalf("no instance for pod %s", uid)
	}
	if _, err := os.Stat(filepath.Join(k.StateDir, "cells", id)); err != nil {
		t.Fatalf("no local cell for pod %s: %v", uid, err)
	}
	return id
}

// agentPids lists the processes of cell id (its agent and what it runs).
func agentPids(k *framework.Kip, id string) []int {
	dir := filepath.Join(k.StateDir, "cells", id) + "/"
	return procs(func(cmdline []string) bool { return strings.Contains(strings.Join(cmdline, " "), dir) })
}

// unchanged checks that pod before still runs as it did: same cell and
// agent processes, IP, placement annotations and container, no restart.
func unchanged(t *testing.T, k *framework.Kip, ns string, before *corev1.Pod, cell string, agents []int) {
	t.Helper()
	now, err := f.Client.CoreV1().Pods(ns).Get(t.Context(), before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != before.UID || !running(now) || now.Status.PodIP != before.Status.PodIP {
		t.Errorf("pod %s: uid %s, phase %s, IP %s; want %s still Running with IP %s",
			now.Name, now.UID, now.Status.Phase, now.Status.PodIP, before.UID, before.Status.PodIP)
	}
	if diff := cmp.Diff(placement(before.Annotations), placement(now.Annotations)); diff != "" {
		t.Errorf("pod %s's placement annotations changed (-before +now):\n%s", now.Name, diff)
	}
	b, n := before.Status.ContainerStatuses[0], now.Status.ContainerStatuses[0]
	if n.RestartCount != b.RestartCount || n.ContainerID != b.ContainerID || !n.State.Running.StartedAt.Equal(&b.State.Running.StartedAt) {
		t.Errorf("pod %s's container: restarts %d, ID %s, started %s; want %d, %s, %s",
			now.Name, n.RestartCount, n.ContainerID, n.State.Running.StartedAt, b.RestartCount, b.ContainerID, b.State.Running.StartedAt)
	}
	if got := cellOf(t, k, now.UID); got != cell {
		t.Errorf("pod %s's cell is %s, want %s", now.Name, got, cell)
	}
	if diff := cmp.Diff(agents, agentPids(k, cell)); diff != "" {
		t.Errorf("cell %s's processes changed (-before +now):\n%s", cell, diff)
	}
}

// deletePodsAndCells deletes the test's pods and waits for kip to
// terminate their cells, before kip stops.
func deletePodsAndCells(t *testing.T, k *framework.Kip, ns string) {
	bg := context.Background() //nolint:usetesting // runs as a Cleanup, when t.Context() has ended
	err := f.Client.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the pods: %v", err)
	}
	var left []string
	err = framework.Poll(bg, 60*time.Second, func(context.Context) (bool, error) {
		entries, err := os.ReadDir(filepath.Join(k.StateDir, "cells"))
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.Name())
		}
		return len(entries) == 0, err
	})
	if err != nil {
		t.Errorf("waiting for %s's cells to end: %v; left in %s: %v", k.NodeName, err, filepath.Join(k.StateDir, "cells"), left)
	}
}
