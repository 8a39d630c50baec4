//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipcell/kip/test/e2e/framework"
)

// TestCoreDNSInCell: CoreDNS, built from the module proxy and deployed
// from deploy/coredns/coredns.yaml, runs in a cell of its own on kip and
// answers a pod of another cell that asks its pod IP. The cluster DNS runs
// on the kubelet node, as in a real cluster; this one is a second CoreDNS
// in the test's namespace (framework.CellDNS), with a static zone in place
// of the kubernetes plugin (framework.StaticCorefile), which answers
// kubernetes.default.svc.cluster.local as the plugin would.
func TestCoreDNSInCell(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	// Registered first, so run last: once CoreDNS and the client are
	// deleted, their cells end before the next test counts its own.
	before := cellNames(t)
	t.Cleanup(func() {
		f.WaitFor(t, 60*time.Second, "the test's cells to end", func(context.Context) (bool, error) { return newCells(t, before) == 0, nil })
	})
	apiService, err := f.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := f.Namespace(t)
	corefile, err := framework.StaticCorefile(map[string]string{"kubernetes.default.svc.cluster.local": apiService.Spec.ClusterIP})
	if err != nil {
		t.Fatal(err)
	}
	dns, err := f.DeployDNS(ctx, cells, framework.DNSOptions{Corefile: corefile, Placement: framework.CellDNS(ns, kip.NodeName), Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dns.Delete(context.Background(), f); err != nil { //nolint:usetesting // a Cleanup: t.Context() has ended
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(t, "logs", "-n", dns.Namespace, dns.Pod, "--tail=30")
			t.Logf("CoreDNS's log (pod %s):\n%s", dns.Pod, out)
		}
	})
	pod, err := f.Client.CoreV1().Pods(dns.Namespace).Get(ctx, dns.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != kip.NodeName || pod.Annotations["cell.kipcell.io/instance-type"] == "" {
		t.Errorf("CoreDNS pod %s on node %q with instance type %q, want a cell of node %s",
			pod.Name, pod.Spec.NodeName, pod.Annotations["cell.kipcell.io/instance-type"], kip.NodeName)
	}

	client := clientPod(t, ns)
	if client.Status.PodIP == dns.PodIP {
		t.Fatalf("the client and CoreDNS share the address %s, want two cells", dns.PodIP)
	}
	out, code := kubectl(t, "exec", "-n", ns, client.Name, "--", "nslookup", "kubernetes.default.svc.cluster.local", dns.PodIP)
	if want := "Address: " + apiService.Spec.ClusterIP + "\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("nslookup kubernetes.default.svc.cluster.local %s: exit %d\n%s\nwant an answer with %q", dns.PodIP, code, out, want)
	}
	out, code = kubectl(t, "exec", "-n", ns, client.Name, "--", "nslookup", "no-such-service.default.svc.cluster.local", dns.PodIP)
	if code == 0 || !strings.Contains(out, "can't find") {
		t.Errorf("nslookup of a name CoreDNS does not know: exit %d\n%s\nwant no answer", code, out)
	}
}

// TestClusterDNS: the cluster DNS runs on the kubelet node, not in a
// cell; a pod in a cell resolves the kubernetes Service and a Service of
// its namespace by its short name through it (its resolv.conf names
// kube-dns, which its cell leads to CoreDNS's pod on the kubelet node),
// and calls it by that name.
func TestClusterDNS(t *testing.T) {
	if clusterDNS == nil {
		t.Skipf("%s=0 turned the cluster DNS off, and this test needs it", framework.ClusterDNSEnv)
	}
	kipLogOnFailure(t)
	ctx := t.Context()
	if clusterDNS.Node != framework.InfraNodeName {
		t.Errorf("CoreDNS pod %s runs on node %q, want the kubelet node %s", clusterDNS.Pod, clusterDNS.Node, framework.InfraNodeName)
	}
	ns := f.Namespace(t)
	settle(t, ns)
	helloDeployment(t, ns, "hello", 1, nil)
	svc, err := f.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "hello"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiService, err := f.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitForPods(t, ns, "app=hello", 1, 60*time.Second, "Running", running)
	client := clientPod(t, ns)

	out, _ := kubectl(t, "exec", "-n", ns, client.Name, "--", "cat", "/etc/resolv.conf")
	for _, want := range []string{"nameserver " + framework.ClusterDNSIP, "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local"} {
		if !strings.Contains(out, want) {
			t.Errorf("the client's /etc/resolv.conf lacks %q:\n%s", want, out)
		}
	}
	lookups := []struct{ name, want string }{
		{"kubernetes.default.svc.cluster.local", apiService.Spec.ClusterIP},
		{"hello." + ns + ".svc.cluster.local", svc.Spec.ClusterIP},
	}
	for _, l := range lookups {
		last := ""
		t.Cleanup(func() {
			if t.Failed() && last != "" {
				t.Logf("the client's last nslookup %s: %s", l.name, last)
			}
		})
		f.WaitFor(t, 30*time.Second, "nslookup "+l.name+" to answer "+l.want, func(context.Context) (bool, error) {
			out, code := kubectl(t, "exec", "-n", ns, client.Name, "--", "nslookup", l.name)
			last = "exit " + strconv.Itoa(code) + ": " + out
			return code == 0 && strings.Contains(out, "Address: "+l.want+"\n"), nil
		})
	}
	// The short name, through the search path (Go's resolver in the
	// hello program), to the Service's pod.
	f.WaitFor(t, 30*time.Second, "GET http://hello to reach the hello pod", func(context.Context) (bool, error) {
		out, code := kubectl(t, "exec", "-n", ns, client.Name, "--", "/app", "-get", "http://hello")
		return code == 0 && strings.HasPrefix(out, "hello from hello-"), nil
	})
}

// clientPod runs a pod of the hello image (busybox's nslookup, and the
// hello program's client, /app -get URL) on kip in ns, in its own cell,
// asleep, and returns it once Running.
func clientPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	createPod(t, ns, "client", onKip(corev1.Container{Name: "client", Image: cells.Images.Hello.Ref, Command: []string{"sleep", "3600"}}))
	return &f.WaitForPods(t, ns, "app=client", 1, 60*time.Second, "Running", running)[0]
}
