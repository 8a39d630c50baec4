package cells

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// admitCase is a pod (newPod, changed by mutate) and what the node's
// admission under cfg says of it: no reason when it runs.
type admitCase struct {
	name        string
	cfg         Config
	mutate      func(*corev1.Pod)
	reason, msg string
}

func (tc admitCase) run(t *testing.T) {
	t.Helper()
	t.Run(tc.name, func(t *testing.T) {
		pod := newPod("p", "uid-p")
		tc.mutate(pod)
		reason, msg, ok := newAdmission(tc.cfg).admit(pod)
		if ok != (tc.reason == "") || reason != tc.reason || msg != tc.msg {
			t.Errorf("admit = %q, %q, %v; want %q, %q", reason, msg, ok, tc.reason, tc.msg)
		}
	})
}

// The kubelet's admission of privileged containers and sysctls, and its
// messages; Pod Security baseline's rules for what would leave the pod
// (host namespaces, hostPath, added capabilities, procMount) with the
// settings that open them, and hostUsers: false, which a cell does not
// honour.
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
	hostPath := func(path string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes,
				corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}})
		}
	}
	// addCaps adds caps to the first container, or (i = -1) to an init
	// container.
	addCaps := func(i int, caps ...corev1.Capability) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			sc := &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
			if i < 0 {
				p.Spec.InitContainers = []corev1.Container{{Name: "setup", SecurityContext: sc}}
				return
			}
			p.Spec.Containers[i].SecurityContext = sc
		}
	}
	for _, tc := range []admitCase{
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
		{name: "net sysctl with hostNetwork", cfg: Config{AllowHostNetwork: true}, mutate: func(p *corev1.Pod) {
			sysctls("net.ipv4.ip_local_port_range")(p)
			p.Spec.HostNetwork = true
		}, reason: ReasonSysctlForbidden, msg: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{name: "ipc sysctl with hostIPC", mutate: func(p *corev1.Pod) {
			sysctls("kernel.shm_rmid_forced")(p)
			p.Spec.HostIPC = true
		}, reason: ReasonHostNamespaceForbidden,
			msg: `spec.hostIPC is true, and kip cells do not run pods in the instance's IPC namespace; forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{name: "hostNetwork refused", mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			reason: ReasonHostNamespaceForbidden,
			msg:    "spec.hostNetwork is true, and this node does not run pods in the instance's network namespace (kip's cells.allowHostNetwork is false)"},
		{name: "hostNetwork allowed", cfg: Config{AllowHostNetwork: true}, mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{name: "hostPID refused even with hostNetwork allowed", cfg: Config{AllowHostNetwork: true}, mutate: func(p *corev1.Pod) { p.Spec.HostPID = true },
			reason: ReasonHostNamespaceForbidden, msg: "spec.hostPID is true, and kip cells do not run pods in the instance's PID namespace"},
		{name: "hostIPC refused", mutate: func(p *corev1.Pod) { p.Spec.HostIPC = true },
			reason: ReasonHostNamespaceForbidden, msg: "spec.hostIPC is true, and kip cells do not run pods in the instance's IPC namespace"},
		{name: "hostUsers: false refused", mutate: func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) },
			reason: ReasonUserNamespaceForbidden,
			msg:    "spec.hostUsers is false, and kip cells do not run pods in user namespaces: the pod's root would be the cell's"},
		{name: "hostUsers: true", mutate: func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(true) }},
		{name: "hostPath refused", mutate: hostPath("/tmp"), reason: ReasonHostPathForbidden,
			msg: `volume "host" is a hostPath of "/tmp" (spec.volumes[1].hostPath.path), and this node mounts no host path into pods (kip's cells.allowedHostPaths is empty)`},
		{name: "hostPath under an allowed one", cfg: Config{AllowedHostPaths: []string{"/var/log"}}, mutate: hostPath("/var/log/app")},
		{name: "hostPath an allowed one", cfg: Config{AllowedHostPaths: []string{"/var/log"}}, mutate: hostPath("/var/log")},
		{name: "every hostPath allowed", cfg: Config{AllowedHostPaths: []string{"/"}}, mutate: hostPath("/etc")},
		{name: "hostPath beside an allowed one", cfg: Config{AllowedHostPaths: []string{"/var/log"}}, mutate: hostPath("/var/logs"),
			reason: ReasonHostPathForbidden, msg: `volume "host" is a hostPath of "/var/logs" (spec.volumes[1].hostPath.path), outside kip's cells.allowedHostPaths (/var/log)`},
		{name: "hostPath out of an allowed one through ..", cfg: Config{AllowedHostPaths: []string{"/var/log"}}, mutate: hostPath("/var/log/../../etc"),
			reason: ReasonHostPathForbidden, msg: `volume "host" is a hostPath of "/var/log/../../etc" (spec.volumes[1].hostPath.path), which is not an absolute, clean path (no "..", "." or "//")`},
		{name: "nfs of a server on the network", mutate: nfsVolume("10.0.0.5")},
		{name: "nfs of a server by name", mutate: nfsVolume("nfs.example.com")},
		{name: "nfs of the instance's metadata refused", mutate: nfsVolume("169.254.169.254"), reason: ReasonNFSServerForbidden,
			msg: `volume "share" is an NFS share of server "169.254.169.254" (spec.volumes[0].nfs.server), and it is a link-local address, where the cloud's instance metadata lives: the cell's agent mounts it from the instance's network, which the pod may not reach`},
		{name: "nfs of loopback refused", mutate: nfsVolume("127.0.0.1"), reason: ReasonNFSServerForbidden,
			msg: `volume "share" is an NFS share of server "127.0.0.1" (spec.volumes[0].nfs.server), and it is a loopback address, the instance itself: the cell's agent mounts it from the instance's network, which the pod may not reach`},
		{name: "nfs of localhost refused", mutate: nfsVolume("LocalHost."), reason: ReasonNFSServerForbidden,
			msg: `volume "share" is an NFS share of server "LocalHost." (spec.volumes[0].nfs.server), and it is the instance itself: the cell's agent mounts it from the instance's network, which the pod may not reach`},
		{name: "nfs of Azure's WireServer refused", mutate: nfsVolume("168.63.129.16"), reason: ReasonNFSServerForbidden,
			msg: `volume "share" is an NFS share of server "168.63.129.16" (spec.volumes[0].nfs.server), and it is Azure's WireServer, which only the instance may reach: the cell's agent mounts it from the instance's network, which the pod may not reach`},
		{name: "nfs of IPv6 loopback in brackets refused", mutate: nfsVolume("[::1]"), reason: ReasonNFSServerForbidden,
			msg: `volume "share" is an NFS share of server "[::1]" (spec.volumes[0].nfs.server), and it is a loopback address, the instance itself: the cell's agent mounts it from the instance's network, which the pod may not reach`},
		{name: "baseline capabilities", mutate: addCaps(0, "CHOWN", "NET_BIND_SERVICE", "sys_chroot")},
		{name: "NET_ADMIN refused", mutate: addCaps(0, "NET_ADMIN"), reason: ReasonCapabilityForbidden,
			msg: `container "main" adds capability NET_ADMIN (spec.containers[0].securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list`},
		{name: "NET_RAW refused in an init container", mutate: addCaps(-1, "NET_RAW"), reason: ReasonCapabilityForbidden,
			msg: `container "setup" adds capability NET_RAW (spec.initContainers[0].securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list`},
		{name: "CAP_SYS_ADMIN refused", mutate: addCaps(0, "CAP_SYS_ADMIN"), reason: ReasonCapabilityForbidden,
			msg: `container "main" adds capability CAP_SYS_ADMIN (spec.containers[0].securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list`},
		{name: "ALL refused", mutate: addCaps(0, "ALL"), reason: ReasonCapabilityForbidden,
			msg: `container "main" adds capability ALL (spec.containers[0].securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list`},
		{name: "NET_ADMIN allowed", cfg: Config{AllowedCapabilities: []string{"NET_ADMIN"}}, mutate: addCaps(0, "NET_ADMIN", "net_admin")},
		{name: "procMount Unmasked refused", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, reason: ReasonProcMountForbidden,
			msg: `container "main" asks for procMount Unmasked (spec.containers[0].securityContext.procMount), which needs hostUsers: false, and kip cells do not run pods in user namespaces: the container would see the cell's /proc and /sys unmasked`},
		{name: "procMount Default", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.DefaultProcMount)}
		}},
		{name: "every rule broken is said, the first one's reason", mutate: func(p *corev1.Pod) {
			hostPath("/")(p)
			p.Spec.HostNetwork = true
		}, reason: ReasonHostNamespaceForbidden,
			msg: "spec.hostNetwork is true, and this node does not run pods in the instance's network namespace (kip's cells.allowHostNetwork is false); " +
				`volume "host" is a hostPath of "/" (spec.volumes[1].hostPath.path), and this node mounts no host path into pods (kip's cells.allowedHostPaths is empty)`},
	} {
		tc.run(t)
	}
}

