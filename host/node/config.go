package node

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kipcell/kip/host/setting"
)

// Defaults of Config.
const (
	DefaultName                 = "kip"
	DefaultTaint                = "virtual-kubelet.io/provider=kip:NoSchedule"
	DefaultListenAddress        = ":10250"
	DefaultLeaseDuration        = 40 * time.Second
	DefaultStatusUpdateInterval = time.Minute
	DefaultWorkers              = 10
	DefaultHealthGrace          = 2 * time.Minute
	DefaultArch                 = "amd64"
	DefaultCPU                  = "1000"
	DefaultMemory               = "4Ti"
	DefaultPods                 = "1000"
	DefaultGPUs                 = "64"
	DefaultEphemeralStorage     = "100Ti"
	DefaultClusterDomain        = "cluster.local"
)

// Well-known labels the node sets or deliberately leaves to an administrator.
const (
	LabelType     = "type"
	LabelTypeKip  = "virtual-kubelet"
	LabelRole     = "kubernetes.io/role"
	LabelRoleKip  = "agent"
	LabelHostname = corev1.LabelHostname
	LabelOS       = corev1.LabelOSStable
	LabelArch     = corev1.LabelArchStable
)

// Config configures the virtual node. Its fields with a koanf tag are the
// node section of kip.yaml, each tag its key; the daemon sets Name (from
// nodeName) and Version. Build it with DefaultConfig and adjust; New fills
// zero fields with the defaults above and validates it.
type Config struct {
	// Name is the Node's name (a DNS label) and, with a node identity,
	// must match the system:node:<name> credentials.
	Name string `koanf:"-"`
	// Labels are added to the Node's own labels (type, hostname, os,
	// arch). Under NodeRestriction a node identity may only set
	// kubernetes.io/ and k8s.io/ labels on the kubelet's allowed list.
	Labels map[string]string `koanf:"-"`
	// Annotations are set on the Node when it is registered and by every
	// status update (the leader's kept-logs advertisement, host/keptlogs).
	// NodeRestriction lets a node identity change its own Node's
	// annotations.
	Annotations map[string]string `koanf:"-"`
	// Taint is registered with the Node, in kubectl's key[=value]:Effect
	// form; empty (or "none") registers none. A node identity may set
	// taints when it registers but not change them afterwards
	// (NodeRestriction).
	Taint string `koanf:"taint"`
	// SetRoleLabel adds kubernetes.io/role=agent. NodeRestriction forbids
	// a node identity to set it, so only enable it when kip runs with
	// broader credentials; otherwise kip logs that an administrator should
	// add it.
	SetRoleLabel bool `koanf:"setRoleLabel"`
	// Capacity is the Node's capacity and allocatable.
	Capacity Capacity `koanf:"capacity"`
	// Arch is the kubernetes.io/arch label and NodeInfo architecture.
	Arch string `koanf:"arch"`
	// Zone, when set, is the one zone the node's cells are launched in
	// (host/cells holds the matcher to it), so that the node can offer
	// that zone's topology to volumes: it carries
	// topology.kubernetes.io/zone=<zone> and each volume driver's zone
	// key (ZoneKey: topology.ebs.csi.aws.com/zone, ...), and its CSINode
	// lists that key, which the external-provisioner of a
	// WaitForFirstConsumer StorageClass reads to create a disk there. A
	// label has one value, so a node spans one zone: run one Kip node per
	// zone where pods use volumes (docs/volumes.md). Empty: any zone, no
	// zone labels.
	Zone string `koanf:"zone"`
	// VolumeDrivers are the CSI drivers whose volumes the cloud plugin
	// attaches (GetInfoResponse.VolumeDrivers) when kip starts; the
	// daemon sets them. The zone labels and the CSINode list them until
	// a VolumeDriverReporter answers others (a plugin swapped).
	VolumeDrivers []string `koanf:"-"`
	// InternalIP is the address the API server dials for the kubelet API
	// (kubectl logs, exec, port-forward). Empty picks the first global
	// unicast IPv4 address of this host. In a Deployment, set it from
	// status.podIP (KIP_NODE_INTERNAL_IP).
	InternalIP string `koanf:"internalIP"`
	// ListenAddress is where the kubelet API listens (host:port). Port 0
	// picks a free port; the Node's daemon endpoint carries the real one.
	ListenAddress string `koanf:"listenAddress"`
	// TLSCertFile and TLSKeyFile are the kubelet API's serving certificate.
	// Both empty: a self-signed certificate for InternalIP and Name is
	// generated and kept in memory (the API server does not verify kubelet
	// serving certificates unless --kubelet-certificate-authority is set).
	TLSCertFile string `koanf:"tlsCertFile"`
	TLSKeyFile  string `koanf:"tlsKeyFile"`
	// ClientCAFile holds the CA(s) whose client certificates the kubelet
	// API accepts: the CA of the API server's --kubelet-client-certificate
	// (usually the cluster CA). Empty: only bearer tokens are accepted, so
	// the API server cannot reach logs or exec.
	ClientCAFile string `koanf:"clientCAFile"`
	// LeaseDurationSeconds is the node Lease's duration; it is renewed
	// every quarter of it.
	LeaseDurationSeconds int `koanf:"leaseDurationSeconds"`
	// StatusUpdateInterval is how often the full node status is written.
	StatusUpdateInterval time.Duration `koanf:"statusUpdateInterval"`
	// Workers is the number of pod-controller workers per queue.
	Workers int `koanf:"workers"`
	// ClusterDNS and ClusterDomain are kubelet settings this package only
	// owns (defaults, Validate): the daemon hands them to the cells
	// (podrefs.Cluster), whose agents write the pods' resolv.conf.
	//
	// ClusterDNS are the cluster DNS servers' IP addresses, a kubelet's
	// --cluster-dns: the nameservers of a pod with dnsPolicy ClusterFirst.
	// Empty: the ClusterIP of the kube-dns Service in kube-system while it
	// has one; with neither, such a pod falls back to dnsPolicy Default
	// with a MissingClusterDNS warning event, as on a kubelet.
	ClusterDNS []string `koanf:"clusterDNS"`
	// ClusterDomain is the cluster's DNS domain, a kubelet's
	// --cluster-domain: the search path <ns>.svc.<domain> svc.<domain>
	// <domain> and the FQDN of a pod with a subdomain; default
	// cluster.local (it may not be empty).
	ClusterDomain string `koanf:"clusterDomain"`
	// HealthGrace is how long Pods.Healthy (when implemented) must fail
	// without interruption before Ping fails and the lease stops being
	// renewed. Backend restarts shorter than this never make the node
	// NotReady.
	HealthGrace time.Duration `koanf:"-"`
	// Version is kip's version; the kubelet version reads kip/<Version>.
	Version string `koanf:"-"`
}

