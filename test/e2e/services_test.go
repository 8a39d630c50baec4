//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestClusterIPServices is issue 13's items 4 and 5 end to end: a pod
// reaches a ClusterIP Service backed by two pods in other cells and sees
// both (TCP through a named target port, and UDP), sticks to one with
// sessionAffinity ClientIP, calls the API server through the kubernetes
// Service with a service account's token, reaches the backends' pod IPs
// directly, and reaches itself through a Service whose only backend it
// is; the API server reaches the pods (its
// pod and service proxies, as webhooks and aggregated APIs are reached);
// and an endpoint change reaches the cells: a backend scaled away stops
// answering, and no backend at all is refused.
func TestClusterIPServices(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)

	labels := map[string]string{"app": "backend"}
	_, err := f.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: onKip(corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref, Ports: []corev1.ContainerPort{
					{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
					{Name: "echo", ContainerPort: 8080, Protocol: corev1.ProtocolUDP},
				}}),
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backend := createService(t, ns, "backend", corev1.ServiceAffinityNone, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
		{Name: "echo", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("echo")},
	})
	sticky := createService(t, ns, "sticky", corev1.ServiceAffinityClientIP, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
	})
	self := createService(t, ns, "self", corev1.ServiceAffinityNone, []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
	}, "client")
	// The client calls the API server with a token of its namespace's
	// default service account, and checks the server's certificate with
	// the cluster CA of the kube-root-ca.crt ConfigMap.
	token, err := f.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A ConfigMap rather than a Secret: this test is about the network,
	// and Secret volumes are issue 13's item 3, built beside it.
	if _, err := f.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "api-token"},
		Data: map[string]string{"token": token.Status.Token}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The client also serves (hello), so that it is the only backend of
	// Service self: a pod reaching itself through a ClusterIP.
	clientSpec := onKip(
		corev1.Container{Name: "fetch", Image: cells.Images.Hello.Ref, Command: []string{"sleep", "3600"},
			VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/ca"}, {Name: "token", MountPath: "/token"}}},
		corev1.Container{Name: "hello", Image: cells.Images.Hello.Ref},
	)
	clientSpec.Volumes = []corev1.Volume{
		{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "api-token"}}}},
	}
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}}, Spec: clientSpec}
	if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backends := f.WaitForPods(t, ns, "app=backend", 2, 60*time.Second, "Running and Ready on kip", readyOnKip)
	f.WaitForPods(t, ns, "app=client", 1, 60*time.Second, "Running on kip", func(p *corev1.Pod) bool { return p.Spec.NodeName == "kip" && running(p) })
	names := []string{backends[0].Name, backends[1].Name}
	slices.Sort(names)
	waitEndpoints(t, ns, "backend", 2)

	fetch := func(t *testing.T, n int, url string, flags ...string) []string {
		t.Helper()
		args := append([]string{"exec", "-n", ns, "client", "-c", "fetch", "--", "/app", "-n", fmt.Sprint(n)}, flags...)
		out, _ := kubectl(t, append(args, "-get", url)...)
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	// answerers waits until runs of hello -get have heard from every name in
	// want, and only from them.
	answerers := func(t *testing.T, what, url string, want []string) {
		t.Helper()
		seen := map[string]bool{}
		var last []string
		f.WaitFor(t, 30*time.Second, what, func(context.Context) (bool, error) {
			last = fetch(t, 10, url)
			for _, line := range last {
				seen[strings.TrimPrefix(line, "hello from ")] = true
			}
			return cmpKeys(seen, want), nil
		})
		if t.Failed() {
			t.Logf("answers %v; last run: %q", seen, last)
		}
	}

	t.Run("TCP through a named target port reaches both backends", func(t *testing.T) {
		answerers(t, "answers from both backends", "http://"+backend.Spec.ClusterIP+"/", names)
	})
	t.Run("UDP reaches both backends", func(t *testing.T) {
		answerers(t, "UDP answers from both backends", "udp://"+backend.Spec.ClusterIP+":53", names)
	})
	t.Run("sessionAffinity ClientIP sticks to one backend", func(t *testing.T) {
		var got []string
		f.WaitFor(t, 30*time.Second, "answers through the sticky Service", func(context.Context) (bool, error) {
			got = fetch(t, 10, "http://"+sticky.Spec.ClusterIP+"/")
			return !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "error") }), nil
		})
		if len(slices.Compact(slices.Sorted(slices.Values(got)))) != 1 {
			t.Errorf("answers through a ClientIP Service: %q, want one backend", got)
		}
	})
	t.Run("the kubernetes Service leads to the API server", func(t *testing.T) {
		api, err := f.Client.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		url := "https://" + api.Spec.ClusterIP + "/"
		version := fetch(t, 1, url+"version", "-ca", "/ca/ca.crt")
		if len(version) != 1 || !strings.Contains(version[0], `"gitVersion"`) {
			t.Errorf("GET /version through the kubernetes Service, verified with the cluster CA: %q", version)
		}
		// With a service account's token, an authenticated request.
		apis := fetch(t, 1, url+"api", "-ca", "/ca/ca.crt", "-token", "/token/token")
		if len(apis) != 1 || !strings.Contains(apis[0], `"APIVersions"`) {
			t.Errorf("GET /api with a service account token: %q", apis)
		}
	})
	t.Run("pod IPs of other cells are reachable", func(t *testing.T) {
		for _, b := range backends {
			got := fetch(t, 1, "http://"+b.Status.PodIP+":8080/")
			if len(got) != 1 || got[0] != "hello from "+b.Name {
				t.Errorf("GET %s:8080 from another cell: %q, want %s's answer", b.Status.PodIP, got, b.Name)
			}
		}
	})
	t.Run("a pod reaches itself through its Service", func(t *testing.T) {
		got := fetch(t, 3, "http://"+self.Spec.ClusterIP+"/")
		if !slices.Equal(got, []string{"hello from client", "hello from client", "hello from client"}) {
			t.Errorf("the client through Service self, whose only backend it is: %q", got)
		}
	})
	t.Run("the API server reaches pods", func(t *testing.T) {
		b := backends[0]
		body, err := f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "pods", b.Name+":8080", "proxy/").DoRaw(t.Context())
		if err != nil || strings.TrimSpace(string(body)) != "hello from "+b.Name {
			t.Errorf("the API server's pod proxy to %s: %q, %v", b.Name, body, err)
		}
		body, err = f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "services", "backend:http", "proxy/").DoRaw(t.Context())
		if err != nil || !strings.HasPrefix(string(body), "hello from backend-") {
			t.Errorf("the API server's service proxy to backend: %q, %v", body, err)
		}
	})
	t.Run("an endpoint change reaches the cells", func(t *testing.T) {
		clientPod, err := f.Client.CoreV1().Pods(ns).Get(t.Context(), "client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		logRulesOnFailure(t, clientPod.Status.PodIP)
		var last []string
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("last run: %q", last)
			}
		})
		scale(t, ns, "backend", 1)
		var survivor string
		f.WaitFor(t, 60*time.Second, "one backend left", func(ctx context.Context) (bool, error) {
			pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=backend"})
			if err != nil || len(pods.Items) != 1 {
				return false, err
			}
			survivor = pods.Items[0].Name
			return true, nil
		})
		// Every request answered by the survivor: the client's cell no
		// longer sends any to the backend scaled away.
		f.WaitFor(t, 30*time.Second, "only "+survivor+" answering", func(context.Context) (bool, error) {
			last = fetch(t, 10, "http://"+backend.Spec.ClusterIP+"/")
			return len(last) == 10 && !slices.ContainsFunc(last, func(l string) bool { return l != "hello from "+survivor }), nil
		})

		scale(t, ns, "backend", 0)
		f.WaitFor(t, 60*time.Second, "no backend left, and the Service refused", func(context.Context) (bool, error) {
			last = fetch(t, 1, "http://"+backend.Spec.ClusterIP+"/")
			return len(last) >= 1 && strings.Contains(last[0], "connection refused"), nil
		})
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

// logRulesOnFailure logs, if t fails, the iptables rules of the cell
// whose pod has address podIP (the local plugin's namespaces, which the
// EC2 simulator's cells are too).
func logRulesOnFailure(t *testing.T, podIP string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		list, _ := exec.Command("ip", "netns", "list").Output()
		for _, line := range strings.Split(string(list), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			addr, _ := exec.Command("ip", "-n", fields[0], "-o", "-4", "addr", "show").Output()
			if !strings.Contains(string(addr), " "+podIP+"/") {
				continue
			}
			rules, err := exec.Command("ip", "netns", "exec", fields[0], "iptables-save").CombinedOutput()
			t.Logf("iptables-save in %s (%s): %v\n%s", fields[0], podIP, err, rules)
			return
		}
		t.Logf("no cell namespace holds %s", podIP)
	})
}
