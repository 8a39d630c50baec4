package clusterip

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// defaultAffinitySeconds is sessionAffinity ClientIP's default timeout
// (corev1.DefaultClientIPServiceAffinitySeconds).
const defaultAffinitySeconds = 10800

// entryOf is what cells program of svc, given its EndpointSlices: nil
// when there is nothing (headless, ExternalName, no IPv4 ClusterIP, no
// TCP or UDP port). sctp names the ports left out because they are SCTP.
// nodeName is the virtual node's, for internalTrafficPolicy Local.
func entryOf(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodeName string) (entry *cellapi.Service, sctp []string) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, nil
	}
	ips := clusterIPs(svc)
	if len(ips) == 0 {
		return nil, nil
	}
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	out := &cellapi.Service{Namespace: svc.Namespace, Name: svc.Name, ClusterIPs: ips}
	for _, sp := range svc.Spec.Ports {
		proto := cmp.Or(sp.Protocol, corev1.ProtocolTCP)
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			sctp = append(sctp, portName(sp))
			continue
		}
		out.Ports = append(out.Ports, cellapi.ServicePort{
			Name: sp.Name, Protocol: string(proto), Port: sp.Port,
			Endpoints: readyEndpoints(eps, sp.Name, proto, local, nodeName),
		})
	}
	if len(out.Ports) == 0 {
		return nil, sctp
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		out.AffinitySeconds = defaultAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			out.AffinitySeconds = *c.ClientIP.TimeoutSeconds
		}
	}
	return out, sctp
}

// clusterIPs are the Service's IPv4 cluster IPs.
func clusterIPs(svc *corev1.Service) []string {
	all := svc.Spec.ClusterIPs
	if len(all) == 0 && svc.Spec.ClusterIP != "" {
		all = []string{svc.Spec.ClusterIP}
	}
	var out []string
	for _, s := range all {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, a.String())
		}
	}
	return out
}

// portName names a Service port for a person: its name, else its number.
func portName(sp corev1.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return strconv.Itoa(int(sp.Port))
}

// readyEndpoints are the ready IPv4 endpoints of the slices for the
// Service port named name, each with the port number its slice resolved,
// sorted and without repeats (an endpoint moving between slices may show
// in two for a moment).
func readyEndpoints(eps []*discoveryv1.EndpointSlice, name string, proto corev1.Protocol, local bool, nodeName string) []cellapi.ServiceEndpoint {
	var all []netip.AddrPort
	for _, slice := range eps {
		if slice.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port, ok := slicePort(slice, name, proto)
		if !ok {
			continue
		}
		for _, ep := range slice.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if local && ptrOr(ep.NodeName, "") != nodeName {
				continue
			}
			if len(ep.Addresses) == 0 {
				continue
			}
			// As kube-proxy: an endpoint's first address is the one used.
			if a, err := netip.ParseAddr(ep.Addresses[0]); err == nil && a.Is4() {
				all = append(all, netip.AddrPortFrom(a, port))
			}
		}
	}
	slices.SortFunc(all, netip.AddrPort.Compare)
	all = slices.Compact(all)
	out := make([]cellapi.ServiceEndpoint, 0, len(all))
	for _, ap := range all {
		out = append(out, cellapi.ServiceEndpoint{IP: ap.Addr().String(), Port: int32(ap.Port())})
	}
	return out
}

// slicePort is the number the slice gives the Service port named name.
func slicePort(slice *discoveryv1.EndpointSlice, name string, proto corev1.Protocol) (uint16, bool) {
	for _, p := range slice.Ports {
		if ptrOr(p.Name, "") != name || ptrOr(p.Protocol, corev1.ProtocolTCP) != proto || p.Port == nil {
			continue
		}
		if n := *p.Port; n > 0 && n <= 65535 {
			return uint16(n), true
		}
	}
	return 0, false
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
