package framework

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/images"
)

const testRegistry = "10.213.7.1:5000"

// dnsObjects reads DNSManifest, rendered for testRegistry and corefile,
// into typed objects by kind and name.
func dnsObjects(t *testing.T, corefile string) map[string]runtime.Object {
	t.Helper()
	return manifestObjects(t, DNSManifest, func(m []byte) ([]byte, error) { return RenderDNS(m, testRegistry, corefile) })
}

// manifestObjects reads the manifest at path (from the repository root),
// rendered by render, into typed objects by kind and name.
func manifestObjects(t *testing.T, path string, render func([]byte) ([]byte, error)) map[string]runtime.Object {
	t.Helper()
	full, err := repoFile(path)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := render(manifest)
	if err != nil {
		t.Fatalf("rendering %s: %v", path, err)
	}
	objs := map[string]runtime.Object{}
	for i, doc := range strings.Split(string(rendered), "\n---\n") {
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			continue // an APIService: client-go's scheme lacks it
		}
		if err != nil {
			t.Fatalf("document %d of %s: %v", i+1, path, err)
		}
		name := obj.(interface{ GetName() string }).GetName()
		objs[gvk.Kind+"/"+name] = obj
	}
	return objs
}

// TestDNSManifest checks the objects of deploy/coredns/coredns.yaml: those
// of upstream's deployment, with the pod on a kubelet node (never a Kip
// node) and the Service at the cluster DNS address.
func TestDNSManifest(t *testing.T) {
	objs := dnsObjects(t, "")
	var kinds []string
	for k := range objs {
		kinds = append(kinds, k)
	}
	want := []string{
		"ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns", "ConfigMap/coredns",
		"Deployment/coredns", "Service/kube-dns", "ServiceAccount/coredns",
	}
	if diff := cmp.Diff(want, kinds, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}

	t.Run("rbac", func(t *testing.T) { dnsRBAC(t, objs) })
	t.Run("corefile", func(t *testing.T) { dnsCorefile(t, objs) })
	t.Run("deployment", func(t *testing.T) { dnsDeployment(t, objs) })
	t.Run("on a kubelet node", func(t *testing.T) { dnsOffKipNode(t, objs) })
	t.Run("service", func(t *testing.T) { dnsService(t, objs) })
}

// dnsRBAC: the service account, and what upstream grants it.
func dnsRBAC(t *testing.T, objs map[string]runtime.Object) {
	role := objs["ClusterRole/system:coredns"].(*rbacv1.ClusterRole)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}
	binding := objs["ClusterRoleBinding/system:coredns"].(*rbacv1.ClusterRoleBinding)
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: "kube-system"}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" || binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" {
		t.Errorf("binding %+v to %+v, want the coredns service account to the ClusterRole", binding.Subjects, binding.RoleRef)
	}
	if sa := objs["ServiceAccount/coredns"].(*corev1.ServiceAccount); sa.Namespace != "kube-system" {
		t.Errorf("service account in %q, want kube-system", sa.Namespace)
	}
}

// dnsCorefile: the Corefile kubeadm writes, without forward.
func dnsCorefile(t *testing.T, objs map[string]runtime.Object) {
	corefile := objs["ConfigMap/coredns"].(*corev1.ConfigMap).Data["Corefile"]
	lines := map[string]bool{}
	for _, l := range strings.Split(corefile, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines[l] = true
		}
	}
	for _, want := range []string{
		".:53 {", "errors", "health {", "lameduck 5s", "ready",
		"kubernetes cluster.local in-addr.arpa ip6.arpa {", "pods insecure", "fallthrough in-addr.arpa ip6.arpa",
		"prometheus :9153", "cache 30", "loop", "reload", "loadbalance",
	} {
		if !lines[want] {
			t.Errorf("the Corefile lacks the line %q:\n%s", want, corefile)
		}
	}
	for l := range lines {
		if strings.HasPrefix(l, "forward") {
			t.Errorf("the Corefile forwards (%q): the local cluster has no upstream", l)
		}
	}
}

