package cells

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/share"
	"github.com/kipcell/kip/cell/api/sysctl"
)

// Reasons of a pod the node does not admit: its phase becomes Failed with
// the reason and "Pod was rejected: <message>", and a Warning event with
// the reason says the message, as a kubelet rejects a pod (rejectPod).
const (
	// ReasonPrivilegedForbidden: a container asks to be privileged and
	// cells.allowPrivileged is false.
	ReasonPrivilegedForbidden = "PrivilegedForbidden"
	// ReasonSysctlForbidden: a sysctl neither safe nor allowed by
	// cells.allowedUnsafeSysctls (the kubelet's sysctl.ForbiddenReason).
	ReasonSysctlForbidden = "SysctlForbidden"
	// ReasonHostNamespaceForbidden: hostNetwork where
	// cells.allowHostNetwork is false, or hostPID or hostIPC, which a cell
	// does not give a pod (Pod Security baseline's host namespaces).
	ReasonHostNamespaceForbidden = "HostNamespaceForbidden"
	// ReasonHostPathForbidden: a hostPath volume outside
	// cells.allowedHostPaths (Pod Security baseline's hostPath volumes).
	ReasonHostPathForbidden = "HostPathForbidden"
	// ReasonCapabilityForbidden: a container adds a capability beyond
	// Pod Security baseline's list and cells.allowedCapabilities.
	ReasonCapabilityForbidden = "CapabilityForbidden"
	// ReasonProcMountForbidden: procMount Unmasked, which needs a user
	// namespace (the kubelet's validation) that a cell does not give.
	ReasonProcMountForbidden = "ProcMountForbidden"
	// ReasonUserNamespaceForbidden: hostUsers: false, which a cell does
	// not honour; the pod would run as the cell's root.
	ReasonUserNamespaceForbidden = "UserNamespaceForbidden"
	// ReasonProbeHostForbidden: a probe or lifecycle hook with a host,
	// which the cell's agent would call from outside the pod, where the
	// instance's metadata is reachable; Pod Security's baseline level
	// (1.34 and later) refuses it too. cells.allowProbeHosts opens it.
	ReasonProbeHostForbidden = "ProbeHostForbidden"
	// ReasonNFSServerForbidden: an nfs volume whose server is an address
	// only the instance reaches (loopback, link-local where the cloud's
	// metadata lives, Azure's WireServer: cell/api/share), which the
	// cell's agent would mount from the instance's network.
	ReasonNFSServerForbidden = "NFSServerForbidden"
)

// BaselineCapabilities are the capabilities a container may add under
// Pod Security's baseline level (policy.capabilities_allowed_1_0 of
// k8s.io/pod-security-admission): containerd's default set but NET_RAW.
// Adding any other needs cells.allowedCapabilities.
var BaselineCapabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// admission decides which pods the node runs, as the kubelet's admit
// handlers do, before a cell is launched for them.
type admission struct {
	allowPrivileged, allowHostNetwork, allowProbeHosts bool
	// capabilities are those containers may add: BaselineCapabilities
	// and cells.allowedCapabilities, normalized (capabilityName).
	capabilities map[string]bool
	// hostPaths are cells.allowedHostPaths.
	hostPaths []string
	// sysctls are the exact names and prefixes (of "prefix*") of the
	// safe set and the allowed unsafe sysctls, each with its namespace.
	sysctls, prefixes map[string]sysctl.Namespace
}

func newAdmission(cfg Config) admission {
	a := admission{
		allowPrivileged: cfg.AllowPrivileged, allowHostNetwork: cfg.AllowHostNetwork, allowProbeHosts: cfg.AllowProbeHosts,
		capabilities: map[string]bool{}, hostPaths: cfg.AllowedHostPaths,
		sysctls: map[string]sysctl.Namespace{}, prefixes: map[string]sysctl.Namespace{},
	}
	for _, c := range append(append([]string(nil), BaselineCapabilities...), cfg.AllowedCapabilities...) {
		a.capabilities[capabilityName(c)] = true
	}
	for _, p := range append(append([]string(nil), sysctl.Safe...), cfg.AllowedUnsafeSysctls...) {
		// Config.Validate refused the patterns that are not namespaced.
		ns, name, prefixed := sysctl.Pattern(p)
		if prefixed {
			a.prefixes[name] = ns
		} else {
			a.sysctls[name] = ns
		}
	}
	return a
}

