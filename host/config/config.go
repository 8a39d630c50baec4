package config

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/pluginapi"
)

// EnvPrefix is the prefix of environment variables that set config keys:
// KIP_CLUSTER_ID sets clusterID, KIP_PLUGIN_NAME sets plugin.name.
const EnvPrefix = "KIP_"

// Config is kip's configuration.
type Config struct {
	// ClusterID names this cluster among those sharing a cloud account;
	// every instance is tagged with it and kip only ever touches instances
	// that carry it.
	ClusterID string `koanf:"clusterID"`
	// NodeName is the name of the virtual node.
	NodeName string `koanf:"nodeName"`
	// Kubeconfig is the kubeconfig kip uses (ideally a system:node:<name>
	// identity); empty means $KUBECONFIG, then the in-cluster config.
	Kubeconfig string `koanf:"kubeconfig"`
	// Node configures the virtual node and its kubelet API.
	Node Node `koanf:"node"`
	// Cells configures how pods become cells.
	Cells Cells `koanf:"cells"`
	// PKI says where the cluster CA is kept.
	PKI PKI `koanf:"pki"`
	// Match tunes how pods are matched to instance types (host/match).
	Match Match `koanf:"match"`
	// Plugin selects and configures the cloud plugin.
	Plugin Plugin `koanf:"plugin"`
	// Log sets the host's log output.
	Log Log `koanf:"log"`
}

// Plugin selects the cloud plugin and holds its own configuration.
type Plugin struct {
	// Name is the plugin's name: kip runs kip-plugin-<name>.
	Name string `koanf:"name"`
	// Dir is the directory searched for kip-plugin-<name>; empty means
	// the directory of the kip binary.
	Dir string `koanf:"dir"`
	// Path is an explicit path to the plugin binary, overriding Dir.
	Path string `koanf:"path"`
	// SHA256 pins the plugin binary's hex SHA-256; kip refuses to start a
	// binary with another hash.
	SHA256 string `koanf:"sha256"`
	// Config is passed to the plugin as a JSON object; its keys are the
	// plugin's to validate.
	Config map[string]any `koanf:"config"`
}

// Match tunes pod-to-instance matching; host/match documents each rule.
type Match struct {
	// AgentReserveCPU and AgentReserveMemory are added to every pod's
	// requirement for the cell agent and the OS (quantities: 100m, 256Mi).
	AgentReserveCPU    string `koanf:"agentReserveCPU"`
	AgentReserveMemory string `koanf:"agentReserveMemory"`
	// IgnoreLimits stops a container's limit standing in for a missing
	// request.
	IgnoreLimits bool `koanf:"ignoreLimits"`
	// BurstablePolicy is baseline (a burstable type fits only when its
	// baseline covers the pod) or unlimited (surplus credits priced in).
	BurstablePolicy string `koanf:"burstablePolicy"`
	// SurplusCreditPricePerVCPUHour prices surplus credits under unlimited.
	SurplusCreditPricePerVCPUHour float64 `koanf:"surplusCreditPricePerVCPUHour"`
	// UnknownPrice is last (rank unpriced offerings after priced ones) or
	// exclude (never choose them).
	UnknownPrice string `koanf:"unknownPrice"`
	// DefaultCapacityType is on-demand or spot, for pods that name none.
	DefaultCapacityType string `koanf:"defaultCapacityType"`
	// DefaultArch is the architecture of pods that name none: empty means
	// node.arch (the scheduler put the pod on a node of that architecture),
	// "any" lets a pod without a kubernetes.io/arch selector run on any.
	DefaultArch string `koanf:"defaultArch"`
	// SpotFallback lets spot pods run on on-demand when no spot fits,
	// unless the pod says otherwise (kipcell.io/spot-fallback).
	SpotFallback bool `koanf:"spotFallback"`
	// GPUResources are the extended resources counted as GPUs; empty means
	// nvidia.com/gpu, amd.com/gpu and gpu.intel.com/i915.
	GPUResources []string `koanf:"gpuResources"`
	// IgnoredResources are extended resources cells provide themselves.
	IgnoredResources []string `koanf:"ignoredResources"`
	// MaxCandidates bounds the ranked list per capacity type (-1: none).
	MaxCandidates int `koanf:"maxCandidates"`
	// UnavailableTTL is how long an offering without capacity is skipped.
	UnavailableTTL time.Duration `koanf:"unavailableTTL"`
	// CatalogTTL is how long the plugin's catalog is used before a refresh.
	CatalogTTL time.Duration `koanf:"catalogTTL"`
	// RematchInterval is how often a pod nothing fits is matched again.
	RematchInterval time.Duration `koanf:"rematchInterval"`
}

