package pod

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// debugged is p with an ephemeral container named debugger, as kubectl
// debug --target adds one (target "" for none).
func debugged(p *corev1.Pod, target string) *corev1.Pod {
	p = p.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "reg/busybox:v1", Command: []string{"sh"}, Stdin: true, TTY: true,
		},
		TargetContainerName: target,
	})
	return p
}

func ephemeralStatus(s corev1.PodStatus) *corev1.ContainerStatus {
	if len(s.EphemeralContainerStatuses) == 0 {
		return nil
	}
	return &s.EphemeralContainerStatuses[0]
}

func specNamed(rt *fakeRuntime, name string) []runtime.ContainerSpec {
	var out []runtime.ContainerSpec
	for _, s := range rt.startedSpecs() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func TestEphemeralContainer(t *testing.T) {
	tests := []struct {
		name   string
		target string
		// wantPIDNS is the PID namespace the debugger joins: the target's
		// (its task's /proc/<pid>/ns/pid), or its own.
		wantPIDNS func(rt *fakeRuntime) string
	}{
		{"with a target", "main", func(rt *fakeRuntime) string {
			return fmt.Sprintf("/proc/%d/ns/pid", rt.task("main-0", true).Pid())
		}},
		{"without a target", "", func(*fakeRuntime) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			m := newManager(t, rt)
			p := testPod(corev1.RestartPolicyAlways, "side", "main")
			apply(t, m, 1, p)
			waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
			if st := m.PodStatus(); st.EphemeralContainerStatuses != nil {
				t.Fatalf("ephemeral statuses before any: %+v", st.EphemeralContainerStatuses)
			}

			apply(t, m, 2, debugged(p, tt.target))
			st := waitStatus(t, m, "the debugger Running", func(s corev1.PodStatus) bool {
				e := ephemeralStatus(s)
				return e != nil && e.State.Running != nil
			})
			e := ephemeralStatus(st)
			if e.Name != "debugger" || e.ContainerID != "containerd://debugger-0" || e.Image != "reg/busybox:v1" || e.Ready || e.Started != nil {
				t.Errorf("debugger status = %+v, want containerd://debugger-0, not ready, started unset", e)
			}
			specs := specNamed(rt, "debugger")
			if len(specs) != 1 {
				t.Fatalf("debugger started %d times, want once", len(specs))
			}
			if got, want := specs[0].PIDNSPath, tt.wantPIDNS(rt); got != want {
				t.Errorf("PID namespace = %q, want %q", got, want)
			}
			if specs[0].NetNSPath != "/var/run/netns/test" || !specs[0].TTY || specs[0].Stdin == nil {
				t.Errorf("netns %q tty %v stdin %v, want the pod's, a tty and stdin", specs[0].NetNSPath, specs[0].TTY, specs[0].Stdin != nil)
			}
			if len(st.ContainerStatuses) != 2 || st.Phase != corev1.PodRunning {
				t.Errorf("the pod's containers changed: %+v", st.ContainerStatuses)
			}
			// Attach and logs reach it by name.
			at, err := m.Attach("debugger", true, false)
			if err != nil || !at.TTY || !at.Stdin {
				t.Errorf("Attach(debugger) = %+v, %v; want a tty with stdin", at, err)
			}
			if _, err := m.LogPath("debugger", false); err != nil {
				t.Errorf("LogPath(debugger): %v", err)
			}
			var evs []string
			for _, ev := range m.Events() {
				if ev.Container == "debugger" {
					evs = append(evs, ev.Reason)
				}
			}
			if want := []string{"Pulling", "Pulled", "Created", "Started"}; !slices.Equal(evs, want) {
				t.Errorf("debugger events = %v, want %v", evs, want)
			}

			// It exits with an error and is never restarted, even by a
			// later generation.
			rt.task("debugger-0", true).exit(3)
			st = waitStatus(t, m, "the debugger Terminated", func(s corev1.PodStatus) bool {
				e := ephemeralStatus(s)
				return e != nil && e.State.Terminated != nil
			})
			if term := ephemeralStatus(st).State.Terminated; term.ExitCode != 3 || term.Reason != "Error" {
				t.Errorf("terminated = %+v, want 3 Error", term)
			}
			pp := debugged(p, tt.target)
			pp.Labels = map[string]string{"new": "label"}
			apply(t, m, 3, pp)
			time.Sleep(5 * testBackoff.Max)
			if n := len(specNamed(rt, "debugger")); n != 1 {
				t.Errorf("debugger started %d times, want once", n)
			}
			if st := m.PodStatus(); st.Phase != corev1.PodRunning {
				t.Errorf("phase = %s after the debugger ended, want Running", st.Phase)
			}
			deletePod(t, m, time.Second)
		})
	}
}

// TestEphemeralContainerWaitsForItsTarget: a target that does not run
// keeps the debugger waiting, as the kubelet's getTargetID, and it starts
// once the target runs again.
func TestEphemeralContainerWaitsForItsTarget(t *testing.T) {
	rt := newFakeRuntime()
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyOnFailure, "main", "other")
	apply(t, m, 1, p)
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	rt.task("main-0", true).exit(0) // Completed: not restarted
	waitStatus(t, m, "main Terminated", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Terminated != nil })

	apply(t, m, 2, debugged(p, "main"))
	st := waitStatus(t, m, "the debugger waiting", func(s corev1.PodStatus) bool {
		e := ephemeralStatus(s)
		return e != nil && e.State.Waiting != nil && e.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := ephemeralStatus(st).State.Waiting.Message; msg != "unable to find target container main" {
		t.Errorf("waiting message = %q", msg)
	}
	if n := len(specNamed(rt, "debugger")); n != 0 {
		t.Errorf("debugger started %d times without its target", n)
	}
	deletePod(t, m, time.Second)
}

// TestEphemeralContainerAfterAgentRestart: a restarted agent takes over
// a running ephemeral container, as it does the pod's containers, and
// never starts it again, before or after it exits.
func TestEphemeralContainerAfterAgentRestart(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	p := testPod(corev1.RestartPolicyAlways, "main")
	first := newAgentManager(t, rt, dir)
	apply(t, first, 1, p)
	waitStatus(t, first, "Running", readyApp)
	apply(t, first, 2, debugged(p, "main"))
	waitStatus(t, first, "the debugger Running", func(s corev1.PodStatus) bool {
		e := ephemeralStatus(s)
		return e != nil && e.State.Running != nil
	})

	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	st := waitStatus(t, second, "Running", readyApp)
	if e := ephemeralStatus(st); e == nil || e.State.Running == nil || e.ContainerID != "containerd://debugger-0" {
		t.Errorf("debugger after the restart = %+v, want debugger-0 Running", e)
	}
	if _, err := second.Attach("debugger", true, false); err != nil {
		t.Errorf("Attach(debugger) after the restart: %v", err)
	}
	apply(t, second, 3, debugged(p, "main"))
	rt.task("debugger-0", true).exit(0)
	waitStatus(t, second, "the debugger Completed", func(s corev1.PodStatus) bool {
		e := ephemeralStatus(s)
		return e != nil && e.State.Terminated != nil && e.State.Terminated.Reason == "Completed"
	})
	time.Sleep(5 * testBackoff.Max)
	if n := len(specNamed(rt, "debugger")); n != 1 {
		t.Errorf("debugger started %d times, want once", n)
	}
	deletePod(t, second, time.Second)
}
