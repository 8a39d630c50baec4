//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestClusterIPServices is issue 13's items 4 and 5 end to end: a pod
// reaches a ClusterIP Service backed by two pods in other cells and sees
// both (TCP through a named target port, and UDP), sticks to one with
// sessionAffinity ClientIP, calls the API server through the kubernetes
// Service with its own service account token (as client-go's in-cluster
// config does), reaches the backends' pod IPs
// directly, and reaches itself through a Service whose only backend it
// is; the API server reaches the pods (its
// pod and service proxies, as webhooks and aggregated APIs are reached);
// and an endpoint change reaches the cells: a backend scaled away stops
// answering, and no backend at all is refused.
func TestClusterIPServices(t *testing.T) {
	kipLogOnFailure(t)
	x := newServicesFixture(t)
	t.Run("TCP through a named target port reaches both backends", func(t *testing.T) {
		x.answerers(t, "answers from both backends", "http://"+x.backend.Spec.ClusterIP+"/", x.names)
	})
	t.Run("UDP reaches both backends", func(t *testing.T) {
		x.answerers(t, "UDP answers from both backends", "udp://"+x.backend.Spec.ClusterIP+":53", x.names)
	})
	t.Run("sessionAffinity ClientIP sticks to one backend", func(t *testing.T) {
		var got []string
		f.WaitFor(t, 30*time.Second, "answers through the sticky Service", func(context.Context) (bool, error) {
			got = x.fetch(t, 10, "http://"+x.sticky.Spec.ClusterIP+"/")
			return !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "error") }), nil
		})
		if len(slices.Compact(slices.Sorted(slices.Values(got)))) != 1 {
			t.Errorf("answers through a ClientIP Service: %q, want one backend", got)
		}
	})
	t.Run("the kubernetes Service leads to the API server, with the pod's own token", x.apiServer)
	t.Run("pod IPs of other cells are reachable", func(t *testing.T) {
		for _, b := range x.backends {
			got := x.fetch(t, 1, "http://"+b.Status.PodIP+":8080/")
			if len(got) != 1 || got[0] != "hello from "+b.Name {
				t.Errorf("GET %s:8080 from another cell: %q, want %s's answer", b.Status.PodIP, got, b.Name)
			}
		}
	})
	t.Run("a pod reaches itself through its Service", func(t *testing.T) {
		got := x.fetch(t, 3, "http://"+x.self.Spec.ClusterIP+"/")
		if !slices.Equal(got, []string{"hello from client", "hello from client", "hello from client"}) {
			t.Errorf("the client through Service self, whose only backend it is: %q", got)
		}
	})
	t.Run("the API server reaches pods", func(t *testing.T) {
		b := x.backends[0]
		body, err := f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", x.ns, "pods", b.Name+":8080", "proxy/").DoRaw(t.Context())
		if err != nil || strings.TrimSpace(string(body)) != "hello from "+b.Name {
			t.Errorf("the API server's pod proxy to %s: %q, %v", b.Name, body, err)
		}
		body, err = f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", x.ns, "services", "backend:http", "proxy/").DoRaw(t.Context())
		if err != nil || !strings.HasPrefix(string(body), "hello from backend-") {
			t.Errorf("the API server's service proxy to backend: %q, %v", body, err)
		}
	})
	t.Run("an endpoint change reaches the cells", x.endpointChange)
}

// servicesFixture is TestClusterIPServices' namespace: Deployment backend
// (two hello pods, each in its own cell) behind Services backend (TCP by
// a named target port, UDP), sticky (ClientIP affinity) and self (whose
// only backend is the client), and the client pod, which also serves.
type servicesFixture struct {
	ns                    string
	backend, sticky, self *corev1.Service
	backends              []corev1.Pod
	names                 []string // of the backends, sorted
}

