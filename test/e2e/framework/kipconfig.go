package framework

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// kipConfig is kip.yaml as StartKip writes it: the keys the harness
// sets, spelt as host/config reads them, and no other, so that kip
// applies its own defaults to the rest. write marshals it with the YAML
// library kip reads it with (koanf's parser); TestKipConfigLoads loads
// one with host/config, which refuses a key it does not know.
type kipConfig struct {
	ClusterID string `yaml:"clusterID"`
	NodeName  string `yaml:"nodeName"`
	// Kubeconfig is the node's own; Bootstrap, instead, an identity that
	// gets the node's by TLS bootstrap (KipOptions.Bootstrap).
	Kubeconfig string            `yaml:"kubeconfig,omitempty"`
	Bootstrap  *bootstrapSection `yaml:"bootstrap,omitempty"`
	Node       nodeSection       `yaml:"node"`
	Cells      cellsSection      `yaml:"cells"`
	Log        logSection        `yaml:"log"`
	Admin      adminSection      `yaml:"admin"`
	Plugin     pluginSection     `yaml:"plugin"`
	// LeaderElection is nil unless KipOptions.LeaderElection.
	LeaderElection *electionSection `yaml:"leaderElection,omitempty"`
}

// bootstrapSection is kip.yaml's bootstrap (host/bootstrap.Config).
type bootstrapSection struct {
	Kubeconfig string `yaml:"kubeconfig"`
	CertDir    string `yaml:"certDir"`
}

// nodeSection is kip.yaml's node (host/node.Config).
type nodeSection struct {
	InternalIP    string `yaml:"internalIP"`
	ListenAddress string `yaml:"listenAddress"`
	ClientCAFile  string `yaml:"clientCAFile"`
}

// cellsSection is kip.yaml's cells (host/cells.Config).
type cellsSection struct {
	InsecureRegistries    []string      `yaml:"insecureRegistries"`
	UnavailableTTL        time.Duration `yaml:"unavailableTTL"`
	AgentTimeout          time.Duration `yaml:"agentTimeout"`
	AgentKeepalive        time.Duration `yaml:"agentKeepalive"`
	AgentKeepaliveTimeout time.Duration `yaml:"agentKeepaliveTimeout"`
	BootRetry             time.Duration `yaml:"bootRetry"`
	VolumeRefreshInterval time.Duration `yaml:"volumeRefreshInterval"`
	PodLogsDir            string        `yaml:"podLogsDir"`
	// WarmPool and Choices are KipOptions.WarmPool and Choices, read
	// from their YAML; nil leaves the key out.
	WarmPool any `yaml:"warmPool,omitempty"`
	Choices  any `yaml:"choices,omitempty"`
	// More are KipOptions.Cells's settings, beside the ones above (one
	// of those again is newKipConfig's error).
	More map[string]any `yaml:",inline"`
}

// logSection is kip.yaml's log (host/config.Log).
type logSection struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// adminSection is kip.yaml's admin (host/admin.Config).
type adminSection struct {
	ListenAddress string `yaml:"listenAddress"`
	Profiling     bool   `yaml:"profiling,omitempty"`
}

// pluginSection is kip.yaml's plugin (host/plugin.Config).
type pluginSection struct {
	Name string `yaml:"name"`
	Dir  string `yaml:"dir"`
	// Config is the plugin's own settings (Kip.pluginConfig).
	Config map[string]any `yaml:"config"`
	SHA256 string         `yaml:"sha256,omitempty"`
}

// electionSection is kip.yaml's leaderElection (host/election.Config).
type electionSection struct {
	Enabled    bool   `yaml:"enabled"`
	Identity   string `yaml:"identity"`
	Kubeconfig string `yaml:"kubeconfig"`
}

// kipSite is what StartKip made or found for a kip before its kip.yaml:
// its identity, its addresses and the cluster's and cells' endpoints.
type kipSite struct {
	// Kubeconfig is the node's own kubeconfig; Bootstrap, instead, the
	// bootstrap identity (Framework.nodeIdentity gives one of them).
	Kubeconfig string
	Bootstrap  *bootstrapSection
	// NodeIP is the node's address (Framework.nodeIP); ClientCAFile the
	// cluster's CA, which signs the API server's client certificate.
	NodeIP, ClientCAFile string
	// Registry is the cells' registry (host:port), plain HTTP.
	Registry string
	// AdminAddress is where kip's admin server listens.
	AdminAddress string
	// Election is the leaderElection section (Framework.electionConfig);
	// nil: no leader election.
	Election *electionSection
}

