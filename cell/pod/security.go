package pod

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kipcell/kip/cell/api/sysctl"
	"github.com/kipcell/kip/cell/runtime"
)

// ReasonSecurityNotHonoured is the Warning event of a pod that asks for a
// securityContext setting a cell does not apply (AppArmor, SELinux, user
// namespaces); the pod runs without it.
const ReasonSecurityNotHonoured = "SecurityContextNotHonoured"

// errSeccompLocalhost marks a Localhost seccomp profile, which a cell does
// not have: the kubelet reads those from its node's disk.
var errSeccompLocalhost = errors.New("seccomp profiles of type Localhost are not available on kip cells")

// containerSecurity resolves container c's security settings in pod as
// the kubelet does before it hands them to a CRI runtime
// (kuberuntime.determineEffectiveSecurityContext): the container's
// securityContext over the pod's, the image's USER (imageUser) when no
// runAsUser is set, fsGroup and supplementalGroups added to the groups,
// no_new_privs only for allowPrivilegeEscalation: false, the kubelet's
// masked and read-only paths, and the pod's sysctls. An error is the
// container's CreateContainerConfigError: runAsNonRoot that the user
// breaks (verifyRunAsNonRoot) or a seccomp profile the cell lacks.
// seccompDefault is the node's: RuntimeDefault for a container that names
// no profile (Desired.SeccompDefault).
func containerSecurity(pod *corev1.Pod, c *corev1.Container, img runtime.ImageConfig, seccompDefault bool) (runtime.Security, error) {
	eff := effectiveSecurityContext(pod, c)
	uid, username := imageUser(img.User)
	if err := verifyRunAsNonRoot(pod, c, eff, uid, username); err != nil {
		return runtime.Security{}, err
	}
	seccomp, err := seccompProfile(pod, c, seccompDefault)
	if err != nil {
		return runtime.Security{}, err
	}
	sec := runtime.Security{
		User:           userString(eff, uid, username),
		Privileged:     eff.Privileged != nil && *eff.Privileged,
		ReadOnlyRootfs: eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		// securitycontext.AddNoNewPrivileges: only when asked for.
		NoNewPrivs:    eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation,
		Seccomp:       seccomp,
		MaskedPaths:   maskedPaths(eff.ProcMount),
		ReadonlyPaths: readonlyPaths(eff.ProcMount),
	}
	if caps := eff.Capabilities; caps != nil {
		sec.CapAdd, sec.CapDrop = capabilityNames(caps.Add), capabilityNames(caps.Drop)
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			sec.SupplementalGroups = append(sec.SupplementalGroups, *psc.FSGroup)
		}
		sec.SupplementalGroups = append(sec.SupplementalGroups, psc.SupplementalGroups...)
		sec.StrictGroups = psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict
		for _, s := range psc.Sysctls {
			if sec.Sysctls == nil {
				sec.Sysctls = map[string]string{}
			}
			sec.Sysctls[sysctl.Normalize(s.Name)] = s.Value
		}
	}
	return sec, nil
}

// effectiveSecurityContext is the container's securityContext over the
// pod's (securitycontext.DetermineEffectiveSecurityContext): the pod
// gives runAsUser, runAsGroup, runAsNonRoot and seLinuxOptions, the
// container overrides each field it sets.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) *corev1.SecurityContext {
	eff := &corev1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff.RunAsUser, eff.RunAsGroup, eff.RunAsNonRoot, eff.SELinuxOptions = psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot, psc.SELinuxOptions
	}
	csc := c.SecurityContext
	if csc == nil {
		return eff
	}
	override(&eff.SELinuxOptions, csc.SELinuxOptions)
	override(&eff.Capabilities, csc.Capabilities)
	override(&eff.Privileged, csc.Privileged)
	override(&eff.RunAsUser, csc.RunAsUser)
	override(&eff.RunAsGroup, csc.RunAsGroup)
	override(&eff.RunAsNonRoot, csc.RunAsNonRoot)
	override(&eff.ReadOnlyRootFilesystem, csc.ReadOnlyRootFilesystem)
	override(&eff.AllowPrivilegeEscalation, csc.AllowPrivilegeEscalation)
	override(&eff.ProcMount, csc.ProcMount)
	return eff
}

// override sets *dst to the container's value when it sets one.
func override[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// imageUser is the image's USER as containerd's CRI reports it and the
// kubelet reads it (getUserFromImage, getImageUser): the part before ":"
// is a uid if numeric, else a user name; no USER is root. The group part
// is not used, as under the kubelet.
func imageUser(user string) (uid *int64, username string) {
	if user == "" {
		return new(int64), ""
	}
	name, _, _ := strings.Cut(user, ":")
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return nil, name
	}
	return &id, ""
}

// verifyRunAsNonRoot is the kubelet's check, with its messages.
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, eff *corev1.SecurityContext, uid *int64, username string) error {
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	podDesc := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podDesc, c.Name)
		}
		return nil
	}
	switch {
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, podDesc, c.Name)
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podDesc, c.Name)
	case uid != nil:
		if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
			return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
				*uid, math.MaxInt32, strings.Join(errs, "; "), podDesc, c.Name)
		}
	}
	return nil
}