// Capacity is the Node's capacity and allocatable, as Kubernetes
// quantities (64, 500m, 256Gi).
type Capacity struct {
	CPU    string `koanf:"cpu"`
	Memory string `koanf:"memory"`
	Pods   string `koanf:"pods"`
	// GPUs is the capacity of each GPU resource (nvidia.com/gpu, ...) the
	// cell backend offers (ResourceReporter: the plugin's catalog has GPU
	// instance types); the scheduler places a pod that requests one only
	// on a node that lists it. Default 64.
	GPUs string `koanf:"gpus"`
	// EphemeralStorage is the Node's ephemeral-storage: a pod with an
	// ephemeral-storage request or limit (the API server makes a limit
	// its request) is placed only on a node that lists enough of it. Each
	// cell holds its pod to its limits itself (cell/ephemeral). Default
	// 100Ti, a ceiling like memory's.
	EphemeralStorage string `koanf:"ephemeralStorage"`
}

// DefaultConfig returns the defaults for a node called name.
func DefaultConfig(name string) Config {
	return Config{
		Name:                 name,
		Taint:                DefaultTaint,
		Capacity:             Capacity{CPU: DefaultCPU, Memory: DefaultMemory, Pods: DefaultPods, GPUs: DefaultGPUs, EphemeralStorage: DefaultEphemeralStorage},
		Arch:                 DefaultArch,
		ListenAddress:        DefaultListenAddress,
		LeaseDurationSeconds: int(DefaultLeaseDuration / time.Second),
		StatusUpdateInterval: DefaultStatusUpdateInterval,
		Workers:              DefaultWorkers,
		HealthGrace:          DefaultHealthGrace,
		ClusterDomain:        DefaultClusterDomain,
	}
}

// maxNameservers is how many nameservers a pod's resolv.conf may hold
// (the API's validation.MaxDNSNameservers, glibc's MAXNS).
const maxNameservers = 3

var taintRE = regexp.MustCompile(`^([^=:]+)(?:=([^:]*))?:([A-Za-z]+)$`)

// ParseTaint parses kubectl's taint syntax, key[=value]:Effect. An empty
// string or "none" means no taint (nil).
func ParseTaint(s string) (*corev1.Taint, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	m := taintRE.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("%q is not key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute (empty for no taint)", s)
	}
	t := &corev1.Taint{Key: m[1], Value: m[2], Effect: corev1.TaintEffect(m[3])}
	return t, validateTaint(t)
}

