//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/test/syncbuf"
)

// ephemeral is the status of pod p's ephemeral container name, nil when
// it has none.
func ephemeral(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if s := &p.Status.EphemeralContainerStatuses[i]; s.Name == name {
			return s
		}
	}
	return nil
}

// TestKubectlDebug: kubectl debug --target adds an ephemeral container to
// a pod running on kip, as a user debugs a running pod: it runs in the
// target's PID namespace (ps shows the target's processes, in kubectl logs
// and kubectl exec), its status shows Running in
// ephemeralContainerStatuses, its events name it, kubectl debug -i
// attaches to another one. Those run with --profile=baseline: kubectl's
// default profile (general) adds SYS_PTRACE, which kip's admission
// refuses as Pod Security's baseline level does (unless
// cells.allowedCapabilities lists it); such a one never runs, nor does a
// privileged one (the sysadmin profile), and the pod runs on.
func TestKubectlDebug(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "dbg", onKip(sleeper()))
	f.WaitForPods(t, ns, "app=dbg", 1, 60*time.Second, "Running", running)

	// The target's command line, which only its PID namespace shows.
	const targetCmd = "while true; do sleep 1; done"
	out, code := kubectl(t, "debug", "-n", ns, "dbg", "--image="+cells.Images.Busybox.Ref, "--profile=baseline", "--target=main", "-c", "debugger",
		"--", "sh", "-c", "ps; sleep 1000")
	if code != 0 {
		t.Fatalf("kubectl debug: exit %d: %s", code, out)
	}
	p := f.WaitForPods(t, ns, "app=dbg", 1, 60*time.Second, "the debugger Running", func(p *corev1.Pod) bool {
		s := ephemeral(p, "debugger")
		return s != nil && s.State.Running != nil
	})[0]
	if s := ephemeral(&p, "debugger"); !strings.HasPrefix(s.ContainerID, "containerd://") || s.Ready || s.RestartCount != 0 {
		t.Errorf("debugger status = %+v, want a containerd ID, not ready, no restart", s)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the pod's own container after the debugger came: phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	f.WaitFor(t, 20*time.Second, "kubectl logs -c debugger to show the target's processes", func(context.Context) (bool, error) {
		out, _ := kubectl(t, "logs", "-n", ns, "dbg", "-c", "debugger")
		return strings.Contains(out, targetCmd), nil
	})
	if out, code := kubectl(t, "exec", "-n", ns, "dbg", "-c", "debugger", "--", "ps"); code != 0 || !strings.Contains(out, targetCmd) || !strings.Contains(out, "sleep 1000") {
		t.Errorf("ps in the debugger (exit %d):\n%s\nwant the target's %q and its own sleep", code, out, targetCmd)
	}
	// The target sees the debugger's processes too: the debugger joined
	// its PID namespace, not the other way round, but it is one.
	if out, _ := kubectl(t, "exec", "-n", ns, "dbg", "-c", "main", "--", "ps"); !strings.Contains(out, "sleep 1000") {
		t.Errorf("ps in the target:\n%s\nwant the debugger's sleep (one PID namespace)", out)
	}
	f.WaitFor(t, 20*time.Second, "the debugger's events", func(context.Context) (bool, error) {
		out, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=dbg",
			"-o", "custom-columns=REASON:.reason,PATH:.involvedObject.fieldPath")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "Started") && strings.Contains(l, "spec.ephemeralContainers{debugger}") {
				return true, nil
			}
		}
		return false, nil
	})

	// kubectl debug -i waits for the container and attaches to it: what
	// is typed reaches its cat, whose echo comes back.
	attach := exec.Command(filepath.Join(f.Cluster.BinDir, "kubectl"), "--kubeconfig", f.Cluster.Kubeconfig,
		"debug", "-i", "-n", ns, "dbg", "--image="+cells.Images.Busybox.Ref, "--profile=baseline", "--target=main", "-c", "typist", "--", "cat")
	stdin, err := attach.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	attached := &syncbuf.Buffer{}
	attach.Stdout, attach.Stderr = attached, attached
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = attach.Process.Kill(); _ = attach.Wait() })
	f.WaitForPods(t, ns, "app=dbg", 1, 60*time.Second, "the typist Running", func(p *corev1.Pod) bool {
		s := ephemeral(p, "typist")
		return s != nil && s.State.Running != nil
	})
	f.WaitFor(t, 30*time.Second, "the attached ephemeral container to echo its input", func(context.Context) (bool, error) {
		// Typed until seen: kubectl attaches a moment after the
		// container runs, and what came before is not echoed back.
		_, _ = stdin.Write([]byte("typed into debug\n"))
		return strings.Contains(attached.String(), "typed into debug"), nil
	})

	// The general profile (kubectl's default) adds SYS_PTRACE, the
	// sysadmin profile asks for a privileged container: kip's cells run
	// neither (cells.allowedCapabilities and cells.allowPrivileged as by
	// default). Refused, not run.
	for _, tt := range []struct{ profile, name, reason string }{
		{"general", "tracer", "CapabilityForbidden"},
		{"sysadmin", "root", "PrivilegedForbidden"},
	} {
		out, code = kubectl(t, "debug", "-n", ns, "dbg", "--image="+cells.Images.Busybox.Ref, "--profile="+tt.profile, "--target=main", "-c", tt.name,
			"--", "sleep", "1000")
		if code != 0 {
			t.Fatalf("kubectl debug --profile=%s: exit %d: %s", tt.profile, code, out)
		}
		p = f.WaitForPods(t, ns, "app=dbg", 1, 60*time.Second, "the "+tt.profile+" one refused", func(p *corev1.Pod) bool {
			s := ephemeral(p, tt.name)
			return s != nil && s.State.Terminated != nil
		})[0]
		if term := ephemeral(&p, tt.name).State.Terminated; term.Reason != tt.reason || term.ExitCode != 128 {
			t.Errorf("the %s profile's ephemeral container: %+v, want Terminated 128 %s", tt.profile, term, tt.reason)
		}
	}
	if s := ephemeral(&p, "debugger"); p.Status.Phase != corev1.PodRunning || s == nil || s.State.Running == nil {
		t.Errorf("after the refusals: phase %s, debugger %+v; want both running on", p.Status.Phase, s)
	}
}