// userString is the user the runtime runs the process as, as the kubelet
// and containerd's CRI make it (util.GenerateUserString): runAsUser, else
// the image's uid or user name, with ":runAsGroup" when that is set.
func userString(eff *corev1.SecurityContext, imageUID *int64, imageName string) string {
	var user string
	switch {
	case eff.RunAsUser != nil:
		user = strconv.FormatInt(*eff.RunAsUser, 10)
	case imageName != "":
		user = imageName
	case imageUID != nil:
		user = strconv.FormatInt(*imageUID, 10)
	}
	if eff.RunAsGroup != nil {
		user += ":" + strconv.FormatInt(*eff.RunAsGroup, 10)
	}
	return user
}

// seccompProfile is the container's seccomp profile, else the pod's,
// else the node's default: RuntimeDefault where fallback is set (the
// kubelet with seccompDefault: true, kuberuntime's fieldSeccompProfile),
// Unconfined otherwise (the kubelet's default).
func seccompProfile(pod *corev1.Pod, c *corev1.Container, fallback bool) (string, error) {
	var p *corev1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		p = psc.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil && fallback:
		return runtime.SeccompRuntimeDefault, nil
	case p == nil, p.Type == corev1.SeccompProfileTypeUnconfined:
		return runtime.SeccompUnconfined, nil
	case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		return runtime.SeccompRuntimeDefault, nil
	case p.Type == corev1.SeccompProfileTypeLocalhost:
		name := ""
		if p.LocalhostProfile != nil {
			name = *p.LocalhostProfile
		}
		return "", fmt.Errorf("seccomp profile %q: %w", name, errSeccompLocalhost)
	}
	return runtime.SeccompUnconfined, nil
}

func capabilityNames(caps []corev1.Capability) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		out = append(out, string(c))
	}
	return out
}

// maskedPaths and readonlyPaths are the kubelet's (securitycontext
// package): none with procMount Unmasked.
func maskedPaths(pm *corev1.ProcMountType) []string {
	if pm != nil && *pm == corev1.UnmaskedProcMount {
		return []string{}
	}
	paths := []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	for cpu := 0; ; cpu++ {
		p := fmt.Sprintf("/sys/devices/system/cpu/cpu%d", cpu)
		if _, err := os.Stat(p); err != nil {
			break
		}
		if _, err := os.Stat(p + "/thermal_throttle"); err == nil {
			paths = append(paths, p+"/thermal_throttle")
		}
	}
	return paths
}

func readonlyPaths(pm *corev1.ProcMountType) []string {
	if pm != nil && *pm == corev1.UnmaskedProcMount {
		return []string{}
	}
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// securityWarnings says what of pod's security settings a cell does not
// apply, one message each.
func securityWarnings(pod *corev1.Pod) []string {
	var out []string
	psc := pod.Spec.SecurityContext
	if psc != nil && psc.SELinuxOptions != nil {
		out = append(out, "seLinuxOptions of the pod are not applied: kip cells do not run SELinux")
	}
	if psc != nil && psc.AppArmorProfile != nil && psc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		out = append(out, fmt.Sprintf("appArmorProfile %s of the pod is not applied: kip cells do not run AppArmor", psc.AppArmorProfile.Type))
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		out = append(out, "hostUsers: false is not applied: kip cells do not run pods in user namespaces; the pod runs in the cell's")
	}
	forEachContainer(pod, func(c *corev1.Container) {
		if sc := c.SecurityContext; sc != nil {
			if sc.SELinuxOptions != nil {
				out = append(out, fmt.Sprintf("seLinuxOptions of container %s are not applied: kip cells do not run SELinux", c.Name))
			}
			if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
				out = append(out, fmt.Sprintf("appArmorProfile %s of container %s is not applied: kip cells do not run AppArmor", sc.AppArmorProfile.Type, c.Name))
			}
		}
		if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
			out = append(out, fmt.Sprintf("AppArmor profile %s of container %s is not applied: kip cells do not run AppArmor", v, c.Name))
		}
	})
	return out
}

// ReasonHostPortNotMapped is the Warning event of a pod whose container
// asks for a hostPort the cell does not forward to it.
const ReasonHostPortNotMapped = "HostPortNotMapped"

// hostPortWarnings says which of pod's hostPorts a cell does not map, one
// message each. A cell forwards nothing from its instance's address to
// the pod: a pod in a network namespace of its own (ownNetwork) is reached
// at its pod IP only, and one in the instance's namespace at the port it
// listens on, which is its hostPort only where the two are the same (with
// hostNetwork, the API server requires that).
func hostPortWarnings(pod *corev1.Pod, ownNetwork bool) []string {
	var out []string
	forEachContainer(pod, func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort == 0 || (!ownNetwork && p.HostPort == p.ContainerPort) {
				continue
			}
			out = append(out, fmt.Sprintf("hostPort %d of container %s is not mapped: kip cells do not forward the instance's ports; "+
				"the container is reached at the pod's IP, port %d", p.HostPort, c.Name, p.ContainerPort))
		}
	})
	return out
}

// forEachContainer calls fn for every init and app container of pod.
func forEachContainer(pod *corev1.Pod, fn func(*corev1.Container)) {
	for i := range pod.Spec.InitContainers {
		fn(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		fn(&pod.Spec.Containers[i])
	}
}
