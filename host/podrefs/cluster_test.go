package podrefs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
)

// fakeServices lists Services from a slice, as host/serviceenv' cache would.
type fakeServices struct {
	services []*corev1.Service
	unsynced bool
}

func (f *fakeServices) List(namespace string) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, s := range f.services {
		if s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeServices) HasSynced() bool { return !f.unsynced }

// buildService is the kubelet's test helper (kubelet_pods_test.go).
func buildService(name, namespace, clusterIP, protocol string, port int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Ports:     []corev1.ServicePort{{Protocol: corev1.Protocol(protocol), Port: int32(port)}},
			ClusterIP: clusterIP,
		},
	}
}

// TestFromServices is the kubelet's TestFromServices
// (pkg/kubelet/envvars/envvars_test.go), case for case.
func TestFromServices(t *testing.T) {
	sl := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "foo-bar"}, Spec: corev1.ServiceSpec{ClusterIP: "1.2.3.4", Ports: []corev1.ServicePort{{Port: 8080, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "abc-123"}, Spec: corev1.ServiceSpec{ClusterIP: "5.6.7.8", Ports: []corev1.ServicePort{
			{Name: "u-d-p", Port: 8081, Protocol: "UDP"}, {Name: "t-c-p", Port: 8081, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "q-u-u-x"}, Spec: corev1.ServiceSpec{ClusterIP: "9.8.7.6", Ports: []corev1.ServicePort{
			{Port: 8082, Protocol: "TCP"}, {Name: "8083", Port: 8083, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "svrc-clusterip-none"}, Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 8082, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "svrc-clusterip-empty"}, Spec: corev1.ServiceSpec{ClusterIP: "", Ports: []corev1.ServicePort{{Port: 8082, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "super-ipv6"}, Spec: corev1.ServiceSpec{ClusterIP: "2001:DB8::", Ports: []corev1.ServicePort{
			{Name: "u-d-p", Port: 8084, Protocol: "UDP"}, {Name: "t-c-p", Port: 8084, Protocol: "TCP"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sctp-1"}, Spec: corev1.ServiceSpec{ClusterIP: "1.2.3.4", Ports: []corev1.ServicePort{{Port: 777, Protocol: "SCTP"}}}},
	}
	want := vars(
		"FOO_BAR_SERVICE_HOST", "1.2.3.4",
		"FOO_BAR_SERVICE_PORT", "8080",
		"FOO_BAR_PORT", "tcp://1.2.3.4:8080",
		"FOO_BAR_PORT_8080_TCP", "tcp://1.2.3.4:8080",
		"FOO_BAR_PORT_8080_TCP_PROTO", "tcp",
		"FOO_BAR_PORT_8080_TCP_PORT", "8080",
		"FOO_BAR_PORT_8080_TCP_ADDR", "1.2.3.4",
		"ABC_123_SERVICE_HOST", "5.6.7.8",
		"ABC_123_SERVICE_PORT", "8081",
		"ABC_123_SERVICE_PORT_U_D_P", "8081",
		"ABC_123_SERVICE_PORT_T_C_P", "8081",
		"ABC_123_PORT", "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP", "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP_PROTO", "udp",
		"ABC_123_PORT_8081_UDP_PORT", "8081",
		"ABC_123_PORT_8081_UDP_ADDR", "5.6.7.8",
		"ABC_123_PORT_8081_TCP", "tcp://5.6.7.8:8081",
		"ABC_123_PORT_8081_TCP_PROTO", "tcp",
		"ABC_123_PORT_8081_TCP_PORT", "8081",
		"ABC_123_PORT_8081_TCP_ADDR", "5.6.7.8",
		"Q_U_U_X_SERVICE_HOST", "9.8.7.6",
		"Q_U_U_X_SERVICE_PORT", "8082",
		"Q_U_U_X_SERVICE_PORT_8083", "8083",
		"Q_U_U_X_PORT", "tcp://9.8.7.6:8082",
		"Q_U_U_X_PORT_8082_TCP", "tcp://9.8.7.6:8082",
		"Q_U_U_X_PORT_8082_TCP_PROTO", "tcp",
		"Q_U_U_X_PORT_8082_TCP_PORT", "8082",
		"Q_U_U_X_PORT_8082_TCP_ADDR", "9.8.7.6",
		"Q_U_U_X_PORT_8083_TCP", "tcp://9.8.7.6:8083",
		"Q_U_U_X_PORT_8083_TCP_PROTO", "tcp",
		"Q_U_U_X_PORT_8083_TCP_PORT", "8083",
		"Q_U_U_X_PORT_8083_TCP_ADDR", "9.8.7.6",
		"SUPER_IPV6_SERVICE_HOST", "2001:DB8::",
		"SUPER_IPV6_SERVICE_PORT", "8084",
		"SUPER_IPV6_SERVICE_PORT_U_D_P", "8084",
		"SUPER_IPV6_SERVICE_PORT_T_C_P", "8084",
		"SUPER_IPV6_PORT", "udp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_UDP", "udp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_UDP_PROTO", "udp",
		"SUPER_IPV6_PORT_8084_UDP_PORT", "8084",
		"SUPER_IPV6_PORT_8084_UDP_ADDR", "2001:DB8::",
		"SUPER_IPV6_PORT_8084_TCP", "tcp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_TCP_PROTO", "tcp",
		"SUPER_IPV6_PORT_8084_TCP_PORT", "8084",
		"SUPER_IPV6_PORT_8084_TCP_ADDR", "2001:DB8::",
		"SCTP_1_SERVICE_HOST", "1.2.3.4",
		"SCTP_1_SERVICE_PORT", "777",
		"SCTP_1_PORT", "sctp://1.2.3.4:777",
		"SCTP_1_PORT_777_SCTP", "sctp://1.2.3.4:777",
		"SCTP_1_PORT_777_SCTP_PROTO", "sctp",
		"SCTP_1_PORT_777_SCTP_PORT", "777",
		"SCTP_1_PORT_777_SCTP_ADDR", "1.2.3.4",
	)
	if diff := cmp.Diff(want, fromServices(sl)); diff != "" {
		t.Errorf("fromServices (-want +got):\n%s", diff)
	}
}

// vars builds an env list from name, value pairs.
func vars(pairs ...string) []cellapi.EnvVar {
	out := make([]cellapi.EnvVar, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, cellapi.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// linkVars are the variables of a Service with one TCP port.
func linkVars(prefix, ip, port string) []string {
	url := "tcp://" + ip + ":" + port
	p := prefix + "_PORT_" + port + "_TCP"
	return []string{
		prefix + "_SERVICE_HOST", ip, prefix + "_SERVICE_PORT", port, prefix + "_PORT", url,
		p, url, p + "_PROTO", "tcp", p + "_PORT", port, p + "_ADDR", ip,
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestResolveServiceEnv takes its Services and cases from the kubelet's
// TestMakeEnvironmentVariables (pkg/kubelet/kubelet_pods_test.go). The
// kubelet's order is a map's; kip's is the container's variables, then
// the services' by Service name.
func TestResolveServiceEnv(t *testing.T) {
	services := &fakeServices{services: []*corev1.Service{
		buildService("kubernetes", metav1.NamespaceDefault, "1.2.3.1", "TCP", 8081),
		buildService("test", "test1", "1.2.3.3", "TCP", 8083),
		buildService("kubernetes", "test2", "1.2.3.4", "TCP", 8084),
		buildService("test", "test2", "1.2.3.5", "TCP", 8085),
		buildService("test", "test2", "None", "TCP", 8085),
		buildService("test", "test2", "", "TCP", 8085),
		buildService("not-special", metav1.NamespaceDefault, "1.2.3.8", "TCP", 8088),
		buildService("not-special", metav1.NamespaceDefault, "None", "TCP", 8088),
		buildService("not-special", metav1.NamespaceDefault, "", "TCP", 8088),
	}}
	master := linkVars("KUBERNETES", "1.2.3.1", "8081")
	test1 := linkVars("TEST", "1.2.3.3", "8083")
	tests := []struct {
		name     string
		ns       string
		links    *bool
		env      []corev1.EnvVar
		noLister bool
		want     []string
	}{
		{
			name: "api server = Y, kubelet = Y: the container's own win, no duplicates",
			ns:   "test1", links: ptr.To(false),
			env:  append([]corev1.EnvVar{{Name: "FOO", Value: "BAR"}}, envVars(test1)...),
			want: concat([]string{"FOO", "BAR"}, test1, master),
		},
		{
			name: "api server = Y, kubelet = N: no lister, no service variables",
			ns:   "test1", links: ptr.To(false), noLister: true,
			env:  append([]corev1.EnvVar{{Name: "FOO", Value: "BAR"}}, envVars(test1)...),
			want: concat([]string{"FOO", "BAR"}, test1),
		},
		{
			name: "api server = N; kubelet = Y: the master service without links",
			ns:   "test1", links: ptr.To(false),
			env:  []corev1.EnvVar{{Name: "FOO", Value: "BAZ"}},
			want: concat([]string{"FOO", "BAZ"}, master),
		},
		{
			name: "api server = N; kubelet = Y; service env vars",
			ns:   "test1", links: ptr.To(true),
			env:  []corev1.EnvVar{{Name: "FOO", Value: "BAZ"}},
			want: concat([]string{"FOO", "BAZ"}, master, test1),
		},
		{
			name: "enableServiceLinks unset is true, as the API server defaults it",
			ns:   "test1", links: nil,
			env:  []corev1.EnvVar{{Name: "FOO", Value: "BAZ"}},
			want: concat([]string{"FOO", "BAZ"}, master, test1),
		},
		{
			name: "master service in pod ns: default's without links",
			ns:   "test2", links: ptr.To(false),
			env:  []corev1.EnvVar{{Name: "FOO", Value: "ZAP"}},
			want: concat([]string{"FOO", "ZAP"}, master),
		},
		{
			name: "master service in pod ns, service env vars: the namespace's own kubernetes wins",
			ns:   "test2", links: ptr.To(true),
			env:  []corev1.EnvVar{{Name: "FOO", Value: "ZAP"}},
			want: concat([]string{"FOO", "ZAP"}, linkVars("KUBERNETES", "1.2.3.4", "8084"), linkVars("TEST", "1.2.3.5", "8085")),
		},
		{
			name: "pod in master service ns",
			ns:   metav1.NamespaceDefault, links: ptr.To(false),
			want: master,
		},
		{
			name: "pod in master service ns, service env vars",
			ns:   metav1.NamespaceDefault, links: ptr.To(true),
			want: concat(master, linkVars("NOT_SPECIAL", "1.2.3.8", "8088")),
		},
		{
			name: "env expansion, service env vars: $(VAR) sees them, the container's own first",
			ns:   "test1", links: ptr.To(true),
			env: []corev1.EnvVar{
				{Name: "SERVICE_VAR_TEST", Value: "$(TEST_SERVICE_HOST):$(TEST_SERVICE_PORT)"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
				{Name: "OWN_FIRST", Value: "$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
				{Name: "TEST_UNDEFINED", Value: "$(UNDEFINED_VAR)"},
			},
			want: concat([]string{
				"SERVICE_VAR_TEST", "1.2.3.3:8083",
				"KUBERNETES_SERVICE_PORT", "443",
				"OWN_FIRST", "1.2.3.1:443",
				"TEST_UNDEFINED", "$(UNDEFINED_VAR)",
			}, without(master, "KUBERNETES_SERVICE_PORT"), test1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := basePod()
			pod.Namespace = tt.ns
			pod.Spec.EnableServiceLinks = tt.links
			pod.Spec.Containers[0].Env = tt.env
			cluster := Cluster{Services: services}
			if tt.noLister {
				cluster = Cluster{}
			}
			req, err := Resolve(t.Context(), newSource(), cluster, pod, cell, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(vars(tt.want...), req.Env["main"]); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// envVars turns name, value pairs into a container's env.
func envVars(pairs []string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, v := range vars(pairs...) {
		out = append(out, corev1.EnvVar{Name: v.Name, Value: v.Value})
	}
	return out
}

// without drops a variable from name, value pairs.
func without(pairs []string, name string) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != name {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	return out
}

// TestResolveServiceEnvUnsynced: before the Services were read once, a pod
// would miss KUBERNETES_SERVICE_HOST; the kubelet refuses to build its
// environment, and so does Resolve (an error the cell retries, not a
// ResolveError the pod shows).
func TestResolveServiceEnvUnsynced(t *testing.T) {
	_, err := Resolve(t.Context(), newSource(), Cluster{Services: &fakeServices{unsynced: true}}, basePod(), cell, nil)
	var rerr *ResolveError
	if !errors.Is(err, errServicesNotSynced) || errors.As(err, &rerr) {
		t.Errorf("Resolve = %v, want errServicesNotSynced", err)
	}
}

func TestResolveClusterDNS(t *testing.T) {
	kubeDNS := func(ips ...string) *corev1.Service {
		s := buildService("kube-dns", metav1.NamespaceSystem, ips[0], "UDP", 53)
		s.Spec.ClusterIPs = ips[1:]
		return s
	}
	tests := []struct {
		name     string
		dns      DNS
		services []*corev1.Service
		want     *cellapi.ClusterDNS
	}{
		{
			name:     "configured servers win over kube-dns",
			dns:      DNS{Servers: []string{"10.0.0.53"}, Domain: "cluster.local"},
			services: []*corev1.Service{kubeDNS("10.96.0.10")},
			want:     &cellapi.ClusterDNS{Servers: []string{"10.0.0.53"}, Domain: "cluster.local"},
		},
		{
			name:     "none configured: kube-dns's ClusterIP",
			dns:      DNS{Domain: "example.org"},
			services: []*corev1.Service{kubeDNS("10.96.0.10")},
			want:     &cellapi.ClusterDNS{Servers: []string{"10.96.0.10"}, Domain: "example.org"},
		},
		{
			name:     "dual-stack kube-dns: its ClusterIPs",
			dns:      DNS{Domain: "cluster.local"},
			services: []*corev1.Service{kubeDNS("10.96.0.10", "10.96.0.10", "fd00::a")},
			want:     &cellapi.ClusterDNS{Servers: []string{"10.96.0.10", "fd00::a"}, Domain: "cluster.local"},
		},
		{
			name: "a kube-dns elsewhere or headless does not count",
			dns:  DNS{Domain: "cluster.local"},
			services: []*corev1.Service{
				buildService("kube-dns", "default", "10.96.0.11", "UDP", 53),
				buildService("kube-dns", metav1.NamespaceSystem, "None", "UDP", 53),
			},
			want: &cellapi.ClusterDNS{Domain: "cluster.local"},
		},
		{
			name: "nothing known",
			want: &cellapi.ClusterDNS{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := Cluster{Services: &fakeServices{services: tt.services}, DNS: tt.dns}
			req, err := Resolve(t.Context(), newSource(), cluster, basePod(), cell, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, req.ClusterDNS); diff != "" {
				t.Errorf("cluster DNS (-want +got):\n%s", diff)
			}
		})
	}
}
