package pod

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// The hosts and hostname cases are the kubelet's (kubelet_pods_test.go,
// v1.36: TestManagedHostsFileContent, TestNodeHostsFileContent,
// TestTruncatePodHostname, TestGeneratePodHostNameAndDomain).

const localhostEntries = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"

func TestManagedHostsFileContent(t *testing.T) {
	aliases := []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}}
	tests := []struct {
		ips              []string
		hostname, domain string
		aliases          []corev1.HostAlias
		want             string
	}{
		{[]string{"123.45.67.89"}, "podFoo", "", nil,
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "123.45.67.89\tpodFoo\n"},
		{[]string{"203.0.113.1"}, "podFoo", "domainFoo", nil,
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"},
		{[]string{"203.0.113.1"}, "podFoo", "domainFoo", aliases,
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n"},
		{[]string{"203.0.113.1"}, "podFoo", "domainFoo", append(aliases, corev1.HostAlias{IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}}),
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
		{[]string{"203.0.113.1", "fd00::6"}, "podFoo", "domainFoo", nil,
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, string(managedHostsFileContent(tt.ips, tt.hostname, tt.domain, tt.aliases))); diff != "" {
			t.Errorf("managedHostsFileContent(%v, %s, %s) (-want +got):\n%s", tt.ips, tt.hostname, tt.domain, diff)
		}
	}
}

func TestNodeHostsFileContent(t *testing.T) {
	raw := "# hosts file for testing.\n" + localhostEntries + "123.45.67.89\tsome.domain\n"
	tests := []struct {
		aliases []corev1.HostAlias
		want    string
	}{
		{nil, "# Kubernetes-managed hosts file (host network).\n" + raw},
		{[]corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}, {IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}}},
			"# Kubernetes-managed hosts file (host network).\n" + raw + "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, string(nodeHostsFileContent([]byte(raw), tt.aliases))); diff != "" {
			t.Errorf("nodeHostsFileContent (-want +got):\n%s", diff)
		}
	}
}

func TestTruncateHostname(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"valid hostname":      {"test.pod.hostname", "test.pod.hostname"},
		"too long hostname":   {"1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567"},
		"hostname end with .": {"1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456.1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456"},
		"hostname end with -": {"1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456-1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456"},
	}
	for name, tt := range tests {
		got, err := truncateHostname("test-pod", tt.in)
		if err != nil || got != tt.want {
			t.Errorf("%s: truncateHostname = %q, %v; want %q", name, got, err, tt.want)
		}
	}
}

func TestPodHostnameAndDomain(t *testing.T) {
	tests := []struct {
		name                               string
		podName, hostname, subdomain       string
		override                           *string
		wantHostname, wantDomain, errorHas string
	}{
		{name: "Default behavior - pod name as hostname", podName: "test-pod", wantHostname: "test-pod"},
		{name: "Custom Hostname - uses pod.Spec.Hostname", podName: "test-pod", hostname: "custom-hostname", wantHostname: "custom-hostname"},
		{name: "Custom Subdomain - constructs FQDN", podName: "test-pod", subdomain: "my-subdomain", wantHostname: "test-pod", wantDomain: "my-subdomain.default.svc.cluster.local"},
		{name: "Custom Hostname and Subdomain - uses both", podName: "test-pod", hostname: "custom-hostname", subdomain: "my-subdomain", wantHostname: "custom-hostname", wantDomain: "my-subdomain.default.svc.cluster.local"},
		{name: "HostnameOverride - overrides all", podName: "test-pod", hostname: "custom-hostname", subdomain: "my-subdomain", override: ptr.To("override-hostname"), wantHostname: "override-hostname"},
		{name: "HostnameOverride - invalid hostname", podName: "test-pod", override: ptr.To("Invalid-Hostname-!"), errorHas: `pod HostnameOverride "Invalid-Hostname-!" is not a valid DNS subdomain`},
		{name: "HostnameOverride - valid DNS hostname", podName: "test-pod", override: ptr.To("valid.hostname"), wantHostname: "valid.hostname"},
		{name: "Hostname Truncation - pod name is too long", podName: strings.Repeat("a", 65), wantHostname: strings.Repeat("a", 63)},
		{name: "Validation - invalid hostname", podName: "test-pod", hostname: "Invalid-Hostname-!", errorHas: `pod Hostname "Invalid-Hostname-!" is not a valid DNS label`},
		{name: "Validation - invalid subdomain", podName: "test-pod", subdomain: "invalid_subdomain", errorHas: `pod Subdomain "invalid_subdomain" is not a valid DNS label`},
		{name: "Validation - too long hostname", podName: "test-pod", hostname: strings.Repeat("a", 64), errorHas: "must be no more than 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tt.podName, Namespace: "default"},
				Spec:       corev1.PodSpec{Hostname: tt.hostname, Subdomain: tt.subdomain, HostnameOverride: tt.override},
			}
			hostname, domain, err := podHostnameAndDomain(pod, "cluster.local")
			if tt.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errorHas) {
					t.Errorf("error = %v, want one saying %q", err, tt.errorHas)
				}
				return
			}
			if err != nil || hostname != tt.wantHostname || domain != tt.wantDomain {
				t.Errorf("= %q, %q, %v; want %q, %q", hostname, domain, err, tt.wantHostname, tt.wantDomain)
			}
		})
	}
}