// newKipConfig is kip.yaml for k, started with opts (after StartKip's
// defaults: ClusterID, PluginDir) at site: the e2e runs' settings
// (UnavailableTTL, AgentTimeout, …), opts's over them, and its YAML
// sections (WarmPool, Choices, Cells) read.
func newKipConfig(k *Kip, opts KipOptions, site kipSite) (*kipConfig, error) {
	c := &kipConfig{
		ClusterID: opts.ClusterID, NodeName: opts.NodeName,
		Kubeconfig: site.Kubeconfig, Bootstrap: site.Bootstrap,
		Node: nodeSection{
			InternalIP: site.NodeIP, ListenAddress: net.JoinHostPort(site.NodeIP, "0"), ClientCAFile: site.ClientCAFile,
		},
		Cells: cellsSection{
			InsecureRegistries:    []string{site.Registry},
			UnavailableTTL:        UnavailableTTL,
			AgentTimeout:          AgentTimeout,
			AgentKeepalive:        cmp.Or(opts.AgentKeepalive, AgentKeepalive),
			AgentKeepaliveTimeout: cmp.Or(opts.AgentKeepaliveTimeout, AgentKeepaliveTimeout),
			BootRetry:             BootRetry,
			VolumeRefreshInterval: cmp.Or(opts.VolumeRefreshInterval, VolumeRefreshInterval),
			PodLogsDir:            k.PodLogsDir,
		},
		Log:            logSection{Level: "debug", Format: "text"},
		Admin:          adminSection{ListenAddress: site.AdminAddress, Profiling: opts.Profiling},
		Plugin:         pluginSection{Name: k.Plugin, Dir: opts.PluginDir, Config: k.pluginConfig, SHA256: opts.PluginSHA256},
		LeaderElection: site.Election,
	}
	var err error
	if c.Cells.WarmPool, err = readYAML[any]("KipOptions.WarmPool", opts.WarmPool); err != nil {
		return nil, err
	}
	if c.Cells.Choices, err = readYAML[any]("KipOptions.Choices", opts.Choices); err != nil {
		return nil, err
	}
	if c.Cells.More, err = readYAML[map[string]any]("KipOptions.Cells", opts.Cells); err != nil {
		return nil, err
	}
	for key := range c.Cells.More {
		if slices.Contains(yamlKeys[cellsSection](), key) {
			return nil, fmt.Errorf("reading KipOptions.Cells: cells.%s is StartKip's (a KipOptions field of its own, or the e2e runs')", key)
		}
	}
	return c, nil
}

// yamlKeys are the keys T's fields are marshalled under (not an inline
// field's).
func yamlKeys[T any]() []string {
	var keys []string
	for f := range reflect.TypeFor[T]().Fields() {
		if key, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); key != "" {
			keys = append(keys, key)
		}
	}
	return keys
}

// readYAML reads text, a section of kip.yaml a KipOptions field (name)
// holds; empty text is T's zero value.
func readYAML[T any](name, text string) (T, error) {
	var v T
	if text == "" {
		return v, nil
	}
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		return v, fmt.Errorf("reading %s: %w", name, err)
	}
	return v, nil
}

// marshal is c as YAML, indented by two spaces as people write kip.yaml.
func (c *kipConfig) marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encoding kip.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding kip.yaml: %w", err)
	}
	return b.Bytes(), nil
}

// write writes c to path, which kip reads (again on SIGHUP).
func (c *kipConfig) write(path string) error {
	data, err := c.marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kip config: %w", err)
	}
	return nil
}

// UnavailableTTL is how long kip skips an offering that ran out of
// capacity in the e2e runs (3 minutes by default): short, so that a test
// that injects a shortage can wait for it to pass before the next test.
const UnavailableTTL = 5 * time.Second

// VolumeRefreshInterval is how often kip resolves a running pod's
// volumes again in the e2e runs (a minute by default): short, so that a
// test sees a changed Secret reach the container in seconds.
const VolumeRefreshInterval = 2 * time.Second

// AgentTimeout is how long kip waits for a cell's agent to answer once
// its instance runs in the e2e runs (10 minutes by default): short, so
// that a test of an agent that never starts sees the cell given up in
// seconds, and long enough for any agent on a busy machine.
const AgentTimeout = 30 * time.Second

// AgentKeepalive and AgentKeepaliveTimeout are kip's cells.agentKeepalive
// and agentKeepaliveTimeout in the e2e runs (30 s and 15 s by default):
// the most often the agents allow, so that a silent cell is noticed
// within 15 s (TestSilentCellIsNoticed), not 45.
const (
	AgentKeepalive        = 10 * time.Second
	AgentKeepaliveTimeout = 5 * time.Second
)

// BootRetry is kip's cells.bootRetry in the e2e runs (30 s by default):
// the wait before a cell whose agent never answered is launched again.
const BootRetry = 5 * time.Second
