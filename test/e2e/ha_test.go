//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/host/election"
	"github.com/kipcell/kip/test/e2e/framework"
)

// maxTakeover is the bound on a takeover after the leader's
// process is killed: the standby holds the Lease within it.
const maxTakeover = 15 * time.Second

// haPair starts two kips with leader election for node (their own node,
// beside the run's), sharing one plugin state (the local plugin's state
// directory, or the simulator): the first leads, the second stands by. It
// deletes the node, its Leases and, before the kips stop, the test's pods
// and their cells when the test ends.
func haPair(t *testing.T, node string, network int) (leader, standby *framework.Kip, ns string) {
	t.Helper()
	ctx := t.Context()
	leader, err := f.StartKip(ctx, cells, framework.KipOptions{
		NodeName: node, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-" + node, Network: network,
		LeaderElection: true, Log: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		leader.Stop()
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Nodes().Delete(bg, node, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, node, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(framework.ElectionNamespace).Delete(bg, election.LeasePrefix+node, metav1.DeleteOptions{})
	})
	standby, err = f.StartKip(ctx, cells, framework.KipOptions{Beside: leader, LeaderElection: true, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, k := range []*framework.Kip{leader, standby} {
				t.Logf("last lines of %s (%s):\n%s", k.Identity, k.LogPath, k.LogTail(100))
			}
		}
	})
	if got := electionLease(t, node).holder; got != leader.Identity {
		t.Fatalf("the Lease's holder is %q, want the first kip %s", got, leader.Identity)
	}
	ns = f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, leader, ns) })
	return leader, standby, ns
}

// lease is what the tests read of the election's Lease.
type lease struct {
	holder   string
	acquired time.Time
}

func electionLease(t *testing.T, node string) lease {
	t.Helper()
	var l *coordinationv1.Lease
	f.WaitFor(t, 30*time.Second, "the election's Lease", func(ctx context.Context) (bool, error) {
		var err error
		l, err = f.Client.CoordinationV1().Leases(framework.ElectionNamespace).Get(ctx, election.LeasePrefix+node, metav1.GetOptions{})
		return err == nil, nil //nolint:nilerr // not created yet
	})
	var out lease
	if l.Spec.HolderIdentity != nil {
		out.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		out.acquired = l.Spec.AcquireTime.Time
	}
	return out
}

