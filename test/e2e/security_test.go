//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/cell/podnet"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
	"github.com/kipcell/kip/test/e2e/framework"
	"github.com/kipcell/kip/test/images"
)

// The security context, as a kubelet applies it: who a container runs as,
// what it may write, and what the node refuses.

// withScratch gives spec an emptyDir "scratch" at /scratch in container main.
func withScratch(spec corev1.PodSpec) corev1.PodSpec {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	return spec
}

// TestSecurityRunAsUser: runAsUser applies (id -u prints 1234, as does an
// exec), the supplemental groups and the fsGroup are the process's groups,
// and the emptyDir belongs to the fsGroup.
func TestSecurityRunAsUser(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := withScratch(onKip(sleeper()))
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1234), SupplementalGroups: []int64{5555}, FSGroup: ptr.To[int64](2000),
	}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runas"}, Spec: spec})
	if got := strings.TrimSpace(inPod(t, ns, "runas", "id -u")); got != "1234" {
		t.Errorf("id -u = %q, want 1234", got)
	}
	groups := strings.Fields(inPod(t, ns, "runas", "id -G"))
	for _, g := range []string{"2000", "5555"} {
		if !strings.Contains(" "+strings.Join(groups, " ")+" ", " "+g+" ") {
			t.Errorf("id -G = %v, want the fsGroup and supplemental group %s among them", groups, g)
		}
	}
	if got := strings.TrimSpace(inPod(t, ns, "runas", "touch /scratch/f && stat -c '%g' /scratch/f")); got != "2000" {
		t.Errorf("a new file in the emptyDir has group %q, want the fsGroup 2000", got)
	}
}

// TestSecurityRunAsNonRoot: an image that runs as root under runAsNonRoot
// is refused: the container waits with CreateContainerConfigError and the
// kubelet's message, and a Failed event says it.
func TestSecurityRunAsNonRoot(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := onKip(sleeper())
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nonroot", Labels: map[string]string{"pod": "nonroot"}}, Spec: spec}
	created := f.CreatePod(t, ns, pod)
	got := f.WaitForPods(t, ns, "pod=nonroot", 1, 90*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
				return true
			}
		}
		return false
	})
	want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: main)",
		fmt.Sprintf("nonroot_%s(%s)", ns, created.UID))
	if msg := got[0].Status.ContainerStatuses[0].State.Waiting.Message; msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
	if got[0].Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", got[0].Status.Phase)
	}
	f.WaitFor(t, 30*time.Second, "the Failed event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "nonroot"), "Warning Failed Error: "+want), nil
	})
}

// TestSecurityReadOnlyRoot: with readOnlyRootFilesystem, writing / fails
// and writing an emptyDir works.
func TestSecurityReadOnlyRoot(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := withScratch(onKip(sleeper()))
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
	runPod(t, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "readonly"}, Spec: spec})
	if got := inPod(t, ns, "readonly", "touch /written 2>&1; echo exit=$?"); !strings.Contains(got, "Read-only file system") || strings.Contains(got, "exit=0") {
		t.Errorf("writing / = %q, want it refused as a read-only file system", got)
	}
	if got := strings.TrimSpace(inPod(t, ns, "readonly", "echo hi > /scratch/f && cat /scratch/f")); got != "hi" {
		t.Errorf("writing the emptyDir = %q, want hi", got)
	}
}

// TestSecurityPrivilegedRefused: a privileged container on a node that
// does not allow them (cells.allowPrivileged false, the default) is
// rejected as a kubelet rejects a pod: Failed, reason PrivilegedForbidden,
// "Pod was rejected: ..." naming the container and the setting, and a
// Warning event; no cell is launched for it.
func TestSecurityPrivilegedRefused(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	ctr := sleeper()
	ctr.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Labels: map[string]string{"pod": "privileged"}}, Spec: onKip(ctr)}
	f.CreatePod(t, ns, pod)
	got := f.WaitForPods(t, ns, "pod=privileged", 1, 60*time.Second, "Failed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})
	const msg = `container "main" is privileged, and this node does not run privileged containers (kip's cells.allowPrivileged is false)`
	if st := got[0].Status; st.Reason != "PrivilegedForbidden" || st.Message != "Pod was rejected: "+msg {
		t.Errorf("status reason %q, message %q; want PrivilegedForbidden and %q", st.Reason, st.Message, "Pod was rejected: "+msg)
	}
	f.WaitFor(t, 30*time.Second, "the PrivilegedForbidden event", func(context.Context) (bool, error) {
		return strings.Contains(podEvents(t, ns, "privileged"), "Warning PrivilegedForbidden "+msg), nil
	})
	if ev := podEvents(t, ns, "privileged"); strings.Contains(ev, "LaunchingCell") {
		t.Errorf("a cell was launched for the rejected pod:\n%s", ev)
	}
}

