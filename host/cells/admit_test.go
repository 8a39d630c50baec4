package cells

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The kubelet's admission of privileged containers and sysctls, and its
// messages.
func TestAdmit(t *testing.T) {
	privileged := &corev1.SecurityContext{Privileged: ptr.To(true)}
	sysctls := func(names ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
			for _, n := range names {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
			}
		}
	}
	for _, tc := range []struct {
		name        string
		cfg         Config
		mutate      func(*corev1.Pod)
		reason, msg string
	}{
		{name: "plain pod", mutate: func(*corev1.Pod) {}},
		{name: "privileged container refused", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = privileged },
			reason: ReasonPrivilegedForbidden,
			msg:    `container "main" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`},
		{name: "privileged init container refused", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", SecurityContext: privileged}}
		}, reason: ReasonPrivilegedForbidden,
			msg: `container "setup" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`},
		{name: "privileged: false", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false)}
		}},
		{name: "privileged allowed", cfg: Config{AllowPrivileged: true}, mutate: func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = privileged }},
		{name: "safe sysctls", mutate: sysctls("kernel.shm_rmid_forced", "net.ipv4.ip_unprivileged_port_start", "net/ipv4/tcp_syncookies")},
		{name: "unsafe sysctl", mutate: sysctls("net.ipv4.tcp_syncookies", "net.core.somaxconn"),
			reason: ReasonSysctlForbidden, msg: `forbidden sysctl: "net.core.somaxconn" not allowlisted`},
		{name: "unsafe sysctl allowed by name", cfg: Config{AllowedUnsafeSysctls: []string{"net.core.somaxconn"}}, mutate: sysctls("net.core.somaxconn")},
		{name: "unsafe sysctl allowed by prefix", cfg: Config{AllowedUnsafeSysctls: []string{"kernel.msg*"}}, mutate: sysctls("kernel.msgmax")},
		{name: "net sysctl with hostNetwork", mutate: func(p *corev1.Pod) {
			sysctls("net.ipv4.ip_local_port_range")(p)
			p.Spec.HostNetwork = true
		}, reason: ReasonSysctlForbidden, msg: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{name: "ipc sysctl with hostIPC", mutate: func(p *corev1.Pod) {
			sysctls("kernel.shm_rmid_forced")(p)
			p.Spec.HostIPC = true
		}, reason: ReasonSysctlForbidden, msg: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("p", "uid-p")
			tc.mutate(pod)
			reason, msg, ok := newAdmission(tc.cfg).admit(pod)
			if ok != (tc.reason == "") || reason != tc.reason || msg != tc.msg {
				t.Errorf("admit = %q, %q, %v; want %q, %q", reason, msg, ok, tc.reason, tc.msg)
			}
		})
	}
}

// A pod the node does not admit fails at once, as the kubelet rejects it:
// no instance, phase Failed with the reason and "Pod was rejected: ...",
// and a Warning event; deleting it forgets it.
func TestRejectedPodFailsWithoutACell(t *testing.T) {
	h := newHarness(t)
	pod := newPod("priv", types.UID("uid-priv"))
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	p := h.waitNotified(t, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	const msg = `container "main" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`
	if p.Status.Reason != ReasonPrivilegedForbidden || p.Status.Message != "Pod was rejected: "+msg {
		t.Errorf("status = %q %q", p.Status.Reason, p.Status.Message)
	}
	eventually(t, "the event", func() bool {
		return strings.Contains(h.events(), "Warning PrivilegedForbidden "+msg)
	})
	if n := h.plugin.Calls("Launch"); n != 0 {
		t.Errorf("Launch called %d times for a rejected pod", n)
	}
	if err := h.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod forgotten", func() bool { _, err := h.m.GetPod(t.Context(), "default", "priv"); return err != nil })
	if n := h.plugin.Calls("Terminate"); n != 0 {
		t.Errorf("Terminate called %d times for a pod that never had a cell", n)
	}
}