// admit says why pod may not run on the node, or ok. A pod may break
// more than one rule: the reason is the first's, the message says each,
// "; " between them, every one naming the field.
func (a admission) admit(pod *corev1.Pod) (reason, message string, ok bool) {
	var reasons, messages []string
	refuse := func(r, format string, args ...any) {
		reasons, messages = append(reasons, r), append(messages, fmt.Sprintf(format, args...))
	}
	if !a.allowPrivileged {
		eachContainer(pod, func(_ string, c *corev1.Container) { a.admitPrivileged(c, refuse) })
	}
	a.admitHost(pod, refuse)
	eachContainer(pod, func(field string, c *corev1.Container) { a.admitContainer(field, c, refuse) })
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			if err := a.validateSysctl(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
				refuse(ReasonSysctlForbidden, "forbidden sysctl: %v", err)
			}
		}
	}
	if len(reasons) == 0 {
		return "", "", true
	}
	return reasons[0], strings.Join(messages, "; "), false
}

// admitPrivileged refuses a privileged container unless
// cells.allowPrivileged.
func (a admission) admitPrivileged(c *corev1.Container, refuse func(reason, format string, args ...any)) {
	if !a.allowPrivileged && c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		refuse(ReasonPrivilegedForbidden,
			"container %q is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)", c.Name)
	}
}

// admitContainer refuses what container c, at field, asks that the node
// does not give (but privileged: admitPrivileged): probe hosts, added
// capabilities, procMount Unmasked.
func (a admission) admitContainer(field string, c *corev1.Container, refuse func(reason, format string, args ...any)) {
	if !a.allowProbeHosts {
		for _, h := range probeHosts(field, c) {
			refuse(ReasonProbeHostForbidden,
				"container %q sends a probe or hook to host %q (%s), and the cell's agent, which sends it, reaches what the pod does not, such as the instance's metadata; without a host it goes to the pod's own address (kip's cells.allowProbeHosts is false)",
				c.Name, h.host, h.field)
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		return
	}
	if sc.Capabilities != nil {
		for _, add := range sc.Capabilities.Add {
			if !a.capabilities[capabilityName(string(add))] {
				refuse(ReasonCapabilityForbidden,
					"container %q adds capability %s (%s.securityContext.capabilities.add), which Pod Security's baseline level does not allow and kip's cells.allowedCapabilities does not list",
					c.Name, add, field)
			}
		}
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
		refuse(ReasonProcMountForbidden,
			"container %q asks for procMount Unmasked (%s.securityContext.procMount), which needs hostUsers: false, and kip cells do not run pods in user namespaces: the container would see the cell's /proc and /sys unmasked",
			c.Name, field)
	}
}

// admitHost refuses what would give pod the instance's namespaces, files
// or users: host namespaces, hostUsers: false and hostPath volumes.
func (a admission) admitHost(pod *corev1.Pod, refuse func(reason, format string, args ...any)) {
	if pod.Spec.HostNetwork && !a.allowHostNetwork {
		refuse(ReasonHostNamespaceForbidden,
			"spec.hostNetwork is true, and this node does not run pods in the instance's network namespace (kip's cells.allowHostNetwork is false)")
	}
	if pod.Spec.HostPID {
		refuse(ReasonHostNamespaceForbidden, "spec.hostPID is true, and kip cells do not run pods in the instance's PID namespace")
	}
	if pod.Spec.HostIPC {
		refuse(ReasonHostNamespaceForbidden, "spec.hostIPC is true, and kip cells do not run pods in the instance's IPC namespace")
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		refuse(ReasonUserNamespaceForbidden,
			"spec.hostUsers is false, and kip cells do not run pods in user namespaces: the pod's root would be the cell's")
	}
	for i, v := range pod.Spec.Volumes {
		if v.NFS != nil {
			if why := nfsServerRefused(v.NFS.Server); why != "" {
				refuse(ReasonNFSServerForbidden,
					"volume %q is an NFS share of server %q (spec.volumes[%d].nfs.server), and %s: the cell's agent mounts it from the instance's network, which the pod may not reach",
					v.Name, v.NFS.Server, i, why)
			}
		}
		if v.HostPath == nil {
			continue
		}
		if why := a.hostPathRefused(v.HostPath.Path); why != "" {
			refuse(ReasonHostPathForbidden, "volume %q is a hostPath of %q (spec.volumes[%d].hostPath.path), %s", v.Name, v.HostPath.Path, i, why)
		}
	}
}

// nfsServerRefused says why an inline nfs volume's server may not be
// mounted, or "". Only an address or localhost is known here; the agent
// checks every address a name resolves to before it mounts.
func nfsServerRefused(server string) string {
	host := strings.TrimSuffix(strings.ToLower(server), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "it is the instance itself"
	}
	addr, err := netip.ParseAddr(strings.Trim(server, "[]"))
	if err != nil {
		return ""
	}
	return share.Refused(addr)
}

// hostPathRefused says why p may not be a hostPath volume's path, or "".
// A path is allowed when it is one of cells.allowedHostPaths or under
// one; it must be absolute and clean, as the kernel resolves a ".." after
// a symbolic link where path.Clean would not.
func (a admission) hostPathRefused(p string) string {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "which is not an absolute, clean path (no \"..\", \".\" or \"//\")"
	}
	for _, allowed := range a.hostPaths {
		if allowed == "/" || p == allowed || strings.HasPrefix(p, allowed+"/") {
			return ""
		}
	}
	if len(a.hostPaths) == 0 {
		return "and this node mounts no host path into pods (kip's cells.allowedHostPaths is empty)"
	}
	return fmt.Sprintf("outside kip's cells.allowedHostPaths (%s)", strings.Join(a.hostPaths, ", "))
}

