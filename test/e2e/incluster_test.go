//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kipimages "github.com/kipcell/kip/deploy/images"
	"github.com/kipcell/kip/host/keptlogs"
	"github.com/kipcell/kip/test/e2e/framework"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/kubeletnode"
)

// inClusterNode is the virtual node of the kip that runs in the cluster,
// and inClusterSubnet its cells' subnet, on a bridge in the kubelet node's
// network namespace.
const (
	inClusterNode   = "kip-incluster"
	inClusterSubnet = "10.215.0.0/24"
)

// TestKipRunsInTheClusterFromItsImage installs kip as an operator does:
// kip's image, built from this checkout by deploy/images and pushed to the
// run's registry, and deploy/kustomize/overlays/local applied to the real
// control plane, with a real kubelet node (test/kubeletnode) to run kip's
// pod. What this run changes of the overlay is only where things are on
// this machine: the node kip's pod goes to, its containerd's socket, a
// state directory of its own, the registry, and the names (a suffix, and
// the node's name in the RBAC), since the run's other kips use the
// overlay's. kip gets no kubeconfig: it starts from its ServiceAccount and
// gets system:node:kip-incluster by the kubelet's TLS bootstrap. A pod on
// its node runs, and kubectl logs and exec reach it through kip.
func TestKipRunsInTheClusterFromItsImage(t *testing.T) {
	if kip.Plugin != framework.PluginLocal {
		t.Skip("installs kip with the local overlay: runs with KIP_E2E_PLUGIN=local")
	}
	if f.Cluster.AdvertiseAddress == "" {
		t.Fatal("the API server listens on loopback only (this machine has no default route): a kubelet node cannot reach it")
	}
	ctx := t.Context()
	image := pushKipImage(t)
	node := startKubeletNode(t)
	installKip(t, node, image)
	ns := "kip-system"
	// kip's pod runs on the kubelet node, and its virtual node is Ready.
	f.WaitFor(t, 5*time.Minute, "node "+inClusterNode+" Ready", func(ctx context.Context) (bool, error) {
		n, err := f.Client.CoreV1().Nodes().Get(ctx, inClusterNode, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	kipPods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kip"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := 0
	var kipPod corev1.Pod
	for _, p := range kipPods.Items {
		if p.Spec.NodeName == node.Name && strings.HasPrefix(p.Name, "kip-incluster-") {
			onNode++
			kipPod = p
		}
	}
	if onNode != 1 {
		t.Errorf("%d of kip-incluster's pods on node %s, want 1", onNode, node.Name)
	}
	// The leader says on its Node, as its node identity may, where it
	// serves its kept logs for its standbys (host/keptlogs): its pod's
	// address and the admin port.
	want := keptlogs.Advertisement{Identity: kipPod.Name, URL: "http://" + net.JoinHostPort(kipPod.Status.PodIP, "10262")}
	var got keptlogs.Advertisement
	f.WaitFor(t, time.Minute, "the kept logs' advertisement on node "+inClusterNode, func(ctx context.Context) (bool, error) {
		n, err := f.Client.CoreV1().Nodes().Get(ctx, inClusterNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return json.Unmarshal([]byte(n.Annotations[keptlogs.Annotation]), &got) == nil && got == want, nil
	})
	checkBootstrapped(t, "system:serviceaccount:kip-system:kip-incluster")

	runOnInClusterKip(t, node)
	keptLogsSurviveARollout(t)
}

// keptLogsSurviveARollout: the log of a pod that ended on the in-cluster
// kip is read with kubectl logs after a rollout of kip's Deployment
// replaced its pod (overlays/local: one replica, Recreate; the kept logs
// on the node, where the new pod finds them).
func keptLogsSurviveARollout(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	podNS := f.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ended-before-the-rollout", Namespace: podNS},
		Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{"kubernetes.io/hostname": inClusterNode},
			Tolerations:   []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: cells.Images.Busybox.Ref,
				Command: []string{"sh", "-c", "echo kept across a rollout"}}},
		},
	}
	f.CreatePod(t, podNS, pod)
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Pods(podNS).Delete(bg, pod.Name, metav1.DeleteOptions{})
	})
	f.WaitFor(t, 3*time.Minute, "the pod Succeeded on "+inClusterNode, func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(podNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	kubectl := func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, filepath.Join(f.Cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", f.Cluster.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	logs := func(ctx context.Context) (bool, error) {
		out, err := kubectl(ctx, "-n", podNS, "logs", pod.Name)
		return err == nil && out == "kept across a rollout\n", nil
	}
	f.WaitFor(t, time.Minute, "kubectl logs of the ended pod", logs)
	before := kipPodOf(t)
	if out, err := kubectl(ctx, "-n", "kip-system", "rollout", "restart", "deployment/kip-incluster"); err != nil {
		t.Fatalf("kubectl rollout restart: %v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "-n", "kip-system", "rollout", "status", "deployment/kip-incluster", "--timeout=4m"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	if after := kipPodOf(t); after == before {
		t.Fatalf("kip's pod is still %s after the rollout", after)
	}
	f.WaitFor(t, 3*time.Minute, "kubectl logs of the ended pod from the new kip", logs)
}

// kipPodOf names the in-cluster kip's running pod.
func kipPodOf(t *testing.T) string {
	t.Helper()
	var name string
	f.WaitFor(t, 3*time.Minute, "one running kip-incluster pod", func(ctx context.Context) (bool, error) {
		pods, err := f.Client.CoreV1().Pods("kip-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kip"})
		if err != nil {
			return false, err
		}
		var running []string
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "kip-incluster-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p.Name)
			}
		}
		if len(running) != 1 {
			return false, nil
		}
		name = running[0]
		return true, nil
	})
	return name
}