// waitLeader waits until identity holds node's Lease and returns when it
// acquired it (the Lease's acquireTime, written by the new leader on this
// machine's clock).
func waitLeader(t *testing.T, node, identity string) time.Time {
	t.Helper()
	var acquired time.Time
	f.WaitFor(t, 60*time.Second, identity+" to hold the Lease", func(ctx context.Context) (bool, error) {
		l, err := f.Client.CoordinationV1().Leases(framework.ElectionNamespace).Get(ctx, election.LeasePrefix+node, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // transient
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity || l.Spec.AcquireTime == nil {
			return false, nil
		}
		acquired = l.Spec.AcquireTime.Time
		return true, nil
	})
	return acquired
}

// ppid is the parent of process pid (0 when it is gone).
func ppid(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(fields[1])
	return p
}

// pluginChildren lists the plugin processes k's kip process started.
func pluginChildren(k *framework.Kip) []int {
	path := filepath.Join(k.PluginDir, "kip-plugin-"+k.Plugin)
	var out []int
	for _, pid := range pluginProcs(path) {
		if ppid(pid) == k.PID() {
			out = append(out, pid)
		}
	}
	return out
}

// assertStandby checks that k does nothing a leader does: no plugin
// process, no cell work, no node.
func assertStandby(t *testing.T, k *framework.Kip) {
	t.Helper()
	if pids := pluginChildren(k); len(pids) > 0 {
		t.Errorf("the standby %s runs plugin processes %v", k.Identity, pids)
	}
	log := readLog(t, k)
	for _, leaderOnly := range []string{"cloud plugin ready", "kip running", "adopt", "LaunchingCell", "launching cell"} {
		if strings.Contains(log, leaderOnly) {
			t.Errorf("the standby %s's log has %q, which only a leader logs", k.Identity, leaderOnly)
		}
	}
}

// oneCellEach checks that each pod has exactly one cell, live, and the
// plugin no other: one local cell directory a pod (and no tombstone of a
// pod's cell), or one instance a pod in the simulator, none ended.
func oneCellEach(t *testing.T, k *framework.Kip, pods []corev1.Pod) {
	t.Helper()
	if k.Sim() != nil {
		ins, _ := simInstances(t, k)
		if len(ins) != len(pods) {
			t.Errorf("%d instances in the simulator, want one per pod (%d)", len(ins), len(pods))
		}
		for _, p := range pods {
			if got := simInstancesOf(t, k, p.UID); len(got) != 1 || got[0].Ended {
				t.Errorf("pod %s has instances %+v, want one, live", p.Name, got)
			}
		}
		return
	}
	names := cellDirs(k)
	want := map[string]bool{}
	for _, p := range pods {
		want["kip-"+string(p.UID)] = true
		if _, err := os.Stat(filepath.Join(k.StateDir, "ended", "kip-"+string(p.UID)+".json")); err == nil {
			t.Errorf("pod %s's cell was terminated once (a tombstone in %s)", p.Name, filepath.Join(k.StateDir, "ended"))
		}
	}
	for _, name := range names {
		if !want[name] {
			t.Errorf("cell %s belongs to none of the pods", name)
		}
	}
	if len(names) != len(pods) {
		t.Errorf("%d local cells %v, want one per pod (%d)", len(names), names, len(pods))
	}
}

// cellDirs lists the local cells in k's state directory: one directory
// each (beside them, each cell's lock file).
func cellDirs(k *framework.Kip) []string {
	entries, _ := os.ReadDir(filepath.Join(k.StateDir, "cells"))
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestHAKillLeaderMidBurst kills the leader's process (kill -9, with its
// plugin) while a burst of pods is still launching. The standby takes
// the Lease within 15 s of the kill and adopts every cell: every pod
// reaches Running, no container restarts, each pod has one cell (none
// launched twice), and once the pods are deleted no cell is left.
func TestHAKillLeaderMidBurst(t *testing.T) {
	framework.AlsoIn(t, framework.PluginAWS, "the standby adopts the burst's instances through EC2's eventually consistent DescribeInstances")
	const node, pods = "kip-ha", 10
	leader, standby, ns := haPair(t, node, 2)
	assertStandby(t, standby)

	createPods(t, ns, node, "burst", pods)
	// Mid-burst: some cells exist, some pods are not Running yet.
	f.WaitFor(t, 60*time.Second, "the burst's first cells", func(context.Context) (bool, error) {
		return len(cellDirs(leader)) >= 3, nil
	})
	list, err := f.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=burst"})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if running(&p) {
			before[p.Name] = p
		}
	}
	killed := time.Now()
	leader.Kill()
	t.Logf("killed the leader %s with %d of %d pods Running", leader.Identity, len(before), pods)
	if len(before) == pods {
		t.Fatalf("the burst had ended before the kill: not a kill mid-burst")
	}

	acquired := waitLeader(t, node, standby.Identity)
	takeover := acquired.Sub(killed)
	t.Logf("takeover: %s took the Lease %.1f s after the kill of %s", standby.Identity, takeover.Seconds(), leader.Identity)
	if takeover > maxTakeover {
		t.Errorf("the standby took the Lease %s after the kill, want within %s", takeover.Round(100*time.Millisecond), maxTakeover)
	}

	all := f.WaitForPods(t, ns, "app=burst", pods, 3*time.Minute, "Running on "+node, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == node && running(p)
	})
	t.Logf("all %d pods Running %.1f s after the kill", pods, time.Since(killed).Seconds())
	for _, p := range all {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times, want 0", p.Name, cs.Name, cs.RestartCount)
			}
		}
		if b, ok := before[p.Name]; ok {
			was, now := b.Status.ContainerStatuses[0], p.Status.ContainerStatuses[0]
			if now.ContainerID != was.ContainerID || !now.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) {
				t.Errorf("pod %s's container was %s started %s, is %s started %s: restarted by the takeover",
					p.Name, was.ContainerID, was.State.Running.StartedAt, now.ContainerID, now.State.Running.StartedAt)
			}
		}
	}
	oneCellEach(t, leader, all)

	// No orphan: once the pods are deleted, no cell is left (and in a
	// simulator, no instance that is not terminated).
	deletePodsAndCells(t, leader, ns)
	if leader.Sim() != nil {
		ins, _ := simInstances(t, leader)
		for _, in := range ins {
			if !in.Terminated {
				t.Errorf("instance %s (cell %s) outlived its pod", in.ID, in.Cell)
			}
		}
	}
}