// TestSecurityBaselineRefused: what would reach past the pod, into the
// cell's network, its kernel's knobs or (with the local plugin) this
// machine's files, is refused before any launch, as Pod Security's
// baseline level refuses it: each pod Failed with its reason, a message
// naming the field and the setting that would open it, and a Warning
// event; no cell is launched. These pods ran, on the host's /tmp, the
// cell's network namespace and an unmasked /proc, before kip refused them
// (issue 28).
func TestSecurityBaselineRefused(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	withCaps := func(caps ...corev1.Capability) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
		}
	}
	cases := []struct {
		name, reason, field string
		mutate              func(*corev1.PodSpec)
	}{
		{name: "hostpath", reason: "HostPathForbidden", field: "spec.volumes[0].hostPath.path", mutate: func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		}},
		{name: "net-admin", reason: "CapabilityForbidden", field: "spec.containers[0].securityContext.capabilities.add", mutate: withCaps("NET_ADMIN")},
		{name: "net-raw", reason: "CapabilityForbidden", field: "spec.containers[0].securityContext.capabilities.add", mutate: withCaps("NET_RAW")},
		{name: "unmasked", reason: "UserNamespaceForbidden", field: "spec.hostUsers", mutate: func(s *corev1.PodSpec) {
			s.HostUsers = ptr.To(false)
			s.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}},
		{name: "host-network", reason: "HostNamespaceForbidden", field: "spec.hostNetwork", mutate: func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{name: "host-pid", reason: "HostNamespaceForbidden", field: "spec.hostPID", mutate: func(s *corev1.PodSpec) { s.HostPID = true }},
		{name: "host-ipc", reason: "HostNamespaceForbidden", field: "spec.hostIPC", mutate: func(s *corev1.PodSpec) { s.HostIPC = true }},
		{name: "probe-host", reason: "ProbeHostForbidden", field: "spec.containers[0].livenessProbe.httpGet.host", mutate: func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "169.254.169.254", Path: "/latest/meta-data/iam/security-credentials/", Port: intstr.FromInt32(80)}}}
		}},
	}
	for _, tc := range cases {
		spec := onKip(sleeper())
		tc.mutate(&spec)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Labels: map[string]string{"pod": tc.name}}, Spec: spec}
		f.CreatePod(t, ns, pod)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := f.WaitForPods(t, ns, "pod="+tc.name, 1, 60*time.Second, "Failed", func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodFailed
			})
			st := got[0].Status
			if st.Reason != tc.reason || !strings.HasPrefix(st.Message, "Pod was rejected: ") || !strings.Contains(st.Message, tc.field) {
				t.Errorf("status reason %q, message %q; want %s and a message naming %s", st.Reason, st.Message, tc.reason, tc.field)
			}
			f.WaitFor(t, 30*time.Second, "the "+tc.reason+" event", func(context.Context) (bool, error) {
				ev := podEvents(t, ns, tc.name)
				return strings.Contains(ev, "Warning "+tc.reason+" ") && strings.Contains(ev, tc.field), nil
			})
			if ev := podEvents(t, ns, tc.name); strings.Contains(ev, "LaunchingCell") {
				t.Errorf("a cell was launched for the rejected pod:\n%s", ev)
			}
		})
	}
}