// MatchConfig converts the match section for host/match, naming the key
// of any invalid value.
func (c *Config) MatchConfig() (match.Config, error) {
	m := c.Match
	out := match.Config{
		IgnoreLimits: m.IgnoreLimits, BurstablePolicy: match.BurstablePolicy(m.BurstablePolicy),
		SurplusCreditPricePerVCPUHour: m.SurplusCreditPricePerVCPUHour, UnknownPrice: match.UnknownPriceRule(m.UnknownPrice),
		DefaultCapacityType: pluginapi.CapacityType(m.DefaultCapacityType), SpotFallback: m.SpotFallback,
		GPUResources: m.GPUResources, IgnoredResources: m.IgnoredResources, MaxCandidates: m.MaxCandidates,
	}
	switch m.DefaultArch {
	case "":
		out.DefaultArch = pluginapi.Arch(c.Node.Arch)
	case "any":
	default:
		out.DefaultArch = pluginapi.Arch(m.DefaultArch)
	}
	var errs []error
	// A reserve beyond any instance is a typo; it would also overflow.
	if q, err := resource.ParseQuantity(m.AgentReserveCPU); err != nil || q.Sign() < 0 || q.AsApproximateFloat64() > 1<<20 {
		errs = append(errs, &Error{Key: "match.agentReserveCPU", Reason: fmt.Sprintf("%q is not a CPU quantity >= 0 such as 100m", m.AgentReserveCPU)})
	} else {
		out.AgentReserveMilliCPU = match.MilliCPU(q.MilliValue())
	}
	if q, err := resource.ParseQuantity(m.AgentReserveMemory); err != nil || q.Sign() < 0 || q.AsApproximateFloat64() > 1<<50 {
		errs = append(errs, &Error{Key: "match.agentReserveMemory", Reason: fmt.Sprintf("%q is not a memory quantity >= 0 such as 256Mi", m.AgentReserveMemory)})
	} else {
		out.AgentReserveMemoryBytes = match.Bytes(q.Value())
	}
	if err := out.Validate(); err != nil {
		errs = append(errs, &Error{Key: "match", Reason: err.Error()})
	}
	for key, d := range map[string]time.Duration{"match.unavailableTTL": m.UnavailableTTL, "match.catalogTTL": m.CatalogTTL, "match.rematchInterval": m.RematchInterval} {
		if d <= 0 {
			errs = append(errs, &Error{Key: key, Reason: fmt.Sprintf("%s is not a positive duration", d)})
		}
	}
	return out, errors.Join(errs...)
}

// Cells configures how pods become cells (host/cells).
type Cells struct {
	// Image is the cell image handed to the plugin (an AMI, an image URL);
	// empty means the plugin's default.
	Image string `koanf:"image"`
	// InsecureRegistries are registry hosts (host:port) cells pull from
	// over plain HTTP; loopback hosts always are.
	InsecureRegistries []string `koanf:"insecureRegistries"`
}

// PKI says where the cluster CA lives (host/pki).
type PKI struct {
	// Namespace and SecretName locate the Secret holding the CA.
	Namespace  string `koanf:"namespace"`
	SecretName string `koanf:"secretName"`
}