func TestKernelHostname(t *testing.T) {
	tests := []struct {
		name, hostname, domain string
		fqdn                   *bool
		want                   string
		wantErr                bool
	}{
		{name: "no FQDN asked", hostname: "web-0", domain: "web.ns.svc.cluster.local", want: "web-0"},
		{name: "FQDN asked, no domain", hostname: "web-0", fqdn: ptr.To(true), want: "web-0"},
		{name: "FQDN asked", hostname: "web-0", domain: "web.ns.svc.cluster.local", fqdn: ptr.To(true), want: "web-0.web.ns.svc.cluster.local"},
		{name: "FQDN false", hostname: "web-0", domain: "web.ns.svc.cluster.local", fqdn: ptr.To(false), want: "web-0"},
		{name: "FQDN of 64 characters fits", hostname: strings.Repeat("a", 39), domain: "web.ns.svc.cluster.local", fqdn: ptr.To(true), want: strings.Repeat("a", 39) + ".web.ns.svc.cluster.local"},
		{name: "FQDN of 65 characters does not", hostname: strings.Repeat("a", 40), domain: "web.ns.svc.cluster.local", fqdn: ptr.To(true), wantErr: true},
	}
	for _, tt := range tests {
		got, err := kernelHostname(tt.hostname, tt.domain, tt.fqdn)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: kernelHostname = %q, %v; want %q (error: %v)", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// etcPod is a pod with the fields the /etc files are made of.
func etcPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "uid-1"},
		Spec: corev1.PodSpec{
			Hostname: "web-0", Subdomain: "web", DNSPolicy: corev1.DNSClusterFirst,
			HostAliases: []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db", "db.local"}}},
			Containers: []corev1.Container{
				{Name: "app"},
				{Name: "own-hosts", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/etc/hosts/"}}},
				{Name: "ro", SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}},
			},
		},
	}
}

