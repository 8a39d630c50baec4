package pod

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/cell/runtime"
)

// securityPod is a pod with one container "app", the pod's and the
// container's securityContext.
func securityPod(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{SecurityContext: psc, Containers: []corev1.Container{
			{Name: "app", Image: "reg/app:v1", SecurityContext: csc},
		}},
	}
}

// The kubelet's resolution, case by case: the container over the pod,
// the image's USER when nothing sets a user, groups, capabilities and the
// rest as the CRI receives them.
func TestContainerSecurity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		psc       *corev1.PodSecurityContext
		csc       *corev1.SecurityContext
		imageUser string
		// seccompDefault: the node's (Desired.SeccompDefault).
		seccompDefault bool
		want           runtime.Security
	}{
		{name: "nothing set, no USER: root", want: runtime.Security{User: "0"}},
		{name: "image USER uid", imageUser: "1000", want: runtime.Security{User: "1000"}},
		{name: "image USER uid:gid: the group is not used", imageUser: "1000:1000", want: runtime.Security{User: "1000"}},
		{name: "image USER name", imageUser: "nobody", want: runtime.Security{User: "nobody"}},
		{name: "image USER name:group", imageUser: "app:staff", want: runtime.Security{User: "app"}},
		{name: "pod runAsUser over the image", psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1234)}, imageUser: "nobody",
			want: runtime.Security{User: "1234"}},
		{name: "container runAsUser over the pod's",
			psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1234)}, csc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](5678)},
			want: runtime.Security{User: "5678"}},
		{name: "runAsGroup", psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1234), RunAsGroup: ptr.To[int64](3000)},
			want: runtime.Security{User: "1234:3000"}},
		{name: "runAsGroup alone: the image's user", psc: &corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](3000)}, imageUser: "nobody",
			want: runtime.Security{User: "nobody:3000"}},
		{name: "runAsGroup alone, no USER", csc: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](3000)},
			want: runtime.Security{User: "0:3000"}},
		{name: "fsGroup first, then supplementalGroups",
			psc:  &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3, 4}},
			want: runtime.Security{User: "0", SupplementalGroups: []int64{2000, 3, 4}}},
		{name: "supplementalGroupsPolicy Strict",
			psc:  &corev1.PodSecurityContext{SupplementalGroups: []int64{3}, SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyStrict)},
			want: runtime.Security{User: "0", SupplementalGroups: []int64{3}, StrictGroups: true}},
		{name: "capabilities", csc: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}},
			want: runtime.Security{User: "0", CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"ALL"}}},
		{name: "privileged", csc: &corev1.SecurityContext{Privileged: ptr.To(true)}, want: runtime.Security{User: "0", Privileged: true}},
		{name: "allowPrivilegeEscalation false", csc: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
			want: runtime.Security{User: "0", NoNewPrivs: true}},
		{name: "allowPrivilegeEscalation true", csc: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)},
			want: runtime.Security{User: "0"}},
		{name: "readOnlyRootFilesystem", csc: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			want: runtime.Security{User: "0", ReadOnlyRootfs: true}},
		{name: "seccomp RuntimeDefault of the pod",
			psc:  &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			want: runtime.Security{User: "0", Seccomp: runtime.SeccompRuntimeDefault}},
		{name: "seccomp Unconfined of the container over the pod's",
			psc:  &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			csc:  &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			want: runtime.Security{User: "0"}},
		{name: "no seccomp profile, the node's default: RuntimeDefault", seccompDefault: true,
			want: runtime.Security{User: "0", Seccomp: runtime.SeccompRuntimeDefault}},
		{name: "the pod's Unconfined over the node's default",
			psc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, seccompDefault: true,
			want: runtime.Security{User: "0"}},
		{name: "the container's Unconfined over the node's default",
			csc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, seccompDefault: true,
			want: runtime.Security{User: "0"}},
		{name: "privileged with the node's default: the profile is set, the runtime leaves it off",
			csc: &corev1.SecurityContext{Privileged: ptr.To(true)}, seccompDefault: true,
			want: runtime.Security{User: "0", Privileged: true, Seccomp: runtime.SeccompRuntimeDefault}},
		{name: "sysctls, slashes normalized",
			psc: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"},
				{Name: "net/ipv4/conf/eth0.100/rp_filter", Value: "1"}}},
			want: runtime.Security{User: "0", Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.conf.eth0/100.rp_filter": "1"}}},
		{name: "pod-only fields of a container are not the pod's", psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)},
			csc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, want: runtime.Security{User: "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, tc.csc)
			got, err := containerSecurity(pod, &pod.Spec.Containers[0], runtime.ImageConfig{User: tc.imageUser}, tc.seccompDefault)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(runtime.Security{}, "MaskedPaths", "ReadonlyPaths")); diff != "" {
				t.Errorf("security (-want +got):\n%s", diff)
			}
			if len(got.MaskedPaths) == 0 || len(got.ReadonlyPaths) == 0 {
				t.Errorf("masked %v, read-only %v: want the kubelet's defaults", got.MaskedPaths, got.ReadonlyPaths)
			}
		})
	}
}