// Node configures the virtual node (host/node) and its kubelet API.
type Node struct {
	// Taint is registered with the node, in kubectl's key[=value]:Effect
	// form; empty (or "none") registers no taint, so every pod may land
	// on cells.
	Taint string `koanf:"taint"`
	// SetRoleLabel makes kip label its node kubernetes.io/role=agent.
	// NodeRestriction forbids this to a node identity (system:node:<name>),
	// so leave it off unless kip runs with broader credentials and label
	// the node yourself: kubectl label node <name> kubernetes.io/role=agent.
	SetRoleLabel bool `koanf:"setRoleLabel"`
	// Capacity is the node's advertised capacity and allocatable.
	Capacity Capacity `koanf:"capacity"`
	// Arch is the node's kubernetes.io/arch label.
	Arch string `koanf:"arch"`
	// InternalIP is the address the API server dials for the kubelet API
	// (kubectl logs/exec); empty picks this host's first IPv4 address. In
	// a Deployment, set it from status.podIP (KIP_NODE_INTERNAL_IP).
	InternalIP string `koanf:"internalIP"`
	// ListenAddress is where the kubelet API listens.
	ListenAddress string `koanf:"listenAddress"`
	// TLSCertFile and TLSKeyFile are the kubelet API's serving certificate;
	// both empty makes a self-signed one in memory.
	TLSCertFile string `koanf:"tlsCertFile"`
	TLSKeyFile  string `koanf:"tlsKeyFile"`
	// ClientCAFile verifies client certificates on the kubelet API: the
	// CA of the API server's --kubelet-client-certificate, usually the
	// cluster CA. Without it the API server cannot reach logs and exec.
	ClientCAFile string `koanf:"clientCAFile"`
	// LeaseDurationSeconds is the node Lease's duration.
	LeaseDurationSeconds int `koanf:"leaseDurationSeconds"`
	// StatusUpdateInterval is how often the full node status is written.
	StatusUpdateInterval time.Duration `koanf:"statusUpdateInterval"`
	// Workers is the number of pod-controller workers.
	Workers int `koanf:"workers"`
}

// Capacity is the node's capacity, as Kubernetes quantities.
type Capacity struct {
	CPU    string `koanf:"cpu"`
	Memory string `koanf:"memory"`
	Pods   string `koanf:"pods"`
}

// Log sets the host's log output.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
	// Format is json or text.
	Format string `koanf:"format"`
}

// Defaults are the values before any file, environment or flag.
func Defaults() map[string]any {
	return map[string]any{
		"clusterID": "",
		"nodeName":  "kip",

		"node.taint":                "virtual-kubelet.io/provider=kip:NoSchedule",
		"node.setRoleLabel":         false,
		"node.capacity.cpu":         "1000",
		"node.capacity.memory":      "4Ti",
		"node.capacity.pods":        "1000",
		"node.arch":                 "amd64",
		"node.internalIP":           "",
		"node.listenAddress":        ":10250",
		"node.tlsCertFile":          "",
		"node.tlsKeyFile":           "",
		"node.clientCAFile":         "",
		"node.leaseDurationSeconds": 40,
		"node.statusUpdateInterval": "1m",
		"node.workers":              10,

		"kubeconfig": "",

		"cells.image":              "",
		"cells.insecureRegistries": []string{},

		"match.agentReserveCPU":               "100m",
		"match.agentReserveMemory":            "256Mi",
		"match.ignoreLimits":                  false,
		"match.burstablePolicy":               "baseline",
		"match.surplusCreditPricePerVCPUHour": match.DefaultSurplusCreditPricePerVCPUHour,
		"match.unknownPrice":                  "last",
		"match.defaultCapacityType":           "on-demand",
		"match.spotFallback":                  false,
		"match.defaultArch":                   "",
		"match.gpuResources":                  []string{},
		"match.ignoredResources":              []string{},
		"match.maxCandidates":                 match.DefaultMaxCandidates,
		"match.unavailableTTL":                match.DefaultUnavailableTTL.String(),
		"match.catalogTTL":                    "10m",
		"match.rematchInterval":               "1m",

		"pki.namespace":  "kip-system",
		"pki.secretName": "kip-ca",

		"plugin.name":   "local",
		"plugin.dir":    "",
		"plugin.path":   "",
		"plugin.sha256": "",
		"log.level":     "info",
		"log.format":    "json",
	}
}

// Error is a configuration error that names the key at fault.
type Error struct {
	Key    string
	Source string
	Reason string
}

func (e *Error) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("config %s (%s): %s", e.Key, e.Source, e.Reason)
	}
	return fmt.Sprintf("config %s: %s", e.Key, e.Reason)
}