func newServicesFixture(t *testing.T) *servicesFixture {
	t.Helper()
	x := &servicesFixture{ns: f.Namespace(t)}
	deployment(t, x.ns, "backend", 2, nil, corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref, Ports: []corev1.ContainerPort{
		{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "echo", ContainerPort: 8080, Protocol: corev1.ProtocolUDP},
	}})
	x.backend = createService(t, x.ns, "backend", corev1.ServiceAffinityNone, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
		{Name: "echo", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("echo")},
	})
	x.sticky = createService(t, x.ns, "sticky", corev1.ServiceAffinityClientIP, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
	})
	x.self = createService(t, x.ns, "self", corev1.ServiceAffinityNone, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
	}, "client")
	// The client also serves (hello), so that it is the only backend of
	// Service self: a pod reaching itself through a ClusterIP. It calls
	// with hello -get, and has the kube-api-access volume the API server
	// adds to every pod (its token, ca.crt and namespace).
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}}, Spec: onKip(
		corev1.Container{Name: "main", Image: cells.Images.Hello.Ref, Command: []string{"sleep", "3600"}},
		corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref},
	)}
	f.CreatePod(t, x.ns, client)
	x.backends = f.WaitForPods(t, x.ns, "app=backend", 2, 60*time.Second, "Running and Ready on kip", readyOnKip)
	f.WaitForPods(t, x.ns, "app=client", 1, 60*time.Second, "Running on kip", func(p *corev1.Pod) bool { return p.Spec.NodeName == "kip" && running(p) })
	x.names = []string{x.backends[0].Name, x.backends[1].Name}
	slices.Sort(x.names)
	waitEndpoints(t, x.ns, "backend", 2)
	return x
}

// fetch runs hello -get in the client n times on url and returns its
// lines.
func (x *servicesFixture) fetch(t *testing.T, n int, url string, flags ...string) []string {
	t.Helper()
	args := append([]string{"exec", "-n", x.ns, "client", "-c", "main", "--", "/app", "-n", fmt.Sprint(n)}, flags...)
	if url != "" {
		args = append(args, "-get", url)
	}
	out, _ := kubectl(t, args...)
	return strings.Split(strings.TrimSpace(out), "\n")
}

// answerers waits until runs of hello -get have heard from every name in
// want, and only from them.
func (x *servicesFixture) answerers(t *testing.T, what, url string, want []string) {
	t.Helper()
	seen := map[string]bool{}
	var last []string
	f.WaitFor(t, 30*time.Second, what, func(context.Context) (bool, error) {
		last = x.fetch(t, 10, url)
		for _, line := range last {
			seen[strings.TrimPrefix(line, "hello from ")] = true
		}
		return cmpKeys(seen, want), nil
	})
	if t.Failed() {
		t.Logf("answers %v; last run: %q", seen, last)
	}
}

// apiServer: the client reaches the API server through the kubernetes
// Service as client-go's in-cluster config does (hello -api: the
// KUBERNETES_SERVICE_* variables, the kube-api-access volume's ca.crt and
// token, nothing else) and GETs its own pod, which a Role lets its
// service account do; without the Role the API server knows it as that
// service account and says no.
func (x *servicesFixture) apiServer(t *testing.T) {
	self := "/api/v1/namespaces/" + x.ns + "/pods/client"
	forbidden := x.fetch(t, 1, "", "-api", self)
	want := `pods \"client\" is forbidden: User \"system:serviceaccount:` + x.ns + `:default\"`
	if !strings.Contains(forbidden[0], want) {
		t.Errorf("GET its own pod before the Role: %q, want %s", forbidden, want)
	}
	grantPodReader(t, x.ns)
	var got []string
	f.WaitFor(t, 30*time.Second, "the client to GET its own pod with its token", func(context.Context) (bool, error) {
		got = x.fetch(t, 1, "", "-api", self)
		return len(got) == 1 && strings.Contains(got[0], `"kind":"Pod"`) && strings.Contains(got[0], `"name":"client"`), nil
	})
	if t.Failed() {
		t.Logf("last answer: %q", got)
	}
}