func validateTaint(t *corev1.Taint) error {
	var errs []error
	for _, msg := range validation.IsQualifiedName(t.Key) {
		errs = append(errs, fmt.Errorf("taint key %q: %s", t.Key, msg))
	}
	if t.Value != "" {
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("taint value %q: %s", t.Value, msg))
		}
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, fmt.Errorf("taint effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields; Taint, Labels and the files stay as set.
func (c Config) withDefaults() Config {
	d := DefaultConfig(DefaultName)
	if c.Name == "" {
		c.Name = d.Name
	}
	for _, f := range []struct{ v, d *string }{
		{&c.Capacity.CPU, &d.Capacity.CPU}, {&c.Capacity.Memory, &d.Capacity.Memory}, {&c.Capacity.Pods, &d.Capacity.Pods}, {&c.Capacity.GPUs, &d.Capacity.GPUs}, {&c.Capacity.EphemeralStorage, &d.Capacity.EphemeralStorage},
		{&c.Arch, &d.Arch}, {&c.ListenAddress, &d.ListenAddress}, {&c.ClusterDomain, &d.ClusterDomain},
	} {
		if *f.v == "" {
			*f.v = *f.d
		}
	}
	if c.LeaseDurationSeconds == 0 {
		c.LeaseDurationSeconds = d.LeaseDurationSeconds
	}
	if c.StatusUpdateInterval == 0 {
		c.StatusUpdateInterval = d.StatusUpdateInterval
	}
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.HealthGrace == 0 {
		c.HealthGrace = d.HealthGrace
	}
	return c
}

var (
	// quantityRE is a Kubernetes quantity without sign or exponent.
	quantityRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$`)
	archRE     = regexp.MustCompile(`^[a-z0-9]+$`)
)

// ValidateName checks a node name: a DNS label.
func ValidateName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not a DNS label: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// Validate checks a Config as New uses it (after defaults) or as kip.yaml
// gives it. A bad setting is a *setting.Error naming its key in the node
// section; Name (checked when set) and Labels are not settings.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) { errs = append(errs, setting.Errorf(key, format, args...)) }
	if c.Name != "" {
		if err := ValidateName(c.Name); err != nil {
			errs = append(errs, fmt.Errorf("node name %w", err))
		}
	}
	for k, v := range c.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("label key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("label %s value %q: %s", k, v, msg))
		}
	}
	if _, err := ParseTaint(c.Taint); err != nil {
		bad("taint", "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	for _, q := range []struct{ key, v string }{{"capacity.cpu", c.Capacity.CPU}, {"capacity.memory", c.Capacity.Memory}, {"capacity.pods", c.Capacity.Pods}, {"capacity.gpus", c.Capacity.GPUs}, {"capacity.ephemeralStorage", c.Capacity.EphemeralStorage}} {
		if !quantityRE.MatchString(q.v) {
			bad(q.key, "%q is not a quantity such as 64, 500m or 256Gi", q.v)
		}
	}
	if !archRE.MatchString(c.Arch) {
		bad("arch", "%q is not an architecture such as amd64 or arm64", c.Arch)
	}
	if c.Zone != "" {
		if msgs := validation.IsValidLabelValue(c.Zone); len(msgs) > 0 {
			bad("zone", "%q is not a zone such as us-east-1a: %s", c.Zone, strings.Join(msgs, "; "))
		}
	}
	if c.InternalIP != "" && net.ParseIP(c.InternalIP) == nil {
		bad("internalIP", "%q is not an IP address", c.InternalIP)
	}
	if _, port, err := net.SplitHostPort(c.ListenAddress); err != nil || port == "" {
		bad("listenAddress", "%q is not host:port", c.ListenAddress)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		key := "tlsKeyFile"
		if c.TLSCertFile == "" {
			key = "tlsCertFile"
		}
		bad(key, "tlsCertFile and tlsKeyFile are set together or not at all")
	}
	for _, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			bad("clusterDNS", "%q is not an IP address", ip)
		}
	}
	if len(c.ClusterDNS) > maxNameservers {
		bad("clusterDNS", "%d servers: a resolv.conf takes at most %d", len(c.ClusterDNS), maxNameservers)
	}
	if msgs := validation.IsDNS1123Subdomain(c.ClusterDomain); len(msgs) > 0 {
		bad("clusterDomain", "%q is not a DNS domain such as cluster.local: %s", c.ClusterDomain, strings.Join(msgs, "; "))
	}
	if c.LeaseDurationSeconds < 4 {
		bad("leaseDurationSeconds", "%d is less than 4", c.LeaseDurationSeconds)
	}
	if c.StatusUpdateInterval <= 0 {
		bad("statusUpdateInterval", "%s is not a positive duration", c.StatusUpdateInterval)
	}
	if c.Workers < 1 {
		bad("workers", "%d is less than 1", c.Workers)
	}
	if c.HealthGrace < 0 {
		errs = append(errs, fmt.Errorf("health grace %s is negative", c.HealthGrace))
	}
	return errors.Join(errs...)
}

// taint is the Node's taint, nil for none; Validate has checked it.
func (c Config) taint() *corev1.Taint {
	t, _ := ParseTaint(c.Taint)
	return t
}

// resources is the Node's capacity: the configured cpu, memory, pods and
// ephemeral-storage, and Capacity.GPUs of each extended resource the
// backend offers; Validate has checked the quantities.
func (c Config) resources(extended []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	values := map[corev1.ResourceName]string{
		corev1.ResourceCPU: c.Capacity.CPU, corev1.ResourceMemory: c.Capacity.Memory, corev1.ResourcePods: c.Capacity.Pods,
		corev1.ResourceEphemeralStorage: c.Capacity.EphemeralStorage,
	}
	for _, r := range extended {
		values[r] = c.Capacity.GPUs
	}
	for name, v := range values {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[name] = q
		}
	}
	return out
}

// leaseDuration is the node Lease's duration.
func (c Config) leaseDuration() time.Duration {
	return time.Duration(c.LeaseDurationSeconds) * time.Second
}