// capabilityName is c as a container runtime reads it: upper case,
// without CAP_.
func capabilityName(c string) string {
	return strings.TrimPrefix(strings.ToUpper(c), "CAP_")
}

// validateSysctl is the kubelet's patternAllowlist.validateSysctl, with
// its messages.
func (a admission) validateSysctl(name string, hostNet, hostIPC bool) error {
	name = sysctl.Normalize(name)
	check := func(ns sysctl.Namespace) error {
		if (ns == sysctl.IPCNamespace && hostIPC) || (ns == sysctl.NetNamespace && hostNet) {
			return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
		}
		return nil
	}
	if ns, found := a.sysctls[name]; found {
		return check(ns)
	}
	for p, ns := range a.prefixes {
		if strings.HasPrefix(name, p) {
			return check(ns)
		}
	}
	return fmt.Errorf("%q not allowlisted", name)
}

// probeHost is a host a probe or a lifecycle hook names, and its field.
type probeHost struct{ field, host string }

// probeHosts lists the hosts c's probes and lifecycle hooks name (httpGet
// and tcpSocket), as Pod Security's hostProbesAndHostLifecycle check reads
// them; field is c's path ("spec.containers[0]").
func probeHosts(field string, c *corev1.Container) []probeHost {
	var out []probeHost
	handler := func(at string, http *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction) {
		if http != nil && http.Host != "" {
			out = append(out, probeHost{field + "." + at + ".httpGet.host", http.Host})
		}
		if tcp != nil && tcp.Host != "" {
			out = append(out, probeHost{field + "." + at + ".tcpSocket.host", tcp.Host})
		}
	}
	for _, p := range []struct {
		at    string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if p.probe != nil {
			handler(p.at, p.probe.HTTPGet, p.probe.TCPSocket)
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []struct {
			at      string
			handler *corev1.LifecycleHandler
		}{{"lifecycle.postStart", l.PostStart}, {"lifecycle.preStop", l.PreStop}} {
			if h.handler != nil {
				handler(h.at, h.handler.HTTPGet, h.handler.TCPSocket)
			}
		}
	}
	return out
}

// eachContainer calls fn with each of the pod's init, app and ephemeral
// containers and its field path ("spec.containers[1]").
func eachContainer(pod *corev1.Pod, fn func(field string, c *corev1.Container)) {
	for i := range pod.Spec.InitContainers {
		fn(fmt.Sprintf("spec.initContainers[%d]", i), &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		fn(fmt.Sprintf("spec.containers[%d]", i), &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		fn(fmt.Sprintf("spec.ephemeralContainers[%d]", i), &c)
	}
}

// allContainers lists the pod's init, app and ephemeral containers.
func allContainers(pod *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	eachContainer(pod, func(_ string, c *corev1.Container) { out = append(out, *c) })
	return out
}

// reject fails a pod the node does not admit, without a cell, as a kubelet
// rejects one: a Warning event, phase Failed, the reason and "Pod was
// rejected: <message>". Its deletion has no instance to end.
func (c *cell) reject(reason, message string) {
	c.log().Warn("pod rejected", "reason", reason, "message", message)
	c.event(corev1.EventTypeWarning, reason, "%s", message)
	c.enter(phaseEnded) // it never had an instance
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.Reason, st.Message = reason, "Pod was rejected: "+message
	})
}
