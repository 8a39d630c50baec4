//go:build e2e

package kubeletnode_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/kubeletnode"
	"github.com/kipcell/kip/test/registry"
)

// TestKubeletNodeRunsPods starts a control plane and a kubelet node beside
// it, and proves the node is a real one: it joins by TLS bootstrap and is
// Ready, runs a pod of the loopback registry's busybox whose log and exec
// work through the API server, mounts its ServiceAccount token, lets a pod
// reach the API server through the kubernetes Service's ClusterIP as
// client-go's in-cluster config does (kube-proxy), and routes its pod IPs
// from this machine.
func TestKubeletNodeRunsPods(t *testing.T) {
	containerdtest.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	logw := testWriter{t}
	bin, err := controlplane.Build(ctx, controlplane.BuildOptions{Log: logw})
	if err != nil {
		t.Fatal(err)
	}
	nodeBin, err := controlplane.BuildNode(ctx, controlplane.BuildOptions{Log: logw})
	if err != nil {
		t.Fatal(err)
	}
	c, err := controlplane.Start(ctx, controlplane.Options{StateDir: t.TempDir(), BinDir: bin, Log: logw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if c.AdvertiseAddress == "" {
		t.Skip("the API server listens on loopback only: this machine has no default route")
	}
	// The node reaches this machine's addresses through its veth.
	reg, err := registry.Start(ctx, registry.Options{Addr: "0.0.0.0:0", AdvertiseHost: c.AdvertiseAddress})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	set, err := images.PushAll(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	n, err := kubeletnode.Start(ctx, c, kubeletnode.Options{BinDir: nodeBin, Registries: []string{reg.Host()}, Log: logw})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s Ready %s after Start", n.Name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"kubelet", "containerd", "kube-proxy"} {
				data, _ := os.ReadFile(filepath.Join(n.StateDir, "logs", p+".log"))
				t.Logf("%s log (tail):\n%s", p, tail(string(data), 4000))
			}
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
		if err := exec.Command("ip", "netns", "pids", n.NetNS).Run(); err == nil {
			t.Errorf("network namespace %s still there after Stop", n.NetNS)
		}
		// The pods' processes and cgroups went with the node.
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/pids", n.CgroupRoot)); err == nil {
			t.Errorf("cgroup %s still there after Stop", n.CgroupRoot)
		}
	})

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bootstrapped(csrs.Items) {
		t.Errorf("no issued kube-apiserver-client-kubelet CSR of a bootstrap token among %d CSRs: the node did not join by TLS bootstrap", len(csrs.Items))
	}

	ns := "default"
	onNode := func(name string, c corev1.Container, restart corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{NodeName: n.Name, RestartPolicy: restart, Containers: []corev1.Container{c}},
		}
	}
	pods := []*corev1.Pod{
		onNode("shell", corev1.Container{Name: "c", Image: set.Busybox.Ref,
			Command: []string{"sh", "-c", "echo hello from the kubelet node; exec sleep 3600"}}, corev1.RestartPolicyAlways),
		onNode("web", corev1.Container{Name: "c", Image: set.Hello.Ref}, corev1.RestartPolicyAlways),
		onNode("in-cluster", corev1.Container{Name: "c", Image: set.Hello.Ref, Args: []string{"-api", "/version"}}, corev1.RestartPolicyNever),
	}
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := waitPod(ctx, t, cs, ns, "web", corev1.PodRunning)
	waitPod(ctx, t, cs, ns, "shell", corev1.PodRunning)
	waitPod(ctx, t, cs, ns, "in-cluster", corev1.PodSucceeded)

	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig, "-n", ns}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got := kubectl("logs", "shell"); !strings.Contains(got, "hello from the kubelet node") {
		t.Errorf("kubectl logs shell = %q, want the pod's greeting", got)
	}
	if got := kubectl("exec", "shell", "--", "sh", "-c", "wc -c < /var/run/secrets/kubernetes.io/serviceaccount/token; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace"); !strings.HasSuffix(strings.TrimSpace(got), "\n"+ns) || strings.HasPrefix(got, "0") {
		t.Errorf("kubectl exec (token size, namespace) = %q, want a token and namespace %s", got, ns)
	}
	if got := kubectl("logs", "in-cluster"); !strings.Contains(got, `"gitVersion"`) {
		t.Errorf("kubectl logs in-cluster = %q, want the API server's /version through the kubernetes Service", got)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://%s:8080/", web.Status.PodIP))
	if err != nil {
		t.Fatalf("this machine cannot reach pod IP %s: %v", web.Status.PodIP, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "hello from web") {
		t.Errorf("GET http://%s:8080/ = %q, want the web pod's greeting", web.Status.PodIP, body)
	}
}

func bootstrapped(csrs []certificatesv1.CertificateSigningRequest) bool {
	for _, csr := range csrs {
		if csr.Spec.SignerName == "kubernetes.io/kube-apiserver-client-kubelet" &&
			strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && len(csr.Status.Certificate) > 0 {
			return true
		}
	}
	return false
}

func waitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, getErr := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if getErr == nil {
			pod = p
		}
		if getErr != nil {
			return false, nil //nolint:nilerr // a failed Get is retried
		}
		if ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed; ended && p.Status.Phase != phase {
			return false, fmt.Errorf("the pod ended %s", p.Status.Phase)
		}
		return p.Status.Phase == phase, nil
	})
	if err != nil {
		evs, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		var msgs []string
		if evs != nil {
			for _, e := range evs.Items {
				msgs = append(msgs, e.Reason+": "+e.Message)
			}
		}
		logs, logErr := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if logErr != nil {
			logs = []byte(logErr.Error())
		}
		t.Fatalf("pod %s not %s: %v; status %+v; events:\n%s\nits log:\n%s", name, phase, err, pod.Status, strings.Join(msgs, "\n"), logs)
	}
	return pod
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