// TestSubPathCannotLeaveItsVolume: an init container leaves a symlink to
// the machine's /tmp in an emptyDir, and the app container mounts a
// missing subPath below it. The agent creates a missing subPath of an
// emptyDir, as the kubelet does; through the symlink that would make a
// directory on the cell's (with the local plugin, this machine's) file
// system before any check refused the mount. The container is refused
// (CreateContainerConfigError, naming the subPath), and nothing is created
// outside the volume. The symlink swap between the agent's check and
// runc's mount is cell/pod's TestSubPathCannotBeRedirected: a race an e2e
// test cannot time.
func TestSubPathCannotLeaveItsVolume(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	outside := "/tmp/kip-e2e-subpath-escape-" + ns
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	app := sleeper()
	app.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/escape", SubPath: "out/" + filepath.Base(outside)}}
	spec := onKip(app)
	spec.InitContainers = []corev1.Container{{Name: "link", Image: cells.Images.Busybox.Ref,
		Command:      []string{"ln", "-s", "/tmp", "/shared/out"},
		VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}}}
	spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "subpath-escape", Labels: map[string]string{"pod": "subpath-escape"}}, Spec: spec}
	f.CreatePod(t, ns, pod)
	got := f.WaitForPods(t, ns, "pod=subpath-escape", 1, 90*time.Second, "the app container refused its mount", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
				return true
			}
		}
		return false
	})[0]
	w := got.Status.ContainerStatuses[0].State.Waiting
	if !strings.Contains(w.Message, "leaves the volume") || !strings.Contains(w.Message, "out/"+filepath.Base(outside)) {
		t.Errorf("the container waits with %q, want a message saying its subPath leaves the volume", w.Message)
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Errorf("the cell's agent created %s on the machine, through the pod's symlink", outside)
	}
}

// TestCellSizeBoundsItsPod: a pod's containers run inside its cell's
// cgroup, so the instance type's memory bounds the pod, as an instance's
// does, and not only the cell's agent. The pod asks for nothing (the
// smallest type of the local plugin, local.nano, 256 MiB, unless the run's
// catalog is another) and allocates 400 MB without a
// limit of its own: it is OOMKilled. Before, the local plugin's containers
// ran in containerd's default cgroup, beside the cell, and it finished.
func TestCellSizeBoundsItsPod(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	spec := onKip(corev1.Container{Name: "hog", Image: cells.Images.Busybox.Ref,
		// tail holds its whole input when it has no newline.
		Command: []string{"sh", "-c", "head -c 400000000 /dev/zero | tail >/dev/null && echo finished"}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Labels: map[string]string{"pod": "hog"}}, Spec: spec}
	f.CreatePod(t, ns, pod)
	got := f.WaitForPods(t, ns, "pod=hog", 1, 2*time.Minute, "ended", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	})[0]
	typ := got.Annotations["cell.kipcell.io/instance-type"]
	term := got.Status.ContainerStatuses[0].State.Terminated
	if got.Status.Phase != corev1.PodFailed || term == nil || term.Reason != "OOMKilled" {
		t.Errorf("the pod ended %s on %s, its container %+v; want Failed, OOMKilled: the cell's size did not bound it", got.Status.Phase, typ, term)
	}
}

// TestOOMKilledContainerRestarts: a container that allocates past its own
// memory limit ends OOMKilled, exit code 137, as kubectl shows it, its
// restart policy applies (restartCount grows under Always), and the cell's
// agent is untouched: the same process before and after, still reporting.
// The pod's other container, which asks for nothing, has the kubelet's OOM
// score adjustment for it in a Burstable pod (999), well above the
// agent's, so that the kernel's OOM killer takes the pod's processes
// first (issue 29: the agent and the pod shared one cgroup, and the
// kernel killed the agent).
func TestOOMKilledContainerRestarts(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	createPod(t, ns, "oom", onKip(
		corev1.Container{Name: "hog", Image: cells.Images.Busybox.Ref,
			// Running a while first, for the agent to be found; tail
			// holds its whole input when it has no newline.
			Command:   []string{"sh", "-c", "sleep 3; head -c 200000000 /dev/zero | tail >/dev/null && echo finished"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}},
		corev1.Container{Name: "steady", Image: cells.Images.Busybox.Ref, Command: []string{"sh", "-c", "cat /proc/self/oom_score_adj; sleep 1000"}},
	))
	status := func(p corev1.Pod, name string) corev1.ContainerStatus {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == name {
				return cs
			}
		}
		return corev1.ContainerStatus{}
	}
	p := f.WaitForPods(t, ns, "app=oom", 1, 2*time.Minute, "running", running)[0]
	netns := cellNetns(t, p.Status.HostIP)
	pid := agentPID(t, netns)
	if pid == 0 {
		t.Fatalf("no kip-cell process in the cell's network namespace %s", netns)
	}
	p = f.WaitForPods(t, ns, "app=oom", 1, 2*time.Minute, "hog restarted twice", func(p *corev1.Pod) bool {
		return status(*p, "hog").RestartCount >= 2
	})[0]
	if lt := status(p, "hog").LastTerminationState.Terminated; lt == nil || lt.Reason != "OOMKilled" || lt.ExitCode != 137 {
		t.Errorf("hog's last termination = %+v, want OOMKilled, exit code 137", lt)
	}
	if out, _ := kubectl(t, "-n", ns, "get", "pod", "oom", "-o", `jsonpath={.status.containerStatuses[?(@.name=="hog")].lastState.terminated.reason}`); strings.TrimSpace(out) != "OOMKilled" {
		t.Errorf("kubectl shows hog's last termination's reason %q, want OOMKilled", out)
	}
	if st := status(p, "steady"); st.RestartCount != 0 || st.State.Running == nil {
		t.Errorf("steady = %+v, want running, never restarted", st)
	}
	if out, _ := kubectl(t, "-n", ns, "logs", "oom", "-c", "steady"); strings.TrimSpace(out) != "999" {
		t.Errorf("steady's oom_score_adj = %q, want 999 (Burstable, no memory request)", out)
	}
	if now := agentPID(t, netns); now != pid {
		t.Errorf("the cell's agent is process %d, was %d: it was killed", now, pid)
	}
}