// runOnInClusterKip runs a pod on the in-cluster kip's node: it runs in a
// cell, in a network namespace of its own with an address of the cells'
// subnet, its ServiceAccount's token mounted, and kubectl logs and exec
// reach it through kip.
func runOnInClusterKip(t *testing.T, node *kubeletnode.Node) {
	t.Helper()
	ctx := t.Context()
	podNS := f.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-incluster-kip", Namespace: podNS},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": inClusterNode},
			Tolerations:  []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: cells.Images.Busybox.Ref,
				Command: []string{"sh", "-c", "echo hello from the in-cluster kip; exec sleep 3600"}}},
		},
	}
	f.CreatePod(t, podNS, pod)
	t.Cleanup(func() {
		// The cell ends with its pod, before kip's pod does.
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		if t.Failed() {
			out, _ := exec.CommandContext(bg, filepath.Join(f.Cluster.BinDir, "kubectl"), "--kubeconfig", f.Cluster.Kubeconfig, "-n", podNS, "describe", "pod", pod.Name).CombinedOutput()
			t.Logf("the pod:\n%s", out)
		}
		_ = f.Client.CoreV1().Pods(podNS).Delete(bg, pod.Name, metav1.DeleteOptions{})
		f.WaitFor(t, 90*time.Second, "the pod on kip-incluster gone", func(ctx context.Context) (bool, error) {
			_, err := f.Client.CoreV1().Pods(podNS).Get(ctx, pod.Name, metav1.GetOptions{})
			return err != nil, nil
		})
	})
	f.WaitFor(t, 3*time.Minute, "the pod Running on "+inClusterNode, func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(podNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
	kc := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(f.Cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", f.Cluster.Kubeconfig, "-n", podNS}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got := kc("logs", pod.Name); !strings.Contains(got, "hello from the in-cluster kip") {
		t.Errorf("kubectl logs = %q, want the pod's greeting", got)
	}
	if got := kc("exec", pod.Name, "--", "sh", "-c", "echo exec in $(hostname)"); !strings.Contains(got, "exec in "+pod.Name) {
		t.Errorf("kubectl exec = %q, want \"exec in %s\"", got, pod.Name)
	}

	// Its own network: not the node's namespace (where kip, its agents'
	// bridge and every other pod of the node would be), and an address of
	// the cells' subnet.
	var nodeNet string
	if fi, err := os.Stat("/var/run/netns/" + node.NetNS); err != nil {
		t.Fatal(err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		nodeNet = fmt.Sprintf("net:[%d]", st.Ino)
	}
	if got := strings.TrimSpace(kc("exec", pod.Name, "--", "readlink", "/proc/self/ns/net")); got == "" || got == nodeNet {
		t.Errorf("the pod's network namespace is %q, the node's is %s: want one of its own", got, nodeNet)
	}
	p, err := f.Client.CoreV1().Pods(podNS).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := netip.ParseAddr(p.Status.PodIP); err != nil || !netip.MustParsePrefix(inClusterSubnet).Contains(a) {
		t.Errorf("pod IP %q, want one of the cells' subnet %s", p.Status.PodIP, inClusterSubnet)
	}
	// The token's tmpfs, which the agent mounts in the node's mount
	// namespace, is what the container sees.
	if got := kc("exec", pod.Name, "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"); got != podNS {
		t.Errorf("the pod's ServiceAccount namespace file = %q, want %q", got, podNS)
	}
}

// pushKipImage builds kip's image from this checkout for this machine's
// platform (deploy/images), pushes it to the run's registry and returns
// its reference at the registry's address on the cells' network, where
// the kubelet node pulls it.
func pushKipImage(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	built, err := kipimages.Build(ctx, kipimages.Options{
		// The local plugin only: the one the overlay runs. The cloud
		// plugins' compiles (-trimpath, static) would be the cold run's
		// three minutes more and shared with nothing.
		Images: []string{"kip"}, Plugins: []string{"local"}, Platforms: []string{"linux/" + runtime.GOARCH},
		Version: "e2e", Revision: "e2e", Created: time.Unix(0, 0).UTC(), Source: "e2e",
		RepoDir: "../..", Compress: images.Compress,
	})
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := kipimages.Push(ctx, built, kipimages.PushOptions{Registry: cells.Registry.LocalHost() + "/kip", Tag: "e2e", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	image := cells.Registry.Host() + "/kip/kip@" + pushed[0].Digest
	t.Logf("kip's image %s built and pushed in %s", image, time.Since(start).Round(time.Second))

	return image
}

// startKubeletNode returns the run's real kubelet node (f.InfraNode,
// started here if the run has not yet), whose logs the test prints if it
// fails.
func startKubeletNode(t *testing.T) *kubeletnode.Node {
	t.Helper()
	node, err := f.InfraNode(t.Context(), cells, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"kubelet", "containerd"} {
				data, _ := os.ReadFile(filepath.Join(node.StateDir, "logs", p+".log"))
				t.Logf("%s log (tail):\n%s", p, lastBytes(string(data), 3000))
			}
		}
	})
	return node
}

// installKip applies deploy/kustomize/overlays/local with image as kip's
// image, and what this run changes of it, and deletes what it applied
// (but the namespace) when the test ends.
func installKip(t *testing.T, node *kubeletnode.Node, image string) {
	t.Helper()
	ctx := t.Context()
	ns := "kip-system"
	// The overlay, as an operator applies it, and what this run changes.
	deploy := deployCopy(t)
	if err := os.WriteFile(filepath.Join(deploy, "kustomize", "base", "images.env"), []byte("kip="+image+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The local plugin's cells hand containerd paths under its state
	// directory (volumes, FIFOs), so the directory has the same path in
	// kip's container and on this machine; so has containerd's root, whose
	// snapshots kip-cell mounts. The overlay mounts the machine's usual
	// paths (/var/lib/kip/local, /var/lib/containerd); the run's are its own.
	stateDir := t.TempDir()
	// Beside the copy of deploy/: kustomize takes no absolute path.
	run := filepath.Join(filepath.Dir(deploy), "incluster")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	// The node's mount namespace is its containerd's: this machine's
	// PID 1 is not a node's (kubeletnode.Node.ContainerdPID).
	containerdPID, err := node.ContainerdPID()
	if err != nil {
		t.Fatal(err)
	}
	kipYAML, kustomization := inClusterOverlay(node, containerdPID, stateDir, t.TempDir())
	for name, body := range map[string]string{"kip.yaml": kipYAML, "kustomization.yaml": kustomization} {
		if err := os.WriteFile(filepath.Join(run, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	manifest, err := exec.CommandContext(ctx, kubectl, "kustomize", run).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderrOf(err))
	}
	manifestPath := filepath.Join(run, "manifest.yaml")
	if err := os.WriteFile(manifestPath, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "apply", "--server-side", "-f", manifestPath)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		if t.Failed() {
			out, _ := exec.CommandContext(bg, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "-n", ns, "logs", "deploy/kip-incluster", "--tail", "400").CombinedOutput()
			t.Logf("kip's log (tail):\n%s", out)
		}
		// Everything applied but the namespace, which the run's other kips use.
		var docs []string
		for _, doc := range strings.Split(string(manifest), "\n---\n") {
			if !strings.Contains("\n"+doc+"\n", "\nkind: Namespace\n") {
				docs = append(docs, doc)
			}
		}
		del := exec.CommandContext(bg, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "delete", "--wait", "--ignore-not-found", "-f", "-")
		del.Stdin = strings.NewReader(strings.Join(docs, "\n---\n"))
		if out, err := del.CombinedOutput(); err != nil {
			t.Errorf("deleting what was applied: %v\n%s", err, out)
		}
		_ = f.Client.CoreV1().Nodes().Delete(bg, inClusterNode, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, inClusterNode, metav1.DeleteOptions{})
	})

}

// inClusterOverlay is the kip.yaml and kustomization.yaml with which the
// run applies overlays/local: its own node name, registry, containerd and
// state directory, and names that do not meet the run's other kips'.
func inClusterOverlay(node *kubeletnode.Node, containerdPID int, stateDir, podLogsDir string) (kipYAML, kustomization string) {
	kipYAML = fmt.Sprintf(`clusterID: e2e-incluster
nodeName: %s
cells:
  insecureRegistries: [%q]
log:
  level: debug
plugin:
  name: local
  dir: /usr/local/lib/kip/plugins
  config:
    agentCommand: [/usr/local/bin/kip-cell, --containerd-address, %s, --bootstrap, "{bootstrap}"]
    network: netns
    # Not the default 10.213.0.0/16: the run's registry is on its own
    # cells' 10.213.x.0/24, which the node must reach.
    subnet: %s
    masquerade: true
    mountNamespace: /proc/%d/ns/mnt
    stateDir: %s
`, inClusterNode, cells.Registry.Host(), node.ContainerdSocket, inClusterSubnet, containerdPID, stateDir)
	kustomization = fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
nameSuffix: -incluster
resources:
  - ../deploy/kustomize/overlays/local
configMapGenerator:
  - name: kip-config
    namespace: kip-system
    behavior: replace
    files:
      - kip.yaml
patches:
  - target: {kind: Deployment, name: kip}
    patch: |-
      - op: add
        path: /spec/template/spec/nodeSelector
        value: {kubernetes.io/hostname: %[1]s}
  - target: {kind: Deployment, name: kip}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: kip}
      spec:
        template:
          spec:
            volumes:
              - name: local
                hostPath: {path: %[2]s, type: Directory}
              - name: pod-logs
                hostPath: {path: %[4]s, type: Directory}
            containers:
              - name: kip
                volumeMounts:
                  - name: local
                    mountPath: %[2]s
  - target: {kind: RoleBinding, name: kip-ca-secret}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: system:node:%[3]s
  - target: {kind: ClusterRoleBinding, name: kip-endpointslices}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: system:node:%[3]s
  - target: {kind: ClusterRoleBinding, name: "kip-bootstrap-node(client|-bootstrapper)"}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: kip-incluster
  - target: {kind: RoleBinding, name: kip-leader-election}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: kip-incluster
  - target: {kind: ClusterRoleBinding, name: kip-kept-logs-reader}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: kip-incluster
  - target: {kind: Role, name: kip-leader-election}
    patch: |-
      - op: replace
        path: /rules/0/resourceNames
        value: [kip-%[3]s]
`, node.Name, stateDir, inClusterNode, podLogsDir)
	return kipYAML, kustomization
}

// checkBootstrapped checks that kip's node certificate came from a CSR of
// requester, issued by the controller manager: no kubeconfig was made for
// it.
func checkBootstrapped(t *testing.T, requester string) {
	t.Helper()
	ctx := t.Context()
	csrs, err := f.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bootstrapped := false
	for _, csr := range csrs.Items {
		if csr.Spec.Username == requester && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
			len(csr.Status.Certificate) > 0 {
			bootstrapped = true
		}
	}
	if !bootstrapped {
		t.Errorf("no issued %s CSR requested by %s among %d CSRs", certificatesv1.KubeAPIServerClientKubeletSignerName, requester, len(csrs.Items))
	}

}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