func TestContainerSecurityProcMountUnmasked(t *testing.T) {
	pod := securityPod(nil, &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)})
	got, err := containerSecurity(pod, &pod.Spec.Containers[0], runtime.ImageConfig{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaskedPaths == nil || len(got.MaskedPaths) > 0 || got.ReadonlyPaths == nil || len(got.ReadonlyPaths) > 0 {
		t.Errorf("masked %v, read-only %v: want none (and not the runtime's)", got.MaskedPaths, got.ReadonlyPaths)
	}
	def := maskedPaths(nil)
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/sys/firmware"} {
		if !strings.Contains(strings.Join(def, " "), p) {
			t.Errorf("default masked paths %v lack %s", def, p)
		}
	}
}

// verifyRunAsNonRoot's cases and messages, word for word the kubelet's.
func TestRunAsNonRoot(t *testing.T) {
	nonRoot := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	for _, tc := range []struct {
		name      string
		psc       *corev1.PodSecurityContext
		csc       *corev1.SecurityContext
		imageUser string
		want      string
	}{
		{name: "not asked", imageUser: ""},
		{name: "runAsUser 0", psc: nonRoot, csc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)},
			want: `container's runAsUser breaks non-root policy (pod: "p_ns(uid-1)", container: app)`},
		{name: "runAsUser non-zero", psc: nonRoot, csc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}},
		{name: "runAsUser of the pod", psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](7)}},
		{name: "no USER", psc: nonRoot,
			want: `container has runAsNonRoot and image will run as root (pod: "p_ns(uid-1)", container: app)`},
		{name: "USER 0:0", psc: nonRoot, imageUser: "0:0",
			want: `container has runAsNonRoot and image will run as root (pod: "p_ns(uid-1)", container: app)`},
		{name: "USER name", psc: nonRoot, imageUser: "nobody",
			want: `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "p_ns(uid-1)", container: app)`},
		{name: "USER uid", psc: nonRoot, imageUser: "65534"},
		{name: "USER uid out of range", psc: nonRoot, imageUser: "4294967296",
			want: `container has runAsNonRoot and image has an invalid user id (4294967296). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: "p_ns(uid-1)", container: app)`},
		{name: "the container's false over the pod's true", psc: nonRoot, csc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
		{name: "the container's true", csc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			want: `container has runAsNonRoot and image will run as root (pod: "p_ns(uid-1)", container: app)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, tc.csc)
			_, err := containerSecurity(pod, &pod.Spec.Containers[0], runtime.ImageConfig{User: tc.imageUser}, false)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("error = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSeccompLocalhostRefused(t *testing.T) {
	pod := securityPod(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}, nil)
	_, err := containerSecurity(pod, &pod.Spec.Containers[0], runtime.ImageConfig{}, false)
	if err == nil || !strings.Contains(err.Error(), `"profiles/audit.json"`) || !strings.Contains(err.Error(), "not available on kip cells") {
		t.Errorf("error = %v, want the profile named and that cells lack it", err)
	}
}

func TestSecurityWarnings(t *testing.T) {
	pod := securityPod(&corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
		&corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}})
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{
		AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}}}
	want := []string{
		"seLinuxOptions of the pod are not applied: kip cells do not run SELinux",
		"hostUsers: false is not applied: kip cells do not run pods in user namespaces; the pod runs in the cell's",
		"appArmorProfile RuntimeDefault of container app is not applied: kip cells do not run AppArmor",
	}
	if diff := cmp.Diff(want, securityWarnings(pod)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if w := securityWarnings(securityPod(nil, nil)); len(w) > 0 {
		t.Errorf("a pod without securityContext: %v", w)
	}
}

func TestHostPortWarnings(t *testing.T) {
	pod := securityPod(nil, nil)
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 80}, {ContainerPort: 9090, HostPort: 9090}, {ContainerPort: 7070}}
	for _, tc := range []struct {
		name       string
		ownNetwork bool
		want       []string
	}{
		{"own network: every hostPort", true, []string{
			"hostPort 80 of container app is not mapped: kip cells do not forward the instance's ports; the container is reached at the pod's IP, port 8080",
			"hostPort 9090 of container app is not mapped: kip cells do not forward the instance's ports; the container is reached at the pod's IP, port 9090",
		}},
		{"the instance's network: a hostPort other than the containerPort", false, []string{
			"hostPort 80 of container app is not mapped: kip cells do not forward the instance's ports; the container is reached at the pod's IP, port 8080",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hostPortWarnings(pod, tc.ownNetwork)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
	if w := hostPortWarnings(securityPod(nil, nil), true); len(w) > 0 {
		t.Errorf("a pod without hostPorts: %v", w)
	}
}

// The manager: a container that breaks runAsNonRoot waits with
// CreateContainerConfigError and the kubelet's message and never starts;
// one with a user starts with it; a hostPort it does not map is a
// HostPortNotMapped warning.
func TestManagerSecurity(t *testing.T) {
	rt := newFakeRuntime()
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 80}}
	apply(t, m, 1, p)
	const msg = `container has runAsNonRoot and image will run as root (pod: "p_ns(uid-1)", container: app)`
	st := waitStatus(t, m, "CreateContainerConfigError", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError"
	})
	if got := st.ContainerStatuses[0].State.Waiting.Message; got != msg {
		t.Errorf("message = %q, want %q", got, msg)
	}
	waitEvent(t, m, "Failed", "Error: "+msg)
	waitEvent(t, m, ReasonSecurityNotHonoured, "seLinuxOptions of the pod")
	waitEvent(t, m, ReasonHostPortNotMapped, "hostPort 80 of container app is not mapped")
	if n := len(rt.startedNames()); n != 0 {
		t.Errorf("%d containers started", n)
	}
	deletePod(t, m, 0)

	rt = newFakeRuntime()
	m = newManager(t, rt)
	p = testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1234), FSGroup: ptr.To[int64](2000)}
	apply(t, m, 1, p)
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	sec := rt.startedSpecs()[0].Security
	if sec.User != "1234" || !cmp.Equal(sec.SupplementalGroups, []int64{2000}) {
		t.Errorf("started with user %q, groups %v; want 1234 and the fsGroup", sec.User, sec.SupplementalGroups)
	}
	deletePod(t, m, 0)
}

// fsGroup ownership as the kubelet sets it: group, group rw (ro for file
// volumes) and setgid directories; an emptyDir once, file volumes on
// every new payload.
func TestVolumeOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing a file's group to any group needs root")
	}
	dir := filepath.Join(t.TempDir(), "volumes")
	v := newVolumes(dir, nil, "", nil, slog.New(slog.DiscardHandler))
	pod := securityPod(&corev1.PodSecurityContext{FSGroup: ptr.To[int64](2345)}, nil)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	files := map[string]VolumeFiles{"cfg": {Files: map[string][]byte{"k": []byte("v"), "sub/f": []byte("x")}, Modes: map[string]uint32{"k": 0o600}}}
	v.sync(t.Context(), &Desired{Generation: 1, Pod: pod, Volumes: files})
	if len(v.errs) > 0 {
		t.Fatalf("setting up: %v", v.errs)
	}
	check := func(path string, mode os.FileMode) {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if gid := statGID(t, info); gid != 2345 {
			t.Errorf("%s: group %d, want 2345", path, gid)
		}
		if got := info.Mode() & (os.ModePerm | os.ModeSetgid); got != mode {
			t.Errorf("%s: mode %v, want %v", path, got, mode)
		}
	}
	check(filepath.Join(dir, "scratch"), os.ModeSetgid|0o777)
	check(filepath.Join(dir, "cfg"), os.ModeSetgid|0o755)
	check(filepath.Join(dir, "cfg", "k"), 0o640)
	check(filepath.Join(dir, "cfg", "sub", "f"), 0o644)
	// A new payload is owned before it is swapped in; an equal one is
	// recognised as equal despite the added group bits.
	files["cfg"].Files["k"] = []byte("v2")
	v.sync(t.Context(), &Desired{Generation: 2, Pod: pod, Volumes: files})
	check(filepath.Join(dir, "cfg", "k"), 0o640)
	ts, _ := os.Readlink(filepath.Join(dir, "cfg", dataLink))
	if !samePayload(filepath.Join(dir, "cfg", ts), files["cfg"].Files, files["cfg"].Modes, true) {
		t.Error("an owned payload is not recognised as the same")
	}
	if err := RemoveVolumes(dir); err != nil {
		t.Fatal(err)
	}
}

func statGID(t *testing.T, info os.FileInfo) uint32 {
	t.Helper()
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no stat of %s", info.Name())
	}
	return st.Gid
}