// TestPodGetsItsAddressFromThePlugin: the pod's IP is the address its
// plugin gives its instance for it (pluginapi.AddressPod: the local
// plugin's second address; in a cloud's pass the address the plugin asks
// the cloud for, an EC2 secondary private address, a GCE alias IP, an
// Azure secondary IP configuration, which the simulator gives from the
// local cell's), not its host IP; the pod holds it on its own eth0, and
// the cell's namespace, which holds the host IP, does not. What the pod
// can and cannot do in its namespace is TestPodHasItsOwnNetwork's, in the
// full pass.
func TestPodGetsItsAddressFromThePlugin(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "addressed", Labels: map[string]string{"pod": "addressed"}}, Spec: onNode(kip.NodeName, sleeper())}
	f.CreatePod(t, ns, pod)
	p := f.WaitForPods(t, ns, "pod=addressed", 1, 2*time.Minute, "Running", running)[0]
	podIP, hostIP := p.Status.PodIP, p.Status.HostIP
	if podIP == "" || podIP == hostIP {
		t.Fatalf("pod IP %q, host IP %q: want the address the plugin gave the pod", podIP, hostIP)
	}
	if out, code := kubectl(t, "exec", "-n", ns, "addressed", "--", "ip", "-o", "-4", "addr", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, " "+podIP+"/32 ") {
		t.Errorf("the pod's eth0 (exit %d):\n%s\nwant %s/32", code, out, podIP)
	}
	cellNS := cellNetns(t, hostIP)
	addrs, err := exec.Command("ip", "-n", cellNS, "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(addrs))
	}
	if strings.Contains(string(addrs), " "+podIP+"/") {
		t.Errorf("the cell's namespace %s holds the pod's address %s:\n%s", cellNS, podIP, addrs)
	}
}

// metadataRequests is, for each cloud, the request by which a workload
// takes its instance's credentials from the metadata: EC2's IMDSv2 token
// (which every other path needs), the identity token of the instance's
// Compute Engine service account, Azure's VM ID (the simulated VMs have no
// managed identity to take a token for).
var metadataRequests = map[string]string{
	framework.PluginAWS: "PUT /latest/api/token HTTP/1.0\r\nHost: 169.254.169.254\r\n" +
		"X-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n",
	framework.PluginGCE: "GET /computeMetadata/v1/instance/service-accounts/default/identity?audience=e2e HTTP/1.0\r\n" +
		"Host: metadata.google.internal\r\nMetadata-Flavor: Google\r\n\r\n",
	framework.PluginAzure: "GET /metadata/instance/compute/vmId?api-version=2021-02-01&format=text HTTP/1.0\r\n" +
		"Host: 169.254.169.254\r\nMetadata: true\r\n\r\n",
}