// dnsDeployment: upstream's pod, with the image PushCoreDNS pushes.
func dnsDeployment(t *testing.T, objs map[string]runtime.Object) {
	d := objs["Deployment/coredns"].(*appsv1.Deployment)
	spec := d.Spec.Template.Spec
	if d.Namespace != "kube-system" || spec.ServiceAccountName != "coredns" || spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("deployment in %q, service account %q, dnsPolicy %q; want kube-system, coredns, Default",
			d.Namespace, spec.ServiceAccountName, spec.DNSPolicy)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not match the pod labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want coredns alone", len(spec.Containers))
	}
	c := spec.Containers[0]
	if want := testRegistry + "/kip-e2e/coredns:" + images.CoreDNSTag; c.Image != want {
		t.Errorf("image %q, want %q (what PushCoreDNS pushes)", c.Image, want)
	}
	if diff := cmp.Diff([]string{"-conf", "/etc/coredns/Corefile"}, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/coredns" || len(spec.Volumes) != 1 ||
		spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "coredns" || spec.Volumes[0].Name != c.VolumeMounts[0].Name {
		t.Errorf("volumes %+v mounted as %+v, want ConfigMap coredns at /etc/coredns", spec.Volumes, c.VolumeMounts)
	}
}

// dnsOffKipNode: the pod runs where it runs in any cluster, on a kubelet
// node: its nodeSelector selects one, and nothing tolerates the Kip
// node's taint.
func dnsOffKipNode(t *testing.T, objs map[string]runtime.Object) {
	spec := objs["Deployment/coredns"].(*appsv1.Deployment).Spec.Template.Spec
	checkOffKipNode(t, spec)
}

// checkOffKipNode checks that a pod of spec is scheduled to a kubelet
// node (selected by its labels) and never to a Kip node (not tolerated).
func checkOffKipNode(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	kubeletNode := labels.Set{node.LabelOS: "linux", node.LabelHostname: InfraNodeName}
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(kubeletNode) {
		t.Errorf("nodeSelector %v does not select a kubelet node's labels %v", spec.NodeSelector, kubeletNode)
	}
	if tolerated(spec, kipTaint(t)) {
		t.Errorf("tolerations %+v tolerate the Kip node's taint %s: the add-on would take a cell", spec.Tolerations, node.DefaultTaint)
	}
}

func kipTaint(t *testing.T) *corev1.Taint {
	t.Helper()
	taint, err := node.ParseTaint(node.DefaultTaint)
	if err != nil {
		t.Fatal(err)
	}
	return taint
}

// tolerated reports whether spec tolerates taint as the scheduler would
// for an Exists toleration: the key (or none, with Exists), and the
// effect or none.
func tolerated(spec corev1.PodSpec, taint *corev1.Taint) bool {
	for _, tol := range spec.Tolerations {
		if (tol.Key == taint.Key || tol.Key == "") && tol.Operator == corev1.TolerationOpExists &&
			(tol.Effect == "" || tol.Effect == taint.Effect) {
			return true
		}
	}
	return false
}

// TestMetricsServerManifest: metrics-server also runs on a kubelet node.
func TestMetricsServerManifest(t *testing.T) {
	objs := manifestObjects(t, MetricsServerManifest, func(m []byte) ([]byte, error) {
		return []byte(strings.ReplaceAll(string(m), RegistryVar, testRegistry)), nil
	})
	d, ok := objs["Deployment/metrics-server"].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment metrics-server in %s", MetricsServerManifest)
	}
	checkOffKipNode(t, d.Spec.Template.Spec)
	// kubectl top and the HorizontalPodAutoscaler wait for metrics-server
	// Ready: its probe must see /readyz pass within 2 s of it passing (two
	// scrapes, 15 s after the start), and still take a Ready pod out only
	// after upstream's 30 s of failures.
	probe := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	if probe == nil {
		t.Fatal("metrics-server has no readiness probe")
	}
	if probe.InitialDelaySeconds != 0 || probe.PeriodSeconds > 2 || probe.PeriodSeconds*probe.FailureThreshold < 30 {
		t.Errorf("readiness probe: first after %d s, every %d s, out after %d failures: want from the start, every 2 s at most, out after 30 s",
			probe.InitialDelaySeconds, probe.PeriodSeconds, probe.FailureThreshold)
	}
}

