package podrefs

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// ServiceLister reads the cluster's Services from a cache (host/serviceenv'
// informer implements it): the one watch the host keeps, never a request
// per pod.
type ServiceLister interface {
	// List returns the Services of a namespace.
	List(namespace string) ([]*corev1.Service, error)
	// HasSynced reports whether the Services were read at least once.
	HasSynced() bool
}

// Cluster is what a kubelet knows of the cluster beside the pod's own
// references: the Services, for the service environment variables and the
// cluster DNS address, and its DNS settings (node.clusterDNS,
// node.clusterDomain). The zero Cluster knows no Service and no DNS, as a
// kubelet without an API server.
type Cluster struct {
	Services ServiceLister
	// DNS are the configured settings; DNS.Servers empty means the kube-dns
	// Service's addresses, when it has them.
	DNS DNS
}

// DNS is a kubelet's --cluster-dns and --cluster-domain.
type DNS struct {
	// Servers are the cluster DNS servers' IP addresses.
	Servers []string
	// Domain is the cluster domain ("cluster.local").
	Domain string
}

// The Service a kubelet's cluster DNS defaults from, when kip is given no
// address: CoreDNS and kube-dns are deployed behind it.
const (
	dnsServiceNamespace = metav1.NamespaceSystem
	dnsServiceName      = "kube-dns"
)

// masterService is the Service every pod gets the variables of, whatever
// its enableServiceLinks (kubelet_pods.go, masterServices).
const masterService = "kubernetes"

// errServicesNotSynced is transient: the Services are not read yet.
var errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// clusterDNS is what the agent is sent: the configured servers, else the
// ClusterIPs of kube-system/kube-dns when it has them (else none, and a
// ClusterFirst pod falls back to Default on the cell).
func (c Cluster) clusterDNS() (*cellapi.ClusterDNS, error) {
	out := &cellapi.ClusterDNS{Servers: slices.Clone(c.DNS.Servers), Domain: c.DNS.Domain}
	if len(out.Servers) > 0 || c.Services == nil {
		return out, nil
	}
	list, err := c.Services.List(dnsServiceNamespace)
	if err != nil {
		return nil, fmt.Errorf("finding the cluster DNS Service: %w", err)
	}
	for _, svc := range list {
		if svc.Name == dnsServiceName && serviceIPSet(svc) {
			out.Servers = clusterIPs(svc)
		}
	}
	return out, nil
}

// clusterIPs are a Service's ClusterIPs (dual-stack), else its ClusterIP.
func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return slices.Clone(svc.Spec.ClusterIPs)
	}
	return []string{svc.Spec.ClusterIP}
}

// serviceEnv is the service environment of a pod in namespace, as the
// kubelet's getServiceEnvVarMap builds it (pkg/kubelet/kubelet_pods.go):
// the master Service "kubernetes" of namespace default always (as
// KUBERNETES_*), and with enableServiceLinks every Service of the pod's
// namespace that has a ClusterIP; a Service "kubernetes" in the pod's own
// namespace then wins over default's. The variables come in a fixed order
// (the kubelet's is a map's): Services by name, each's variables as
// envvars.FromServices lists them.
func (c Cluster) serviceEnv(namespace string, enableServiceLinks bool) ([]cellapi.EnvVar, error) {
	if c.Services == nil {
		// A kubelet without an API server sets none.
		return nil, nil
	}
	if !c.Services.HasSynced() {
		return nil, errServicesNotSynced
	}
	byName := map[string]*corev1.Service{}
	defaults, err := c.Services.List(metav1.NamespaceDefault)
	if err != nil {
		return nil, fmt.Errorf("listing services for the environment: %w", err)
	}
	for _, svc := range defaults {
		if svc.Name == masterService && serviceIPSet(svc) {
			byName[svc.Name] = svc
		}
	}
	if enableServiceLinks {
		own, err := c.Services.List(namespace)
		if err != nil {
			return nil, fmt.Errorf("listing services for the environment: %w", err)
		}
		for _, svc := range own {
			if serviceIPSet(svc) {
				byName[svc.Name] = svc
			}
		}
	}
	list := make([]*corev1.Service, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		list = append(list, byName[name])
	}
	return fromServices(list), nil
}

// serviceIPSet is v1helper.IsServiceIPSet: a ClusterIP that is neither
// empty nor "None" (headless).
func serviceIPSet(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// fromServices is the kubelet's envvars.FromServices
// (pkg/kubelet/envvars/envvars.go): per Service, <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT (the first port), <NAME>_SERVICE_PORT_<PORT NAME>
// for every named port, and the Docker link variables.
func fromServices(services []*corev1.Service) []cellapi.EnvVar {
	var out []cellapi.EnvVar
	add := func(name, value string) { out = append(out, cellapi.EnvVar{Name: name, Value: value}) }
	for _, svc := range services {
		if !serviceIPSet(svc) || len(svc.Spec.Ports) == 0 {
			continue
		}
		prefix := envVarName(svc.Name)
		add(prefix+"_SERVICE_HOST", svc.Spec.ClusterIP)
		portVar := prefix + "_SERVICE_PORT"
		add(portVar, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
		for _, p := range svc.Spec.Ports {
			if p.Name != "" {
				add(portVar+"_"+envVarName(p.Name), strconv.Itoa(int(p.Port)))
			}
		}
		for i, p := range svc.Spec.Ports {
			protocol := string(corev1.ProtocolTCP)
			if p.Protocol != "" {
				protocol = string(p.Protocol)
			}
			port := strconv.Itoa(int(p.Port))
			url := strings.ToLower(protocol) + "://" + net.JoinHostPort(svc.Spec.ClusterIP, port)
			if i == 0 {
				// Docker special-cases the first port.
				add(prefix+"_PORT", url)
			}
			pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(protocol)
			add(pp, url)
			add(pp+"_PROTO", strings.ToLower(protocol))
			add(pp+"_PORT", port)
			add(pp+"_ADDR", svc.Spec.ClusterIP)
		}
	}
	return out
}

// envVarName is envvars.makeEnvVariableName: upper case, '-' as '_'.
func envVarName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