// TestHAStandbyAndSIGTERMHandover: a standby runs no plugin and touches
// no cell while the leader runs a pod; SIGTERM of the leader stops it,
// releases the Lease, and the standby takes over with the pod untouched.
func TestHAStandbyAndSIGTERMHandover(t *testing.T) {
	const node = "kip-ha2"
	leader, standby, ns := haPair(t, node, 3)
	createPods(t, ns, node, "steady", 1)
	before := f.WaitForPods(t, ns, "app=steady", 1, 2*time.Minute, "Running on "+node, running)[0]
	cell := cellOf(t, leader, before.UID)
	agents := agentPids(leader, cell)
	assertStandby(t, standby)
	if pids := pluginChildren(leader); len(pids) != 1 {
		t.Errorf("the leader runs plugin processes %v, want one", pids)
	}

	stopped := time.Now()
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30 s of SIGTERM")
	}
	if log := readLog(t, leader); !strings.Contains(log, "leader election: released the lease") {
		t.Errorf("the leader's log does not say it released the Lease")
	}
	acquired := waitLeader(t, node, standby.Identity)
	t.Logf("handover: %s took the Lease %.1f s after the SIGTERM of %s", standby.Identity, acquired.Sub(stopped).Seconds(), leader.Identity)
	waitLogLine(t, standby, `msg="kip running"`)
	unchanged(t, leader, ns, &before, cell, agents)
	if pids := pluginChildren(standby); len(pids) != 1 {
		t.Errorf("the new leader runs plugin processes %v, want one", pids)
	}
}

// TestHAKeptLogsSurviveHandover: the log kip keeps of an ended pod is on
// the leader's own disk (an emptyDir in the Deployment); the standby
// mirrors it (host/keptlogs: the leader's admin server, read with the
// ServiceAccount kip-system/kip's token as deploy/rbac/kip-kept-logs.yaml
// allows), so that after the leader's SIGTERM the new leader serves it:
// kubectl logs of the ended pod still prints its line (issue 29: a
// rollout or a change of leader lost every kept log).
func TestHAKeptLogsSurviveHandover(t *testing.T) {
	const node, line = "kip-ha3", "KEPT-ACROSS-THE-HANDOVER"
	leader, standby, ns := haPair(t, node, 3)
	waitLogLine(t, standby, "made a copy of the leader's kept logs")
	spec := onNode(node, corev1.Container{Name: "say", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c", "echo " + line}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := createPod(t, ns, "said", spec)
	f.WaitForPods(t, ns, "app=said", 1, 3*time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	kept := filepath.Join(ns+"_said_"+string(pod.UID), "say.log")
	f.WaitFor(t, 60*time.Second, "the leader to keep the pod's log", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(leader.PodLogsDir, kept))
		return err == nil, nil
	})
	// The standby's copy, before the handover: a rollout stops the old
	// leader only once the new pod is ready, which a standby is only with
	// a copy; a log kept in the last second before a SIGTERM may miss it.
	f.WaitFor(t, 60*time.Second, "the standby's copy of the kept log", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(standby.PodLogsDir, kept))
		return err == nil, nil
	})
	if code, body := httpGet(t, standby.AdminURL()+"/readyz/kept-logs", ""); code != http.StatusOK {
		t.Errorf("the standby's readiness check kept-logs = %d %q, want 200 once it has a copy", code, body)
	}

	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30 s of SIGTERM")
	}
	// The old leader's kept logs are gone with its disk, as with its pod.
	if err := os.RemoveAll(leader.PodLogsDir); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, node, standby.Identity)
	waitLogLine(t, standby, `msg="kip running"`)
	var out string
	var code int
	f.WaitFor(t, 60*time.Second, "kubectl logs of the ended pod from the new leader", func(context.Context) (bool, error) {
		was := out
		out, code = kubectl(t, "logs", "-n", ns, "said")
		if code != 0 && out != was {
			t.Logf("kubectl logs: exit %d: %s", code, out)
		}
		return code == 0, nil
	})
	if out != line+"\n" {
		t.Errorf("kubectl logs of the ended pod after the handover = %q, want %q", out, line+"\n")
	}
}
