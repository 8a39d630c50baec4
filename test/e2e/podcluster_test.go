//go:build e2e

package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// What a pod in a cell sees of the cluster, as a pod on a kubelet does:
// the service environment variables, /etc/resolv.conf per dnsPolicy,
// /etc/hosts and its hostname. (Resolving names needs a cluster DNS and
// the Services' addresses reachable from the cell; these tests check the
// files.)

// inPod runs a shell script in pod's container main and returns its
// output.
func inPod(t *testing.T, ns, pod, script string) string {
	t.Helper()
	out, code := kubectl(t, "exec", "-n", ns, pod, "-c", "main", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exec %q in %s: exit %d: %s", script, pod, code, out)
	}
	return out
}

// envOf parses `env` output.
func envOf(out string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestServiceEnvironment: a pod gets KUBERNETES_SERVICE_HOST and _PORT
// and, with enableServiceLinks (the default), the variables of every
// Service of its namespace, as the conformance spec "Pods should contain
// environment variables for services" checks; $(VAR) sees them, and they
// never override the container's own. With enableServiceLinks: false only
// the master Service's remain.
func TestServiceEnvironment(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	svc, err := f.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "fooservice"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"name": "server"},
			Ports:    []corev1.ServicePort{{Port: 8765, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	master, err := f.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, masterIP := svc.Spec.ClusterIP, master.Spec.ClusterIP
	masterPort := strconv.Itoa(int(master.Spec.Ports[0].Port))

	linked := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "linked"}, Spec: onKip(sleeper(
		corev1.EnvVar{Name: "FOO_ADDRESS", Value: "$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"},
		corev1.EnvVar{Name: "FOOSERVICE_SERVICE_PORT", Value: "mine"},
	))}
	unlinked := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unlinked"}, Spec: onKip(sleeper())}
	unlinked.Spec.EnableServiceLinks = ptr.To(false)
	runPods(t, ns, "svcenv", linked, unlinked)

	got := envOf(inPod(t, ns, "linked", "env"))
	want := map[string]string{
		"KUBERNETES_SERVICE_HOST":        masterIP,
		"KUBERNETES_SERVICE_PORT":        masterPort,
		"FOOSERVICE_SERVICE_HOST":        ip,
		"FOOSERVICE_SERVICE_PORT":        "mine", // the container's own wins
		"FOOSERVICE_PORT":                "tcp://" + ip + ":8765",
		"FOOSERVICE_PORT_8765_TCP":       "tcp://" + ip + ":8765",
		"FOOSERVICE_PORT_8765_TCP_PROTO": "tcp",
		"FOOSERVICE_PORT_8765_TCP_PORT":  "8765",
		"FOOSERVICE_PORT_8765_TCP_ADDR":  ip,
		// Expanded against what the container defined before it, then
		// the services': FOOSERVICE_SERVICE_PORT comes after.
		"FOO_ADDRESS": ip + ":8765",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("linked pod: %s=%q, want %q", k, got[k], v)
		}
	}

	got = envOf(inPod(t, ns, "unlinked", "env"))
	if got["KUBERNETES_SERVICE_HOST"] != masterIP || got["KUBERNETES_SERVICE_PORT"] != masterPort {
		t.Errorf("unlinked pod: KUBERNETES_SERVICE_HOST=%q _PORT=%q, want %s and %s",
			got["KUBERNETES_SERVICE_HOST"], got["KUBERNETES_SERVICE_PORT"], masterIP, masterPort)
	}
	for k := range got {
		if strings.HasPrefix(k, "FOOSERVICE_") {
			t.Errorf("unlinked pod (enableServiceLinks: false) has %s", k)
		}
	}
}

// cellNameservers are the nameservers of this machine's resolv.conf: what
// a local cell's own resolver configuration holds, and so a Default pod's.
func cellNameservers(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}

// nameserversIn lists the nameserver lines of a resolv.conf.
func nameserversIn(resolv string) []string {
	var out []string
	for _, line := range strings.Split(resolv, "\n") {
		if ns, ok := strings.CutPrefix(line, "nameserver "); ok {
			out = append(out, ns)
		}
	}
	return out
}

// ensureKubeDNS returns the ClusterIP of kube-system/kube-dns, creating
// the Service (without endpoints) if the cluster has none, and whether it
// did so.
func ensureKubeDNS(t *testing.T) (string, bool) {
	t.Helper()
	ctx := t.Context()
	svcs := f.Client.CoreV1().Services(metav1.NamespaceSystem)
	if svc, err := svcs.Get(ctx, "kube-dns", metav1.GetOptions{}); err == nil {
		return svc.Spec.ClusterIP, false
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	svc, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		//nolint:usetesting // a Cleanup: t.Context() has ended
		if err := svcs.Delete(context.Background(), "kube-dns", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting kube-dns: %v", err)
		}
	})
	return svc.Spec.ClusterIP, true
}

