package cell_test

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/cell/api"
)

// TestAgentSecurity: through real containerd and runc, a container runs
// as runAsUser with its groups and fsGroup, with a read-only root but a
// writable emptyDir owned by the fsGroup, with its capabilities, no_new_privs
// and RuntimeDefault seccomp, and a safe sysctl set in the pod's network
// namespace; an exec in it gets the same; its neighbour without settings
// runs as root with the runtime's defaults.
func TestAgentSecurity(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.61")
	sleep := []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "default", UID: "uid-sec"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1234), FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{5555},
				Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}},
			},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{
				{Name: "app", Image: e.img.Busybox.Ref, Command: sleep,
					VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
					SecurityContext: &corev1.SecurityContext{
						ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
						Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					}},
				{Name: "plain", Image: e.img.Busybox.Ref, Command: sleep, SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}},
				{Name: "priv", Image: e.img.Busybox.Ref, Command: sleep, SecurityContext: &corev1.SecurityContext{
					RunAsUser: ptr.To[int64](0), Privileged: ptr.To(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}},
			},
		},
	}
	e.applyPod(t, a, p, nil)
	watch(t, a, "both running", func(s *corev1.PodStatus) bool {
		return containerStatus(s, "app").State.Running != nil && containerStatus(s, "plain").State.Running != nil &&
			containerStatus(s, "priv").State.Running != nil
	})
	run := func(container, script string) string {
		t.Helper()
		out, errOut, code := execute(t, a, &api.ExecStart{Container: container, Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
		if code != 0 {
			t.Fatalf("%s: %q exited %d: %s%s", container, script, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	status := func(container string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, line := range strings.Split(run(container, "cat /proc/self/status"), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				out[k] = strings.TrimSpace(v)
			}
		}
		return out
	}

	if got := run("app", "id -u; id -g; id -G"); got != "1234\n0\n0 2000 5555" {
		t.Errorf("app: id -u, -g, -G = %q, want 1234, 0 and the groups 0 2000 5555", got)
	}
	if got := run("app", "touch /written 2>&1 || echo refused"); !strings.Contains(got, "Read-only file system") {
		t.Errorf("app: writing / = %q, want a read-only file system", got)
	}
	if got := run("app", "touch /scratch/f && stat -c '%g' /scratch/f && stat -c '%a %g' /scratch"); got != "2000\n2777 2000" {
		t.Errorf("app: the emptyDir's file group, dir mode and group = %q, want 2000, 2777 2000", got)
	}
	st := status("app")
	// A non-root process has no effective capabilities; its bounding set
	// is what the container was given: NET_BIND_SERVICE (bit 10) only.
	want := map[string]string{"CapBnd": "0000000000000400", "NoNewPrivs": "1", "Seccomp": "2"}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("app: %s = %q, want %q", k, st[k], v)
		}
	}
	if got := run("app", "cat /proc/sys/net/ipv4/ip_unprivileged_port_start"); got != "80" {
		t.Errorf("sysctl ip_unprivileged_port_start = %q, want 80", got)
	}

	if got := run("plain", "id -u; touch /written && echo wrote"); got != "0\nwrote" {
		t.Errorf("plain: %q, want root and a writable root", got)
	}
	st = status("plain")
	// containerd's default set: CHOWN DAC_OVERRIDE FOWNER FSETID KILL
	// SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT MKNOD
	// AUDIT_WRITE SETFCAP.
	want = map[string]string{"CapEff": "00000000a80425fb", "NoNewPrivs": "0", "Seccomp": "0"}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("plain: %s = %q, want %q", k, st[k], v)
		}
	}

	// Privileged, as containerd's CRI runs it (the agent's host decides
	// whether it may): every capability this process has, no seccomp
	// whatever the profile, writable /sys, nothing masked.
	st = status("priv")
	self := map[string]string{}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			self[k] = strings.TrimSpace(v)
		}
	}
	if st["CapEff"] != self["CapEff"] || st["Seccomp"] != "0" {
		t.Errorf("priv: CapEff %s (want this process's %s), Seccomp %s (want 0)", st["CapEff"], self["CapEff"], st["Seccomp"])
	}
	// (Its /sys is not checked: beside the unprivileged containers of
	// this pod it was read-only in some runs and writable in others,
	// depending on which started first; they share one network namespace
	// and so one sysfs. docs/security.md says so.)
	if got := run("priv", "grep -c ' /proc/kcore ' /proc/mounts || true"); got != "0" {
		t.Errorf("priv: the masked /proc/kcore mounts = %q, want none (nothing masked)", got)
	}
}

// TestAgentSeccompDefault: with the node's seccomp default on
// (ApplyPodRequest.seccomp_default, kip's cells.seccompDefault), a
// container that names no profile runs with the runtime's default one,
// and a container that names Unconfined runs without, as under a kubelet
// with seccompDefault: true.
func TestAgentSeccompDefault(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.62")
	sleep := []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "seccomp", Namespace: "default", UID: "uid-seccomp"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{
				{Name: "plain", Image: e.img.Busybox.Ref, Command: sleep},
				{Name: "open", Image: e.img.Busybox.Ref, Command: sleep, SecurityContext: &corev1.SecurityContext{
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}},
			},
		},
	}
	e.applyPodWith(t, a, p, &api.PodRequest{SeccompDefault: true})
	watch(t, a, "both running", func(s *corev1.PodStatus) bool {
		return containerStatus(s, "plain").State.Running != nil && containerStatus(s, "open").State.Running != nil
	})
	for container, want := range map[string]string{"plain": "Seccomp:\t2", "open": "Seccomp:\t0"} {
		out, errOut, code := execute(t, a, &api.ExecStart{Container: container, Command: []string{"grep", "^Seccomp:", "/proc/self/status"}, Stdout: true, Stderr: true})
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("%s: %q (exit %d, %s), want %q", container, out, code, errOut, want)
		}
	}
}