// newTestEtc returns etcFiles writing under a temporary directory, with a
// resolv.conf and a hosts file of the cell's own.
func newTestEtc(t *testing.T) *etcFiles {
	t.Helper()
	dir := t.TempDir()
	resolv := filepath.Join(dir, "cell-resolv.conf")
	hosts := filepath.Join(dir, "cell-hosts")
	if err := os.WriteFile(resolv, []byte("nameserver 8.8.8.8\nsearch host.domain\noptions edns0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost cell\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newEtcFiles(etcConfig{dir: filepath.Join(dir, "etc"), resolvConf: resolv, hostsFile: hosts, podIP: "10.213.0.7"}, slog.New(slog.DiscardHandler))
}

func readEtc(t *testing.T, e *etcFiles) map[string]string {
	t.Helper()
	out := map[string]string{}
	for path, file := range e.written {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = string(data)
	}
	return out
}

func TestEtcFiles(t *testing.T) {
	e := newTestEtc(t)
	pod := etcPod()
	cluster := ClusterDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"}
	if w := e.sync(t.Context(), &Desired{Generation: 1, Pod: pod, DNS: cluster}); len(w) != 0 {
		t.Errorf("warnings = %v, want none", w)
	}
	want := map[string]string{
		etcResolvConf: "search shop.svc.cluster.local svc.cluster.local cluster.local host.domain\nnameserver 10.96.0.10\noptions ndots:5\n",
		etcHosts: "# Kubernetes-managed hosts file.\n" + localhostEntries + "10.213.0.7\tweb-0.web.shop.svc.cluster.local\tweb-0\n" +
			"\n# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n",
		etcHostname: "web-0\n",
	}
	if diff := cmp.Diff(want, readEtc(t, e)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if got := e.containerHostname(); got != "web-0" {
		t.Errorf("hostname = %q, want web-0", got)
	}

	// Every container gets the files, but not where it mounts a volume
	// itself; /etc/hosts is read-write, the others follow
	// readOnlyRootFilesystem.
	dir := e.cfg.dir
	mount := func(name string, ro bool) runtime.Mount {
		return runtime.Mount{Source: filepath.Join(dir, name), Destination: "/etc/" + name, ReadOnly: ro}
	}
	wantMounts := map[string][]runtime.Mount{
		"app":       {mount("hosts", false), mount("hostname", false), mount("resolv.conf", false)},
		"own-hosts": {mount("hostname", false), mount("resolv.conf", false)},
		"ro":        {mount("hosts", false), mount("hostname", true), mount("resolv.conf", true)},
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		got, err := e.mounts(c)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantMounts[c.Name], got); diff != "" {
			t.Errorf("mounts of %s (-want +got):\n%s", c.Name, diff)
		}
	}

	// A new generation with another cluster DNS rewrites resolv.conf in
	// place: a bind mount of it sees the new content.
	before := inode(t, filepath.Join(dir, "resolv.conf"))
	cluster.Servers = []string{"10.96.0.53"}
	e.sync(t.Context(), &Desired{Generation: 2, Pod: pod, DNS: cluster})
	if got := readEtc(t, e)[etcResolvConf]; !strings.Contains(got, "nameserver 10.96.0.53\n") {
		t.Errorf("resolv.conf after the change:\n%s", got)
	}
	if after := inode(t, filepath.Join(dir, "resolv.conf")); after != before {
		t.Errorf("resolv.conf was replaced (inode %d → %d), not rewritten", before, after)
	}
	// An older generation changes nothing.
	e.sync(t.Context(), &Desired{Generation: 1, Pod: pod, DNS: ClusterDNS{Servers: []string{"10.0.0.1"}}})
	if got := readEtc(t, e)[etcResolvConf]; !strings.Contains(got, "nameserver 10.96.0.53\n") {
		t.Errorf("an older generation rewrote resolv.conf:\n%s", got)
	}

	if err := e.cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after cleanup: %v, want the directory gone", err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestEtcFilesMissingClusterDNS: without a cluster DNS a ClusterFirst pod
// gets the cell's own resolver, and the warning once, not at every
// generation; it is recorded again once it changes.
func TestEtcFilesMissingClusterDNS(t *testing.T) {
	e := newTestEtc(t)
	pod := etcPod()
	w := e.sync(t.Context(), &Desired{Generation: 1, Pod: pod, DNS: ClusterDNS{Domain: "cluster.local"}})
	if len(w) != 1 || w[0].Reason != ReasonMissingClusterDNS || !strings.Contains(w[0].Message, `Falling back to "Default" policy`) {
		t.Errorf("warnings = %v, want MissingClusterDNS", w)
	}
	if got := readEtc(t, e)[etcResolvConf]; got != "search host.domain\nnameserver 8.8.8.8\noptions edns0\n" {
		t.Errorf("resolv.conf = %q, want the cell's own", got)
	}
	if w := e.sync(t.Context(), &Desired{Generation: 2, Pod: pod, DNS: ClusterDNS{Domain: "cluster.local"}}); len(w) != 0 {
		t.Errorf("the same warning again at generation 2: %v", w)
	}
	e.sync(t.Context(), &Desired{Generation: 3, Pod: pod, DNS: ClusterDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"}})
	if w := e.sync(t.Context(), &Desired{Generation: 4, Pod: pod, DNS: ClusterDNS{Domain: "cluster.local"}}); len(w) != 1 {
		t.Errorf("warnings after the cluster DNS went away again = %v, want MissingClusterDNS", w)
	}
}

func TestEtcFilesHostNetwork(t *testing.T) {
	e := newTestEtc(t)
	pod := etcPod()
	pod.Spec.HostNetwork = true
	e.sync(t.Context(), &Desired{Generation: 1, Pod: pod, DNS: ClusterDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"}})
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		// ClusterFirst on the host network is Default.
		etcResolvConf: "search host.domain\nnameserver 8.8.8.8\noptions edns0\n",
		etcHosts:      "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost cell\n\n# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n",
		etcHostname:   host + "\n",
	}
	if diff := cmp.Diff(want, readEtc(t, e)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if got := e.containerHostname(); got != "" {
		t.Errorf("hostname = %q, want none: the cell's own", got)
	}
}

// TestEtcFilesFailure: a FQDN too long for the kernel keeps the
// containers from starting, with the kubelet's message.
func TestEtcFilesFailure(t *testing.T) {
	e := newTestEtc(t)
	pod := etcPod()
	pod.Spec.Hostname = strings.Repeat("h", 50)
	pod.Spec.SetHostnameAsFQDN = ptr.To(true)
	e.sync(t.Context(), &Desired{Generation: 1, Pod: pod, DNS: ClusterDNS{Domain: "cluster.local"}})
	if _, err := e.mounts(&pod.Spec.Containers[0]); err == nil || !strings.Contains(err.Error(), "FQDN") {
		t.Errorf("mounts = %v, want the FQDN error", err)
	}
}

// TestManagerMountsEtcFiles: the manager writes the files before the
// first container starts, mounts them into it, sets the hostname, and
// records the DNS warning as a pod event.
func TestManagerMountsEtcFiles(t *testing.T) {
	rt := newFakeRuntime()
	dir := t.TempDir()
	m := New(Config{
		Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7",
		EtcDir: filepath.Join(dir, "etc"), Backoff: testBackoff,
	})
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.Subdomain = "web"
	pod.Spec.SetHostnameAsFQDN = ptr.To(true)
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: pod, DNS: ClusterDNS{Domain: "cluster.local"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	spec := rt.startedSpecs()[0]
	if spec.Hostname != "p.web.ns.svc.cluster.local" {
		t.Errorf("hostname = %q, want the FQDN", spec.Hostname)
	}
	var dests []string
	for _, mnt := range spec.Mounts {
		dests = append(dests, mnt.Destination)
	}
	if diff := cmp.Diff([]string{etcHosts, etcHostname, etcResolvConf}, dests); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	// No cluster DNS and no resolv.conf of the cell's: Default is the
	// local resolver, and the pod hears why.
	if data, err := os.ReadFile(filepath.Join(dir, "etc", "resolv.conf")); err != nil || string(data) != "search .\nnameserver 127.0.0.1\n" {
		t.Errorf("resolv.conf = %q, %v", data, err)
	}
	found := false
	for _, e := range m.Events() {
		found = found || (e.Reason == ReasonMissingClusterDNS && e.Type == EventWarning && e.Container == "")
	}
	if !found {
		t.Errorf("events %+v, want a MissingClusterDNS warning", m.Events())
	}
	deletePod(t, m, time.Second)
	if _, err := os.Stat(filepath.Join(dir, "etc")); !os.IsNotExist(err) {
		t.Errorf("after Delete: %v, want the files gone", err)
	}
}