// TestPlace: a Placement pins the Deployment's pods to a node, tolerating
// the Kip taint (CoreDNS in a cell of kip), and CellDNS keeps only the
// namespaced objects a second CoreDNS needs, in the test's namespace.
func TestPlace(t *testing.T) {
	render := func(p Placement) func([]byte) ([]byte, error) {
		return func(m []byte) ([]byte, error) {
			r, err := RenderDNS(m, testRegistry, "")
			if err != nil {
				return nil, err
			}
			return place(r, p)
		}
	}
	plain := manifestObjects(t, DNSManifest, render(Placement{}))
	if diff := cmp.Diff(dnsObjects(t, ""), plain); diff != "" {
		t.Errorf("the zero Placement changed the manifest (-want +got):\n%s", diff)
	}

	pinned := manifestObjects(t, DNSManifest, render(Placement{Node: "kip"}))
	spec := pinned["Deployment/coredns"].(*appsv1.Deployment).Spec.Template.Spec
	if spec.NodeSelector[node.LabelHostname] != "kip" || spec.NodeSelector[node.LabelOS] != "linux" {
		t.Errorf("nodeSelector %v, want the manifest's with kubernetes.io/hostname=kip", spec.NodeSelector)
	}
	if !tolerated(spec, kipTaint(t)) {
		t.Errorf("tolerations %+v do not tolerate the Kip node's taint", spec.Tolerations)
	}
	delete(pinned, "Deployment/coredns")
	delete(plain, "Deployment/coredns")
	if diff := cmp.Diff(plain, pinned); diff != "" {
		t.Errorf("pinning changed other objects (-want +got):\n%s", diff)
	}

	second := manifestObjects(t, DNSManifest, render(CellDNS("e2e-7", "kip")))
	var names []string
	for k, obj := range second {
		names = append(names, k)
		if ns := obj.(metav1.Object).GetNamespace(); ns != "e2e-7" {
			t.Errorf("%s in namespace %q, want e2e-7", k, ns)
		}
	}
	if diff := cmp.Diff([]string{"ConfigMap/coredns", "Deployment/coredns", "ServiceAccount/coredns"}, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("CellDNS objects (-want +got):\n%s", diff)
	}

	if _, err := place([]byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  namespace: a\n"), CellDNS("b", "kip")); err == nil {
		t.Error("place of a manifest with none of the kinds = nil, want an error")
	}
}

