package clusterip

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cellapi "github.com/kipcell/kip/cell/api"
)

func service(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.10", ClusterIPs: []string{"10.0.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// ep is an endpoint; ready nil leaves the condition unset.
func ep(ip string, ready *bool, node string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if node != "" {
		e.NodeName = &node
	}
	return e
}

func slice(name, svc string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family, Ports: ports, Endpoints: eps,
	}
}

func port(name string, proto corev1.Protocol, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &n}
}

func TestEntryOf(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	http := []discoveryv1.EndpointPort{port("http", corev1.ProtocolTCP, 8080)}
	web := func(eps ...cellapi.ServiceEndpoint) *cellapi.Service {
		return &cellapi.Service{Namespace: "default", Name: "web", ClusterIPs: []string{"10.0.0.10"},
			Ports: []cellapi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}}}
	}
	at := func(ip string, p int32) cellapi.ServiceEndpoint { return cellapi.ServiceEndpoint{IP: ip, Port: p} }
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   *cellapi.Service
		sctp   []string
	}{
		{name: "ready endpoints only, sorted, once each; unset readiness is ready",
			svc: service("web"),
			slices: []*discoveryv1.EndpointSlice{
				slice("web-a", "web", discoveryv1.AddressTypeIPv4, http, ep("10.1.0.9", yes, ""), ep("10.1.0.5", nil, ""), ep("10.1.0.7", no, "")),
				// The same endpoint in a second slice, for a moment.
				slice("web-b", "web", discoveryv1.AddressTypeIPv4, http, ep("10.1.0.5", yes, "")),
				slice("web-v6", "web", discoveryv1.AddressTypeIPv6, http, ep("fd00::5", yes, "")),
			},
			want: web(at("10.1.0.5", 8080), at("10.1.0.9", 8080))},
		{name: "no endpoints: the port is there, empty (cells refuse it)",
			svc: service("web"), want: web()},
		{name: "a named target port resolves per slice",
			svc: service("web"),
			slices: []*discoveryv1.EndpointSlice{
				slice("web-a", "web", discoveryv1.AddressTypeIPv4, http, ep("10.1.0.5", yes, "")),
				slice("web-b", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{port("http", corev1.ProtocolTCP, 9090)}, ep("10.1.0.6", yes, "")),
				// Another port's numbers do not count for http.
				slice("web-c", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{port("metrics", corev1.ProtocolTCP, 9100)}, ep("10.1.0.7", yes, "")),
			},
			want: web(at("10.1.0.5", 8080), at("10.1.0.6", 9090))},
		{name: "TCP and UDP; SCTP is left out and named",
			svc: service("dns", func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
					{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
					{Name: "", Protocol: corev1.ProtocolSCTP, Port: 9999},
				}
			}),
			slices: []*discoveryv1.EndpointSlice{slice("dns-a", "dns", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{port("dns", corev1.ProtocolUDP, 5353), port("dns-tcp", corev1.ProtocolTCP, 5353)}, ep("10.1.0.8", yes, ""))},
			want: &cellapi.Service{Namespace: "default", Name: "dns", ClusterIPs: []string{"10.0.0.10"}, Ports: []cellapi.ServicePort{
				{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: []cellapi.ServiceEndpoint{at("10.1.0.8", 5353)}},
				{Name: "dns-tcp", Protocol: "TCP", Port: 53, Endpoints: []cellapi.ServiceEndpoint{at("10.1.0.8", 5353)}},
			}},
			sctp: []string{"9999"}},
		{name: "only SCTP: nothing to program",
			svc: service("s", func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Name: "s", Protocol: corev1.ProtocolSCTP, Port: 1}}
			}),
			sctp: []string{"s"}},
		{name: "ClientIP affinity, default timeout",
			svc:  service("web", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
			want: func() *cellapi.Service { s := web(); s.AffinitySeconds = 10800; return s }()},
		{name: "ClientIP affinity, its own timeout",
			svc: service("web", func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			}),
			want: func() *cellapi.Service { s := web(); s.AffinitySeconds = 60; return s }()},
		{name: "NodePort: its ClusterIP part",
			svc:  service("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30080 }),
			want: web()},
		{name: "dual stack: the IPv4 ClusterIP",
			svc: service("web", func(s *corev1.Service) {
				s.Spec.ClusterIPs = []string{"fd00::10", "10.0.0.10"}
				s.Spec.ClusterIP = "fd00::10"
			}),
			want: web()},
		{name: "headless: nothing",
			svc: service("web", func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			})},
		{name: "ExternalName: nothing",
			svc: service("web", func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "example.com", "", nil
			})},
		{name: "internalTrafficPolicy Local: endpoints on this node",
			svc: service("web", func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}),
			slices: []*discoveryv1.EndpointSlice{slice("web-a", "web", discoveryv1.AddressTypeIPv4, http,
				ep("10.1.0.5", yes, "kip"), ep("10.1.0.6", yes, "other"), ep("10.1.0.7", yes, ""))},
			want: web(at("10.1.0.5", 8080))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sctp := entryOf(tt.svc, tt.slices, "kip")
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.sctp, sctp); diff != "" {
				t.Errorf("SCTP ports (-want +got):\n%s", diff)
			}
		})
	}
}