// Probes and lifecycle hooks with a host: the agent sends them from the
// instance's network, so Pod Security's baseline refusal (1.34 and later)
// is kip's too, unless cells.allowProbeHosts opens it.
func TestAdmitProbeHosts(t *testing.T) {
	for _, tc := range []admitCase{
		{name: "liveness probe with a host refused", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Path: "/latest/meta-data/"}}}
		}, reason: ReasonProbeHostForbidden,
			msg: `container "main" sends a probe or hook to host "169.254.169.254" (spec.containers[0].livenessProbe.httpGet.host), and the cell's agent, which sends it, reaches what the pod does not, such as the instance's metadata; without a host it goes to the pod's own address (kip's cells.allowProbeHosts is false)`},
		{name: "tcpSocket readiness probe and preStop hook of an init container with hosts refused", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1"}}},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "metadata.google.internal"}}}}}
		}, reason: ReasonProbeHostForbidden,
			msg: `container "sidecar" sends a probe or hook to host "10.0.0.1" (spec.initContainers[0].readinessProbe.tcpSocket.host), and the cell's agent, which sends it, reaches what the pod does not, such as the instance's metadata; without a host it goes to the pod's own address (kip's cells.allowProbeHosts is false); ` +
				`container "sidecar" sends a probe or hook to host "metadata.google.internal" (spec.initContainers[0].lifecycle.preStop.httpGet.host), and the cell's agent, which sends it, reaches what the pod does not, such as the instance's metadata; without a host it goes to the pod's own address (kip's cells.allowProbeHosts is false)`},
		{name: "probes and hooks without a host", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}}
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}},
		{name: "probe host allowed", cfg: Config{AllowProbeHosts: true}, mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}
		}},
	} {
		tc.run(t)
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

// nfsVolume gives the pod an inline nfs volume "share" of server.
func nfsVolume(server string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "share", VolumeSource: corev1.VolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: server, Path: "/srv"},
		}})
	}
}
