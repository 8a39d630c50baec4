//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// agentPID returns the PID of the cell agent (kip-cell) in a cell's
// network namespace, or 0 when none runs there.
func agentPID(t *testing.T, netns string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", netns).Output()
	if err != nil {
		t.Fatalf("ip netns pids %s: %v", netns, err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil && filepath.Base(exe) == "kip-cell" {
			return pid
		}
	}
	return 0
}

var timedTick = regexp.MustCompile(`(?m)^(\S+) tick (\d+)$`)

// TestAgentRestart: kill -9 of the cell agent of a running pod leaves the
// pod Running with no restart. The agent is started again (by the local
// plugin; in the aws pass by the EC2 simulator's, which plays the
// instance's systemd) and takes the running container over: kubectl logs
// shows what it wrote after the kill, in the same log, and kubectl exec
// works.
func TestAgentRestart(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "steady", onKip(corev1.Container{
		Name: "main", Image: cells.Images.Busybox.Ref,
		Command: []string{"sh", "-c", `trap 'exit 0' TERM; i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.2; done`},
	}))
	p := f.WaitForPods(t, ns, "app=steady", 1, 90*time.Second, "running", running)[0]
	before := p.Status.ContainerStatuses[0]
	netns := cellNetns(t, p.Status.HostIP)
	pid := agentPID(t, netns)
	if pid == 0 {
		t.Fatalf("no kip-cell process in the cell's network namespace %s", netns)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	f.WaitFor(t, 60*time.Second, "a new agent in the cell", func(context.Context) (bool, error) {
		next := agentPID(t, netns)
		return next != 0 && next != pid, nil
	})

	// The container's output after the kill reaches the same log, which
	// still starts at tick 0: the container was not restarted.
	f.WaitFor(t, 60*time.Second, "kubectl logs showing lines written after the kill", func(context.Context) (bool, error) {
		out, code := kubectl(t, "logs", "-n", ns, "steady", "--timestamps")
		if code != 0 {
			return false, nil
		}
		ticks := timedTick.FindAllStringSubmatch(out, -1)
		if len(ticks) == 0 {
			return false, nil
		}
		last := -1
		for _, m := range ticks {
			n, _ := strconv.Atoi(m[2])
			if n <= last || (last == -1 && n != 0) {
				t.Fatalf("ticks out of order (%d after %d): the container restarted?\n%s", n, last, out)
			}
			last = n
		}
		at, err := time.Parse(time.RFC3339Nano, ticks[len(ticks)-1][1])
		return err == nil && at.After(killed.Add(time.Second)), nil
	})
	f.WaitFor(t, 60*time.Second, "kubectl exec", func(context.Context) (bool, error) {
		out, code := kubectl(t, "exec", "-n", ns, "steady", "--", "echo", "still here")
		return code == 0 && strings.TrimSpace(out) == "still here", nil
	})

	got := getPod(t, ns, "steady")
	after := got.Status.ContainerStatuses[0]
	if got.Status.Phase != corev1.PodRunning || after.RestartCount != 0 || after.ContainerID != before.ContainerID ||
		after.State.Running == nil || !after.State.Running.StartedAt.Equal(&before.State.Running.StartedAt) {
		t.Errorf("after the agent's restart: phase %s, container %+v; want Running and %+v", got.Status.Phase, after, before)
	}
}