// grantPodReader lets the default service account of ns get its pods.
func grantPodReader(t *testing.T, ns string) {
	t.Helper()
	rbac := f.Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// endpointChange: a backend scaled away stops answering through the
// Service, and with no backend the Service refuses.
func (x *servicesFixture) endpointChange(t *testing.T) {
	clientPod, err := f.Client.CoreV1().Pods(x.ns).Get(t.Context(), "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logRulesOnFailure(t, clientPod.Status.HostIP)
	var last []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last run: %q", last)
		}
	})
	scale(t, x.ns, "backend", 1)
	var survivor string
	f.WaitFor(t, 60*time.Second, "one backend left", func(ctx context.Context) (bool, error) {
		pods, err := f.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=backend"})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		survivor = pods.Items[0].Name
		return true, nil
	})
	// Every request answered by the survivor: the client's cell no longer
	// sends any to the backend scaled away.
	f.WaitFor(t, 30*time.Second, "only "+survivor+" answering", func(context.Context) (bool, error) {
		last = x.fetch(t, 10, "http://"+x.backend.Spec.ClusterIP+"/")
		return len(last) == 10 && !slices.ContainsFunc(last, func(l string) bool { return l != "hello from "+survivor }), nil
	})

	scale(t, x.ns, "backend", 0)
	f.WaitFor(t, 60*time.Second, "no backend left, and the Service refused", func(context.Context) (bool, error) {
		last = x.fetch(t, 1, "http://"+x.backend.Spec.ClusterIP+"/")
		return len(last) >= 1 && strings.Contains(last[0], "connection refused"), nil
	})
}

func readyOnKip(p *corev1.Pod) bool {
	if p.Spec.NodeName != "kip" || !running(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// createService creates Service name in ns for the pods labelled
// app=<app>, app=backend by default.
func createService(t *testing.T, ns, name string, affinity corev1.ServiceAffinity, ports []corev1.ServicePort, app ...string) *corev1.Service {
	t.Helper()
	selector := map[string]string{"app": "backend"}
	if len(app) > 0 {
		selector["app"] = app[0]
	}
	svc, err := f.Client.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports, SessionAffinity: affinity},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// waitEndpoints waits until the Service's EndpointSlices hold n ready
// endpoints.
func waitEndpoints(t *testing.T, ns, svc string, n int) {
	t.Helper()
	f.WaitFor(t, 30*time.Second, fmt.Sprintf("%d ready endpoints of %s", n, svc), func(ctx context.Context) (bool, error) {
		list, err := f.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == n, nil
	})
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	s, err := f.Client.AppsV1().Deployments(ns).GetScale(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	if _, err := f.Client.AppsV1().Deployments(ns).UpdateScale(t.Context(), name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cmpKeys reports whether the keys of seen are exactly want.
func cmpKeys(seen map[string]bool, want []string) bool {
	return slices.Equal(slices.Sorted(maps.Keys(seen)), want)
}

// logRulesOnFailure logs, if t fails, the iptables rules of the pod of
// the cell at hostIP: in the pod's own namespace, pinned in its agent's
// state directory (cell/podnet), or in the cell's when the pod shares it.
func logRulesOnFailure(t *testing.T, hostIP string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		netns := cellNetns(t, hostIP)
		target := "/var/run/netns/" + netns
		if pid := agentPID(t, netns); pid != 0 {
			pin := filepath.Join(processEnv(t, pid)["KIP_CELL_STATE_DIR"], "podnet", "net")
			if _, err := os.Stat(pin); err == nil {
				target = pin
			}
		}
		rules, err := exec.Command("nsenter", "--net="+target, "--", "iptables-save").CombinedOutput()
		t.Logf("iptables-save in %s (cell %s): %v\n%s", target, hostIP, err, rules)
	})
}