// Load builds the configuration from path (may be empty), the environment
// (as os.Environ, only KIP_* variables that name a known key are used)
// and flags (already-parsed flag values by config key, may be nil).
func Load(path string, environ []string, flags map[string]any) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(Defaults(), "."), nil); err != nil {
		return nil, fmt.Errorf("loading defaults: %w", err)
	}
	known := knownKeys()
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("reading config file %s: %w", path, err)
		}
		if err := checkKeys(fk.Keys(), known, path); err != nil {
			return nil, err
		}
		if err := checkPluginConfig(fk.Get("plugin.config"), path); err != nil {
			return nil, err
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("merging config file %s: %w", path, err)
		}
	}
	if env := envValues(environ, known); len(env) > 0 {
		if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
			return nil, fmt.Errorf("loading environment: %w", err)
		}
	}
	if len(flags) > 0 {
		if err := checkKeys(keysOf(flags), known, "flags"); err != nil {
			return nil, err
		}
		if err := checkPluginConfig(flags["plugin.config"], "flags"); err != nil {
			return nil, err
		}
		if err := k.Load(confmap.Provider(flags, "."), nil); err != nil {
			return nil, fmt.Errorf("loading flags: %w", err)
		}
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("decoding config: %w", err)
	}
	for _, p := range []*string{&c.Kubeconfig, &c.Node.TLSCertFile, &c.Node.TLSKeyFile, &c.Node.ClientCAFile, &c.Plugin.Dir, &c.Plugin.Path} {
		*p = expandHome(*p)
	}
	return &c, nil
}

// expandHome turns a leading "~/" into the user's home directory, as a
// shell would for the paths people write in the file.
func expandHome(path string) string {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, rest)
}

// knownKeys lists every settable key; plugin.config is free-form.
func knownKeys() map[string]bool {
	keys := make(map[string]bool)
	for key := range Defaults() {
		keys[key] = true
	}
	keys["plugin.config"] = true
	return keys
}

// checkPluginConfig refuses a plugin.config that is not a mapping (a
// string, a list, a number) in one line naming the key, before the decoder
// would say so in several lines of Go types. Empty (null) is fine: no
// settings.
func checkPluginConfig(v any, source string) error {
	var kind string
	switch v.(type) {
	case nil, map[string]any:
		return nil
	case string:
		kind = "a string"
	case []any:
		kind = "a list"
	case bool:
		kind = "true or false"
	default:
		kind = "a single value"
	}
	return &Error{Key: "plugin.config", Source: source, Reason: "must be a mapping of the plugin's settings (key: value lines), not " + kind}
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	return out
}

// checkKeys refuses keys that are not known, naming the first in order.
func checkKeys(keys []string, known map[string]bool, source string) error {
	sort.Strings(keys)
	for _, key := range keys {
		if known[key] || key == "plugin.config" || strings.HasPrefix(key, "plugin.config.") {
			continue
		}
		return &Error{Key: key, Source: source, Reason: "unknown key" + suggest(key, known)}
	}
	return nil
}

func suggest(key string, known map[string]bool) string {
	norm := normalize(key)
	for k := range known {
		if normalize(k) == norm {
			return fmt.Sprintf(" (did you mean %s?)", k)
		}
	}
	return ""
}

func normalize(key string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(key))
}