// TestResolvConfPerPolicy: /etc/resolv.conf per dnsPolicy. Without a
// cluster DNS (kip's node.clusterDNS is empty in these tests, and the
// cluster has no kube-dns Service yet) a ClusterFirst pod falls back to
// Default, the cell's own resolver, with a MissingClusterDNS event; once
// kube-system/kube-dns has a ClusterIP, a new ClusterFirst pod gets it as
// its only nameserver with the cluster search path and ndots:5. Default
// is the cell's own; None is exactly the pod's dnsConfig.
func TestResolvConfPerPolicy(t *testing.T) {
	kipLogOnFailure(t)
	ctx := t.Context()
	ns := f.Namespace(t)
	cellNS := cellNameservers(t)

	if _, err := f.Client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		runPods(t, ns, "nodns", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-cluster-dns"}, Spec: onKip(sleeper())})
		got := inPod(t, ns, "no-cluster-dns", "cat /etc/resolv.conf")
		if strings.Join(nameserversIn(got), " ") != strings.Join(cellNS, " ") || strings.Contains(got, "ndots:5") {
			t.Errorf("ClusterFirst without a cluster DNS: /etc/resolv.conf =\n%s\nwant the cell's own nameservers %v", got, cellNS)
		}
		f.WaitFor(t, 30*time.Second, "a MissingClusterDNS event on the pod", func(ctx context.Context) (bool, error) {
			evs, err := f.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=no-cluster-dns"})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Reason == "MissingClusterDNS" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, `Falling back to "Default" policy`) {
					return true, nil
				}
			}
			return false, nil
		})
	}

	dnsIP, _ := ensureKubeDNS(t)
	clusterFirst := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cluster-first"}, Spec: onKip(sleeper())}
	def := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: onKip(sleeper())}
	def.Spec.DNSPolicy = corev1.DNSDefault
	none := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Spec: onKip(sleeper())}
	none.Spec.DNSPolicy = corev1.DNSNone
	none.Spec.DNSConfig = &corev1.PodDNSConfig{
		Nameservers: []string{"1.1.1.1"}, Searches: []string{"resolv.conf.local"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
	}
	runPods(t, ns, "policies", clusterFirst, def, none)

	got := inPod(t, ns, "cluster-first", "cat /etc/resolv.conf")
	wantSearch := "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local"
	if !strings.HasPrefix(got, wantSearch) || strings.Join(nameserversIn(got), " ") != dnsIP || !strings.HasSuffix(got, "options ndots:5\n") {
		t.Errorf("ClusterFirst: /etc/resolv.conf =\n%s\nwant %q..., nameserver %s only, options ndots:5", got, wantSearch, dnsIP)
	}
	if got := inPod(t, ns, "default", "cat /etc/resolv.conf"); strings.Join(nameserversIn(got), " ") != strings.Join(cellNS, " ") {
		t.Errorf("Default: /etc/resolv.conf =\n%s\nwant the cell's own nameservers %v", got, cellNS)
	}
	if got, want := inPod(t, ns, "none", "cat /etc/resolv.conf"), "search resolv.conf.local\nnameserver 1.1.1.1\noptions ndots:2 edns0\n"; got != want {
		t.Errorf("None: /etc/resolv.conf = %q, want %q", got, want)
	}
}

// TestHostsAndHostname: /etc/hosts as the kubelet manages it (the pod IP
// with its hostname, the FQDN <hostname>.<subdomain>.<ns>.svc.<domain>
// with a subdomain, hostAliases), /etc/hostname and the hostname: the
// pod's name cut to 63 characters, spec.hostname, or the FQDN with
// setHostnameAsFQDN. A container that mounts its own /etc/hosts keeps it.
func TestHostsAndHostname(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	sub := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "querier"}, Spec: onKip(sleeper())}
	sub.Spec.Hostname, sub.Spec.Subdomain = "dns-querier-1", "dns-test-service"
	sub.Spec.HostAliases = []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.remote", "bar.remote"}}}
	fqdn := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fqdn"}, Spec: onKip(sleeper())}
	fqdn.Spec.Hostname, fqdn.Spec.Subdomain, fqdn.Spec.SetHostnameAsFQDN = "web-0", "web", ptr.To(true)
	long := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("l", 60) + "-long-name"}, Spec: onKip(sleeper())}
	if _, err := f.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "own-hosts"}, Data: map[string]string{"hosts": "10.9.9.9	own\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "own-hosts"}, Spec: onKip(sleeper())}
	own.Spec.Volumes = []corev1.Volume{{Name: "hosts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "own-hosts"}}}}}
	own.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts", SubPath: "hosts"}}
	got := runPods(t, ns, "hosts", sub, fqdn, long, own)

	domain := "dns-test-service." + ns + ".svc.cluster.local"
	hosts := inPod(t, ns, "querier", "cat /etc/hosts")
	for _, line := range []string{
		"# Kubernetes-managed hosts file.\n",
		"127.0.0.1\tlocalhost\n",
		got["querier"].Status.PodIP + "\tdns-querier-1." + domain + "\tdns-querier-1\n",
		"# Entries added by HostAliases.\n123.45.67.89\tfoo.remote\tbar.remote\n",
	} {
		if !strings.Contains(hosts, line) {
			t.Errorf("querier: /etc/hosts lacks %q:\n%s", line, hosts)
		}
	}
	for pod, want := range map[string]string{
		"querier": "dns-querier-1",
		"fqdn":    "web-0.web." + ns + ".svc.cluster.local",
		long.Name: strings.Repeat("l", 60) + "-lo",
	} {
		if out := inPod(t, ns, pod, "cat /etc/hostname; hostname"); out != want+"\n"+want+"\n" {
			t.Errorf("%s: /etc/hostname and hostname = %q, want %s twice", pod, out, want)
		}
	}
	if out := inPod(t, ns, "own-hosts", "cat /etc/hosts"); out != "10.9.9.9\town\n" {
		t.Errorf("a container that mounts its own /etc/hosts sees %q, want its own", out)
	}
}
