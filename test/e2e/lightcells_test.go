//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/test/e2e/framework"
)

// lightNode is the kip node TestLightCells runs, beside the shared node
// "kip".
const lightNode = "kip-light"

// TestLightCells runs a burst of pods on a kip of its own whose cells are
// light cells (framework.KipOptions.LightCells: the real agent over a
// runtime whose containers run no process, all hosted by one
// kip-light-cells process, each cell's process a kip-light-stub the local
// plugin runs in the cell's network namespace; behind the pass's
// simulator in the aws, gce and azure passes): every pod gets a cell and
// runs, a container that exits ends its pod Succeeded, logs and exec go
// through the light cell, and once the pods are deleted every cell is
// gone, stub and all.
func TestLightCells(t *testing.T) {
	const burst = 50
	ctx := t.Context()
	k := startSideKip(t, framework.KipOptions{
		NodeName: lightNode, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-light", Network: 2, LightCells: true,
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the light cells' log (%s):\n%s\nagent logs of the cells still there:\n%s",
				k.LightCellsLog, k.LightCellsLogTail(40), k.AgentLogTails(15))
		}
	})
	ns := f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, k, ns) })

	start := time.Now()
	for i := range burst {
		createPod(t, ns, fmt.Sprintf("light-%02d", i), onNode(lightNode, sleeper()))
	}
	f.WaitFor(t, 5*time.Minute, fmt.Sprintf("%d pods Running on %s", burst, lightNode), func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // try again
		}
		up := 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName == lightNode && running(&list.Items[i]) {
				up++
			}
		}
		return up == burst, nil
	})
	t.Logf("%d pods Running on light cells %.1fs after the first was created", burst, time.Since(start).Seconds())
	if n := len(cellDirs(k)); n != burst {
		t.Errorf("%d cells for %d pods", n, burst)
	}

	// The container's command line is its log; exec echoes.
	out, code := kubectl(t, "-n", ns, "logs", "light-00")
	if code != 0 || !strings.Contains(out, "trap 'exit 0' TERM") {
		t.Errorf("kubectl logs light-00 = %q, exit %d; want the container's command line", out, code)
	}
	out, code = kubectl(t, "-n", ns, "exec", "light-00", "--", "echo", "hello")
	if code != 0 || strings.TrimSpace(out) != "echo hello" {
		t.Errorf("kubectl exec light-00 -- echo hello = %q, exit %d; want the light cell's echo", out, code)
	}

	// A container that exits ends its pod.
	done := onNode(lightNode, corev1.Container{Name: "main", Image: cells.Images.Busybox.Ref, Command: []string{"exit", "0"}})
	done.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, ns, "light-done", done)
	f.WaitFor(t, 2*time.Minute, "pod light-done Succeeded", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, "light-done", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil //nolint:nilerr // try again
	})

	start = time.Now()
	if err := f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 3*time.Minute, "every light cell gone", func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(cellDirs(k)) == 0 && stubs(k) == 0, nil //nolint:nilerr // try again
	})
	t.Logf("%d pods and their light cells gone %.1fs after the delete", burst+1, time.Since(start).Seconds())
}

// stubs counts the kip-light-stub processes of k's cells.
func stubs(k *framework.Kip) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "kip-light-stub") && strings.Contains(string(cmdline), k.Dir+"/") {
			n++
		}
	}
	return n
}