// envValues maps KIP_* variables onto known keys by comparing names without
// case, dots or underscores: KIP_CLUSTER_ID → clusterID, KIP_PLUGIN_SHA256
// → plugin.sha256. Variables that match no key are left alone (KIP_ is
// also the prefix of variables kip passes to plugins and cells).
func envValues(environ []string, known map[string]bool) map[string]any {
	byNorm := make(map[string]string, len(known))
	for key := range known {
		if key != "plugin.config" {
			byNorm[normalize(key)] = key
		}
	}
	out := make(map[string]any)
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if key, ok := byNorm[normalize(strings.TrimPrefix(name, EnvPrefix))]; ok {
			out[key] = value
		}
	}
	return out
}

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	pluginName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// taintRE is kubectl's key[=value]:Effect; host/node checks the key
	// and value in full.
	taintRE = regexp.MustCompile(`^[^=:\s]+(=[^:\s]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$`)
	// quantityRE is a Kubernetes quantity without exponent forms.
	quantityRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$`)
	archRE     = regexp.MustCompile(`^[a-z0-9]+$`)
)

// ValidateNode checks the node section.
func (c *Config) ValidateNode() error {
	var errs []error
	n := c.Node
	if t := strings.TrimSpace(n.Taint); t != "" && t != "none" && !taintRE.MatchString(t) {
		errs = append(errs, &Error{Key: "node.taint", Reason: fmt.Sprintf("%q is not key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute (empty for no taint)", n.Taint)})
	}
	for key, v := range map[string]string{"node.capacity.cpu": n.Capacity.CPU, "node.capacity.memory": n.Capacity.Memory, "node.capacity.pods": n.Capacity.Pods} {
		if !quantityRE.MatchString(v) {
			errs = append(errs, &Error{Key: key, Reason: fmt.Sprintf("%q is not a quantity such as 64, 500m or 256Gi", v)})
		}
	}
	if !archRE.MatchString(n.Arch) {
		errs = append(errs, &Error{Key: "node.arch", Reason: fmt.Sprintf("%q is not an architecture such as amd64 or arm64", n.Arch)})
	}
	if n.InternalIP != "" && net.ParseIP(n.InternalIP) == nil {
		errs = append(errs, &Error{Key: "node.internalIP", Reason: fmt.Sprintf("%q is not an IP address", n.InternalIP)})
	}
	if _, port, err := net.SplitHostPort(n.ListenAddress); err != nil || port == "" {
		errs = append(errs, &Error{Key: "node.listenAddress", Reason: fmt.Sprintf("%q is not host:port", n.ListenAddress)})
	}
	if (n.TLSCertFile == "") != (n.TLSKeyFile == "") {
		key := "node.tlsKeyFile"
		if n.TLSCertFile == "" {
			key = "node.tlsCertFile"
		}
		errs = append(errs, &Error{Key: key, Reason: "node.tlsCertFile and node.tlsKeyFile are set together or not at all"})
	}
	if n.LeaseDurationSeconds < 4 {
		errs = append(errs, &Error{Key: "node.leaseDurationSeconds", Reason: fmt.Sprintf("%d is less than 4", n.LeaseDurationSeconds)})
	}
	if n.StatusUpdateInterval <= 0 {
		errs = append(errs, &Error{Key: "node.statusUpdateInterval", Reason: fmt.Sprintf("%s is not a positive duration", n.StatusUpdateInterval)})
	}
	if n.Workers < 1 {
		errs = append(errs, &Error{Key: "node.workers", Reason: fmt.Sprintf("%d is less than 1", n.Workers)})
	}
	return errors.Join(errs...)
}

// ValidatePlugin checks the plugin section.
func (c *Config) ValidatePlugin() error {
	var errs []error
	if !pluginName.MatchString(c.Plugin.Name) {
		errs = append(errs, &Error{Key: "plugin.name", Reason: fmt.Sprintf("%q is not a plugin name (lower-case letters, digits, - and _)", c.Plugin.Name)})
	}
	if s := c.Plugin.SHA256; s != "" {
		if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
			errs = append(errs, &Error{Key: "plugin.sha256", Reason: "want 64 hexadecimal digits"})
		}
	}
	return errors.Join(errs...)
}

// Validate checks the whole configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.ClusterID == "" {
		errs = append(errs, &Error{Key: "clusterID", Reason: "required: a name unique among the clusters that share this cloud account"})
	} else if !dnsLabel.MatchString(c.ClusterID) {
		errs = append(errs, &Error{Key: "clusterID", Reason: fmt.Sprintf("%q is not a DNS label (lower-case letters, digits and -, at most 63)", c.ClusterID)})
	}
	if !dnsLabel.MatchString(c.NodeName) {
		errs = append(errs, &Error{Key: "nodeName", Reason: fmt.Sprintf("%q is not a DNS label", c.NodeName)})
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, &Error{Key: "log.level", Reason: fmt.Sprintf("%q is not one of debug, info, warn, error", c.Log.Level)})
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		errs = append(errs, &Error{Key: "log.format", Reason: fmt.Sprintf("%q is not one of json, text", c.Log.Format)})
	}
	if err := c.ValidateNode(); err != nil {
		errs = append(errs, err)
	}
	if err := c.ValidatePlugin(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.MatchConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ConfigJSON returns the plugin's own configuration as the JSON object the
// plugin's Configure receives ("{}" when there is none).
func (p Plugin) ConfigJSON() ([]byte, error) {
	if p.Config == nil {
		return []byte("{}"), nil
	}
	data, err := json.Marshal(p.Config)
	if err != nil {
		return nil, fmt.Errorf("encoding plugin.config as JSON: %w", err)
	}
	return data, nil
}