// dnsService: kube-dns at the tenth address of the service range.
func dnsService(t *testing.T, objs map[string]runtime.Object) {
	svc := objs["Service/kube-dns"].(*corev1.Service)
	prefix := netip.MustParsePrefix(controlplane.DefaultServiceCIDR)
	tenth := prefix.Addr()
	for range 10 {
		tenth = tenth.Next()
	}
	if svc.Spec.ClusterIP != tenth.String() || ClusterDNSIP != tenth.String() {
		t.Errorf("kube-dns at %s (ClusterDNSIP %s), want %s: the tenth address of %s",
			svc.Spec.ClusterIP, ClusterDNSIP, tenth, controlplane.DefaultServiceCIDR)
	}
	pod := objs["Deployment/coredns"].(*appsv1.Deployment).Spec.Template.Labels
	if svc.Namespace != "kube-system" || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod)) {
		t.Errorf("Service in %q selecting %v, want kube-system selecting the pod's labels %v", svc.Namespace, svc.Spec.Selector, pod)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+" "+string(p.Protocol)+" "+strconv.Itoa(int(p.Port)))
	}
	if diff := cmp.Diff([]string{"dns UDP 53", "dns-tcp TCP 53", "metrics TCP 9153"}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

// TestRenderDNS checks a test's Corefile replaces the manifest's and
// leaves the other objects as they are.
func TestRenderDNS(t *testing.T) {
	static := ".:53 {\n    hosts {\n        10.0.0.1 kubernetes.default.svc.cluster.local\n    }\n}\n"
	plain, replaced := dnsObjects(t, ""), dnsObjects(t, static)
	if got := replaced["ConfigMap/coredns"].(*corev1.ConfigMap).Data["Corefile"]; got != static {
		t.Errorf("Corefile = %q, want %q", got, static)
	}
	delete(plain, "ConfigMap/coredns")
	delete(replaced, "ConfigMap/coredns")
	if diff := cmp.Diff(plain, replaced); diff != "" {
		t.Errorf("the other objects changed (-without +with a Corefile):\n%s", diff)
	}

	if _, err := RenderDNS([]byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n"), testRegistry, static); err == nil {
		t.Error("RenderDNS of a manifest without the ConfigMap = nil, want an error")
	}
	out, err := RenderDNS([]byte("image: ${KIP_DEMO_REGISTRY}/kip-e2e/coredns:1.15.0\n"), testRegistry, "")
	if err != nil || string(out) != "image: "+testRegistry+"/kip-e2e/coredns:1.15.0\n" {
		t.Errorf("RenderDNS = %q, %v; want the registry substituted", out, err)
	}
}

func TestClusterDNSSwitch(t *testing.T) {
	tests := []struct {
		env  string
		want bool
	}{
		{"1", true}, {"true", true}, {"0", false}, {"false", false}, {"", clusterDNSDefault},
	}
	for _, tt := range tests {
		t.Setenv(ClusterDNSEnv, tt.env)
		if got := ClusterDNS(); got != tt.want {
			t.Errorf("ClusterDNS() with %s=%q = %t, want %t", ClusterDNSEnv, tt.env, got, tt.want)
		}
	}
}

func TestClusterDNSFor(t *testing.T) {
	for _, tc := range []struct {
		env, pass string
		all, want bool
	}{
		{pass: PluginLocal, want: clusterDNSDefault},
		{pass: PluginAWS, want: false},
		{pass: PluginGCE, all: true, want: clusterDNSDefault},
		{env: "1", pass: PluginAzure, want: true},
		{env: "0", pass: PluginLocal, want: false},
	} {
		t.Setenv(ClusterDNSEnv, tc.env)
		if got := ClusterDNSFor(tc.pass, tc.all); got != tc.want {
			t.Errorf("ClusterDNSFor(%s, all %t) with %s=%q = %t, want %t", tc.pass, tc.all, ClusterDNSEnv, tc.env, got, tc.want)
		}
	}
}

// TestStaticCorefile checks the test's Corefile is the manifest's with a
// hosts block where the kubernetes block was, and nothing else changed.
func TestStaticCorefile(t *testing.T) {
	got, err := StaticCorefile(map[string]string{
		"kubernetes.default.svc.cluster.local": "10.0.0.1",
		"hello.default.svc.cluster.local":      "10.0.0.42",
	})
	if err != nil {
		t.Fatalf("StaticCorefile: %v", err)
	}
	manifest := dnsObjects(t, "")["ConfigMap/coredns"].(*corev1.ConfigMap).Data["Corefile"]
	want := strings.Replace(manifest, `    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
`, `    hosts {
        10.0.0.42 hello.default.svc.cluster.local
        10.0.0.1 kubernetes.default.svc.cluster.local
    }
`, 1)
	if want == manifest {
		t.Fatalf("the test's copy of the kubernetes block is not in the manifest's Corefile:\n%s", manifest)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StaticCorefile (-want +got):\n%s", diff)
	}

	if _, err := withHosts(".:53 {\n    errors\n}\n", nil); err == nil {
		t.Error("withHosts of a Corefile without a kubernetes block = nil, want an error")
	}
}
