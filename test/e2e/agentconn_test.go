//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
	"github.com/kipcell/kip/test/e2e/framework"
)

// cellNetns returns the network namespace that has address ip (the local
// plugin and the simulators' cells give each cell its own), a cell's host
// IP: where its agent lives, apart from its pod's own namespace.
func cellNetns(t *testing.T, ip string) string {
	t.Helper()
	ns, err := localcells.Netns(t.Context(), ip)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestSilentCellIsNoticed: when a cell's agent traffic is dropped in its
// network namespace (no reset: the host's connection looks alive), the
// host's keep-alive notices within cells.agentKeepalive and its timeout
// (framework.AgentKeepalive, AgentKeepaliveTimeout) and
// re-subscribes; once the traffic flows again the pod is still Running
// with no restart and kubectl exec works.
func TestSilentCellIsNoticed(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "quiet", onKip(sleeper()))
	p := f.WaitForPods(t, ns, "app=quiet", 1, 90*time.Second, "running", running)[0]
	netns := cellNetns(t, p.Status.HostIP)
	port := fmt.Sprint(cellapi.Port)
	rules := [][]string{{"INPUT", "-p", "tcp", "--dport", port, "-j", "DROP"}, {"OUTPUT", "-p", "tcp", "--sport", port, "-j", "DROP"}}
	for _, r := range rules {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", netns, "iptables", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("dropping the agent's traffic: %v %s", err, out)
		}
	}
	undo := func() {
		for _, r := range rules {
			_ = exec.Command("ip", append([]string{"netns", "exec", netns, "iptables", "-D"}, r...)...).Run()
		}
	}
	defer undo()
	dropped := time.Now()
	before := len(logLines(t))
	bound := framework.AgentKeepalive + framework.AgentKeepaliveTimeout + 10*time.Second
	f.WaitFor(t, bound, "kip noticing the silent cell", func(context.Context) (bool, error) {
		for _, l := range logLines(t)[before:] {
			if strings.Contains(l, "status stream from cell broke") && strings.Contains(l, p.Name) {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("noticed after %v", time.Since(dropped).Round(time.Second))
	undo()
	f.WaitFor(t, 60*time.Second, "kubectl exec working again", func(context.Context) (bool, error) {
		_, code := kubectl(t, "exec", "-n", ns, "quiet", "--", "true")
		return code == 0, nil
	})
	p = *getPod(t, ns, "quiet")
	if p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("after the silence: phase %s, restarts %d; want Running, 0", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
}

// logLines returns kip's log so far, a line each.
func logLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(kip.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}
