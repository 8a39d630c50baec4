package cells

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

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
)

// admission decides which pods the node runs, as the kubelet's admit
// handlers do, before a cell is launched for them.
type admission struct {
	allowPrivileged bool
	// sysctls are the exact names and prefixes (of "prefix*") of the
	// safe set and the allowed unsafe sysctls, each with its namespace.
	sysctls, prefixes map[string]sysctl.Namespace
}

func newAdmission(cfg Config) admission {
	a := admission{allowPrivileged: cfg.AllowPrivileged, sysctls: map[string]sysctl.Namespace{}, prefixes: map[string]sysctl.Namespace{}}
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

// admit says why pod may not run on the node, or ok.
func (a admission) admit(pod *corev1.Pod) (reason, message string, ok bool) {
	if !a.allowPrivileged {
		for _, c := range allContainers(pod) {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return ReasonPrivilegedForbidden, fmt.Sprintf(
					"container %q is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)", c.Name), false
			}
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			if err := a.validateSysctl(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
				return ReasonSysctlForbidden, fmt.Sprintf("forbidden sysctl: %v", err), false
			}
		}
	}
	return "", "", true
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

// allContainers lists the pod's init, app and ephemeral containers.
func allContainers(pod *corev1.Pod) []corev1.Container {
	out := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		out = append(out, corev1.Container(e.EphemeralContainerCommon))
	}
	return out
}

// reject fails a pod the node does not admit, without a cell, as a kubelet
// rejects one: a Warning event, phase Failed, the reason and "Pod was
// rejected: <message>". Its deletion has no instance to end.
func (c *cell) reject(reason, message string) {
	c.log.Warn("pod rejected", "reason", reason, "message", message)
	c.event(corev1.EventTypeWarning, reason, "%s", message)
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.Reason, st.Message = reason, "Pod was rejected: "+message
	})
}