// TestPodCannotReachItsInstanceMetadata: the simulator serves each
// instance's metadata at 169.254.169.254, off the cell, as its cloud does
// (localcells' Config.Metadata: a namespace beside the cell's, which the
// cell's routes to). From the cell's own namespace, where the agent lives,
// the cloud's request for a credential is answered 200; the same request
// from the pod, whose packets the cell's namespace forwards, gets no
// answer at all (cell/podnet drops them).
func TestPodCannotReachItsInstanceMetadata(t *testing.T) {
	framework.Only(t, framework.PluginAWS, framework.PluginGCE, framework.PluginAzure)
	kipLogOnFailure(t)
	request := metadataRequests[kip.Plugin]
	ns := f.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "curious", Labels: map[string]string{"pod": "curious"}}, Spec: onNode(kip.NodeName, sleeper())}
	f.CreatePod(t, ns, pod)
	p := f.WaitForPods(t, ns, "pod=curious", 1, 2*time.Minute, "Running", running)[0]

	// The instance reaches its metadata: what the pod does not reach is
	// there to be reached.
	var status string
	err := func() error {
		conn, err := podnet.DialContext(t.Context(), &net.Dialer{Timeout: 5 * time.Second},
			localcells.NetnsPath(cellNetns(t, p.Status.HostIP)), "tcp", localcells.MetadataAddress+":80")
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, request); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		status = resp.Status
		return nil
	}()
	if err != nil || !strings.HasPrefix(status, "200 ") {
		t.Fatalf("the cell's own request to its metadata: %q, %v; want 200", status, err)
	}

	out, code := kubectl(t, "exec", "-n", ns, "curious", "--", "sh", "-c",
		"command -v nc >/dev/null || exit 99; printf '"+request+"' | nc -w 5 "+localcells.MetadataAddress+" 80")
	if code == 99 {
		t.Fatalf("the pod's image has no nc: %s", out)
	}
	if strings.Contains(out, "HTTP/") {
		t.Errorf("the pod reached its instance's metadata (exit %d):\n%s", code, out)
	}
}

// podNetNode is the kip node TestPodHasItsOwnNetwork runs, beside the
// shared one, with NET_ADMIN and hostNetwork allowed.
const podNetNode = "kip-podnet"

