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

	"github.com/kipcell/kip/host/config"
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

// Config configures the virtual node. Build it with DefaultConfig or
// FromConfig and adjust; New fills zero fields with the defaults above.
type Config struct {
	// Name is the Node's name (a DNS label) and, with a node identity,
	// must match the system:node:<name> credentials.
	Name string
	// Labels are added to the Node's own labels (type, hostname, os,
	// arch). Under NodeRestriction a node identity may only set
	// kubernetes.io/ and k8s.io/ labels on the kubelet's allowed list.
	Labels map[string]string
	// SetRoleLabel adds kubernetes.io/role=agent. NodeRestriction forbids
	// a node identity to set it, so only enable it when kip runs with
	// broader credentials; otherwise kip logs that an administrator should
	// add it.
	SetRoleLabel bool
	// Taint is registered with the Node; nil registers none. A node
	// identity may set taints when it registers but not change them
	// afterwards (NodeRestriction).
	Taint *corev1.Taint
	// Capacity is the Node's capacity and allocatable (cpu, memory, pods).
	Capacity corev1.ResourceList
	// Arch is the kubernetes.io/arch label and NodeInfo architecture.
	Arch string
	// InternalIP is the address the API server dials for the kubelet API
	// (kubectl logs, exec, port-forward). Empty picks the first global
	// unicast IPv4 address of this host.
	InternalIP string
	// ListenAddress is where the kubelet API listens (host:port). Port 0
	// picks a free port; the Node's daemon endpoint carries the real one.
	ListenAddress string
	// TLSCertFile and TLSKeyFile are the kubelet API's serving certificate.
	// Both empty: a self-signed certificate for InternalIP and Name is
	// generated and kept in memory (the API server does not verify kubelet
	// serving certificates unless --kubelet-certificate-authority is set).
	TLSCertFile string
	TLSKeyFile  string
	// ClientCAFile holds the CA(s) whose client certificates the kubelet
	// API accepts: the CA of the API server's --kubelet-client-certificate
	// (usually the cluster CA). Empty: only bearer tokens are accepted, so
	// the API server cannot reach logs or exec.
	ClientCAFile string
	// LeaseDuration is the node Lease's duration; it is renewed every
	// quarter of it.
	LeaseDuration time.Duration
	// StatusUpdateInterval is how often the full node status is written.
	StatusUpdateInterval time.Duration
	// Workers is the number of pod-controller workers per queue.
	Workers int
	// HealthGrace is how long Pods.Healthy (when implemented) must fail
	// without interruption before Ping fails and the lease stops being
	// renewed. Backend restarts shorter than this never make the node
	// NotReady.
	HealthGrace time.Duration
	// Version is kip's version; the kubelet version reads kip/<Version>.
	Version string
}

// DefaultConfig returns the defaults for a node called name.
func DefaultConfig(name string) Config {
	taint, _ := ParseTaint(DefaultTaint)
	return Config{
		Name:  name,
		Taint: taint,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(DefaultCPU),
			corev1.ResourceMemory: resource.MustParse(DefaultMemory),
			corev1.ResourcePods:   resource.MustParse(DefaultPods),
		},
		Arch:                 DefaultArch,
		ListenAddress:        DefaultListenAddress,
		LeaseDuration:        DefaultLeaseDuration,
		StatusUpdateInterval: DefaultStatusUpdateInterval,
		Workers:              DefaultWorkers,
		HealthGrace:          DefaultHealthGrace,
	}
}

// FromConfig builds the node's Config from kip's configuration.
func FromConfig(c *config.Config, version string) (Config, error) {
	out := DefaultConfig(c.NodeName)
	n := c.Node
	taint, err := ParseTaint(n.Taint)
	if err != nil {
		return Config{}, &config.Error{Key: "node.taint", Reason: err.Error()}
	}
	out.Taint = taint
	out.SetRoleLabel = n.SetRoleLabel
	for key, val := range map[string]struct {
		name corev1.ResourceName
		v    string
	}{"node.capacity.cpu": {corev1.ResourceCPU, n.Capacity.CPU}, "node.capacity.memory": {corev1.ResourceMemory, n.Capacity.Memory}, "node.capacity.pods": {corev1.ResourcePods, n.Capacity.Pods}} {
		if val.v == "" {
			continue
		}
		q, err := resource.ParseQuantity(val.v)
		if err != nil {
			return Config{}, &config.Error{Key: key, Reason: fmt.Sprintf("%q is not a quantity", val.v)}
		}
		out.Capacity[val.name] = q
	}
	if n.Arch != "" {
		out.Arch = n.Arch
	}
	out.InternalIP = n.InternalIP
	if n.ListenAddress != "" {
		out.ListenAddress = n.ListenAddress
	}
	out.TLSCertFile, out.TLSKeyFile, out.ClientCAFile = n.TLSCertFile, n.TLSKeyFile, n.ClientCAFile
	if n.LeaseDurationSeconds > 0 {
		out.LeaseDuration = time.Duration(n.LeaseDurationSeconds) * time.Second
	}
	if n.StatusUpdateInterval > 0 {
		out.StatusUpdateInterval = n.StatusUpdateInterval
	}
	if n.Workers > 0 {
		out.Workers = n.Workers
	}
	out.Version = version
	return out, out.Validate()
}

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
		return nil, fmt.Errorf("taint %q is not key[=value]:Effect", s)
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
	d := DefaultConfig(c.Name)
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Capacity == nil {
		c.Capacity = corev1.ResourceList{}
	}
	for name, q := range d.Capacity {
		if _, ok := c.Capacity[name]; !ok {
			c.Capacity[name] = q
		}
	}
	if c.Arch == "" {
		c.Arch = d.Arch
	}
	if c.ListenAddress == "" {
		c.ListenAddress = d.ListenAddress
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = d.LeaseDuration
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

// Validate checks a Config after defaults are applied.
func (c Config) Validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, fmt.Errorf("node name %q: %s", c.Name, msg))
	}
	for k, v := range c.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("label key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("label %s value %q: %s", k, v, msg))
		}
	}
	if c.Taint != nil {
		if err := validateTaint(c.Taint); err != nil {
			errs = append(errs, err)
		}
	}
	for name, q := range c.Capacity {
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("capacity %s is negative", name))
		}
	}
	if c.InternalIP != "" && net.ParseIP(c.InternalIP) == nil {
		errs = append(errs, fmt.Errorf("internal IP %q is not an IP address", c.InternalIP))
	}
	if _, port, err := net.SplitHostPort(c.ListenAddress); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.ListenAddress, err))
	} else if port == "" {
		errs = append(errs, fmt.Errorf("listen address %q has no port", c.ListenAddress))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("serving certificate and key files must be set together"))
	}
	if c.LeaseDuration < 4*time.Second {
		errs = append(errs, fmt.Errorf("lease duration %s is shorter than 4s", c.LeaseDuration))
	}
	if c.StatusUpdateInterval <= 0 {
		errs = append(errs, fmt.Errorf("status update interval %s is not positive", c.StatusUpdateInterval))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d is less than 1", c.Workers))
	}
	if c.HealthGrace < 0 {
		errs = append(errs, fmt.Errorf("health grace %s is negative", c.HealthGrace))
	}
	return errors.Join(errs...)
}