// TestPodHasItsOwnNetwork: each cell has an address of its own for its pod
// (TestPodGetsItsAddressFromThePlugin), and the agent puts the pod in a network
// namespace of its own with it (cell/podnet), apart from the cell's, where
// the agent lives. On a kip that allows NET_ADMIN and hostNetwork, a pod
// with NET_ADMIN has a pod IP that is not its host IP and holds it on its
// eth0; it adds an address and a route, and the cell's namespace (on this
// machine, the one that holds the host IP) has neither; it does not reach
// the agent's port at its host IP; kip still reaches the agent (exec). A
// hostNetwork pod is in the cell's namespace: its pod IP is its host IP.
// A service mesh's pod (an init container with NET_ADMIN and iptables that
// redirects the pod's inbound port 80 and outbound port 9999 to its
// proxy's port, 8080) has its traffic redirected both ways, and its rules
// are in its own namespace only: the cell's keeps its chains against the
// pod (metadata dropped) and none of the pod's.
func TestPodHasItsOwnNetwork(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	startSideKip(t, framework.KipOptions{
		NodeName: podNetNode, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-podnet", Network: 1,
		Cells: "allowedCapabilities: [NET_ADMIN]\nallowHostNetwork: true\n",
	})
	ipt, err := images.PushIPTables(ctx, cells.Registry)
	if err != nil {
		t.Fatal(err)
	}
	admin := sleeper()
	admin.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	hostNet := onNode(podNetNode, sleeper())
	hostNet.HostNetwork = true
	mesh := onNode(podNetNode, corev1.Container{Name: "main", Image: cells.Images.Hello.Ref})
	mesh.InitContainers = []corev1.Container{{
		Name: "capture", Image: ipt.Ref,
		Command: []string{"sh", "-c", "iptables -t nat -A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 8080 && " +
			"iptables -t nat -A OUTPUT -p tcp --dport 9999 -j REDIRECT --to-ports 8080"},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}},
	}}
	for name, spec := range map[string]corev1.PodSpec{"admin": onNode(podNetNode, admin), "hostnet": hostNet, "mesh": mesh} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}}, Spec: spec}
		f.CreatePod(t, ns, pod)
	}
	in := func(pod string, cmd ...string) (string, int) {
		return kubectl(t, append([]string{"exec", "-n", ns, pod, "--"}, cmd...)...)
	}

	p := f.WaitForPods(t, ns, "pod=admin", 1, 2*time.Minute, "Running", running)[0]
	podIP, hostIP := p.Status.PodIP, p.Status.HostIP
	if podIP == "" || podIP == hostIP {
		t.Fatalf("pod IP %q, host IP %q: want an address of the pod's own", podIP, hostIP)
	}
	if out, code := in("admin", "ip", "-o", "-4", "addr", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, " "+podIP+"/32 ") {
		t.Errorf("the pod's eth0 (exit %d):\n%s\nwant %s/32", code, out, podIP)
	}
	for _, cmd := range [][]string{
		{"ip", "addr", "add", "192.0.2.77/32", "dev", "lo"},
		{"ip", "route", "add", "198.51.100.0/24", "dev", "lo"},
	} {
		if out, code := in("admin", cmd...); code != 0 {
			t.Errorf("%s with NET_ADMIN: exit %d: %s", strings.Join(cmd, " "), code, out)
		}
	}
	if out, code := in("admin", "nc", "-w", "2", hostIP, "6421"); code == 0 {
		t.Errorf("the pod reached the agent's port at %s:6421: %s", hostIP, out)
	}
	cellNS := cellNetns(t, hostIP)
	addrs, err := exec.Command("ip", "-n", cellNS, "-o", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(addrs))
	}
	routes, err := exec.Command("ip", "-n", cellNS, "route", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(routes))
	}
	if strings.Contains(string(addrs), "192.0.2.77") || strings.Contains(string(routes), "198.51.100.") {
		t.Errorf("the pod's NET_ADMIN changed the cell's namespace %s:\n%s\n%s", cellNS, addrs, routes)
	}
	if out, code := in("admin", "echo", "still here"); code != 0 || strings.TrimSpace(out) != "still here" {
		t.Errorf("after the pod changed its network, exec through kip: exit %d, %q", code, out)
	}

	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(t, "logs", "-n", ns, "mesh", "-c", "capture")
			t.Logf("the mesh pod's init container said:\n%s", out)
		}
	})
	m := f.WaitForPods(t, ns, "pod=mesh", 1, 2*time.Minute, "Running", running)[0]
	if out, code := in("admin", "sh", "-c", "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 "+m.Status.PodIP+" 80"); code != 0 || !strings.Contains(out, "hello from mesh") {
		t.Errorf("GET %s:80 from another pod, redirected by the mesh's rule to 8080: exit %d: %s", m.Status.PodIP, code, out)
	}
	if out, code := kubectl(t, "exec", "-n", ns, "mesh", "-c", "main", "--", "/app", "-get", "http://"+m.Status.PodIP+":9999/"); code != 0 || strings.TrimSpace(out) != "hello from mesh" {
		t.Errorf("the mesh pod's own request to port 9999, redirected to 8080: exit %d: %q", code, out)
	}
	meshNS := cellNetns(t, m.Status.HostIP)
	nat, err := exec.Command("ip", "netns", "exec", meshNS, "iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(nat))
	}
	filter, err := exec.Command("ip", "netns", "exec", meshNS, "iptables", "-S", "KIP-POD-FORWARD").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(filter))
	}
	if strings.Contains(string(nat), "--to-ports 8080") || !strings.Contains(string(filter), "-d 169.254.169.254/32 -j DROP") {
		t.Errorf("the cell's namespace %s after the mesh pod's rules: nat\n%s\nKIP-POD-FORWARD\n%s\nwant none of the pod's rules and the metadata still dropped", meshNS, nat, filter)
	}

	h := f.WaitForPods(t, ns, "pod=hostnet", 1, 2*time.Minute, "Running", running)[0]
	if h.Status.PodIP != h.Status.HostIP {
		t.Errorf("hostNetwork pod: pod IP %s, host IP %s; want the same", h.Status.PodIP, h.Status.HostIP)
	}
	if out, code := in("hostnet", "ip", "-o", "-4", "addr", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, " "+h.Status.HostIP+"/") {
		t.Errorf("the hostNetwork pod's eth0 (exit %d):\n%s\nwant the cell's address %s", code, out, h.Status.HostIP)
	}
}
