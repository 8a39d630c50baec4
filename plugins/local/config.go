package local

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Network modes. auto picks netns when the plugin runs as root and can
// create network namespaces, loopback otherwise.
const (
	NetworkAuto     = "auto"
	NetworkNetns    = "netns"
	NetworkLoopback = "loopback"
)

// Defaults of the configuration keys.
const (
	defaultNetwork          = NetworkAuto
	defaultBridge           = "kip0"
	defaultSubnet           = "10.213.0.0/16"
	defaultLoopbackSubnet   = "127.77.0.0/16"
	defaultZone             = "local"
	defaultTerminationGrace = 5 * time.Second
	rootStateDir            = "/var/lib/kip/local"
)

// Config is the plugin's configuration as the operator writes it (the
// plugin.config section of kip's configuration), one JSON object. Every key
// is optional except agentCommand; unknown keys are refused so that a typo
// does not silently fall back to a default.
type Config struct {
	// AgentCommand is the cell agent's command line. The first element must
	// resolve to an executable (a path, or a name found in PATH). The
	// arguments may contain {bootstrap}, {address} and {cellID}.
	AgentCommand []string `json:"agentCommand"`
	// StateDir holds one directory per cell; it is the plugin's "cloud".
	StateDir string `json:"stateDir,omitempty"`
	// Network is auto, netns or loopback.
	Network string `json:"network,omitempty"`
	// Bridge is the Linux bridge the cells' veths join (netns mode).
	Bridge string `json:"bridge,omitempty"`
	// Subnet is the IPv4 subnet of the cells' network namespaces; the bridge
	// gets its first address, cells the following ones.
	Subnet string `json:"subnet,omitempty"`
	// LoopbackSubnet is the subnet of 127/8 cells get addresses from in
	// loopback mode.
	LoopbackSubnet string `json:"loopbackSubnet,omitempty"`
	// Zone is the single zone the catalog offers.
	Zone string `json:"zone,omitempty"`
	// TerminationGrace is how long Terminate waits after SIGTERM before
	// SIGKILL, as a Go duration ("5s").
	TerminationGrace string `json:"terminationGrace,omitempty"`
	// InstanceTypes, when set, replaces the built-in catalog.
	InstanceTypes []InstanceTypeConfig `json:"instanceTypes,omitempty"`
	// MountNamespace is the mount namespace the cells live in, as a path
	// (/proc/1/ns/mnt: the machine's, seen from a pod with hostPID): the
	// plugin runs ip, nsenter and the agents there, so that they find the
	// machine's tools and containerd sees what an agent mounts. Empty: the
	// plugin's own. With it, the agent's executable is copied into
	// <stateDir>/bin, and stateDir must be the same directory in both
	// namespaces (mountns.go).
	MountNamespace string `json:"mountNamespace,omitempty"`
	// Masquerade (netns mode) makes this machine masquerade what the cells
	// send beyond their subnet, so that they reach what the machine
	// reaches (a registry, the API server) with no route back to the
	// subnet: iptables rules of the machine's (network.go).
	Masquerade bool `json:"masquerade,omitempty"`
}

// InstanceTypeConfig is one instance type of a catalog override.
type InstanceTypeConfig struct {
	Name      string `json:"name"`
	MilliCPU  int64  `json:"milliCPU"`
	MemoryMiB int64  `json:"memoryMiB"`
	// Price is the nominal hourly price in US dollars. Local cells cost
	// nothing: the price is a weight that makes the host's matcher prefer
	// the smallest type that fits. Omitted, it is derived from the size.
	Price *float64 `json:"price,omitempty"`
}

// config is a validated Config with its values parsed and defaults applied.
type config struct {
	clusterID string
	nodeName  string

	agentPath string   // AgentCommand[0], resolved to an absolute path
	agentArgs []string // AgentCommand[1:], placeholders not yet substituted
	// agentRun is the executable the cells run: agentPath, or its copy in
	// <stateDir>/bin with a MountNamespace (installAgent).
	agentRun string

	// machine is where the plugin's commands run (MountNamespace).
	machine machine

	stateDir         string
	network          string // netns or loopback once resolved; never auto
	bridge           string
	subnet           netip.Prefix
	loopbackSubnet   netip.Prefix
	zone             string
	terminationGrace time.Duration
	masquerade       bool
	catalog          []pluginapi.InstanceType
}

// decodeConfig parses raw strictly: it refuses unknown keys and values of
// the wrong type, naming the key, and applies defaults. It does not touch
// the machine; validate does.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var types []json.RawMessage
	err := pluginapi.DecodeConfigObject(raw, "", map[string]any{
		"agentCommand":     &c.AgentCommand,
		"stateDir":         &c.StateDir,
		"network":          &c.Network,
		"bridge":           &c.Bridge,
		"subnet":           &c.Subnet,
		"loopbackSubnet":   &c.LoopbackSubnet,
		"zone":             &c.Zone,
		"terminationGrace": &c.TerminationGrace,
		"instanceTypes":    &types,
		"mountNamespace":   &c.MountNamespace,
		"masquerade":       &c.Masquerade,
	})
	if err != nil {
		return nil, err
	}
	if types != nil {
		c.InstanceTypes = make([]InstanceTypeConfig, 0, len(types))
	}
	for i, t := range types {
		var it InstanceTypeConfig
		prefix := fmt.Sprintf("instanceTypes[%d].", i)
		if err := pluginapi.DecodeConfigObject(t, prefix, map[string]any{
			"name":      &it.Name,
			"milliCPU":  &it.MilliCPU,
			"memoryMiB": &it.MemoryMiB,
			"price":     &it.Price,
		}); err != nil {
			return nil, err
		}
		c.InstanceTypes = append(c.InstanceTypes, it)
	}
	return c, nil
}

// ifaceName matches a usable Linux interface name (IFNAMSIZ is 16 with NUL).
var ifaceName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// validate checks c, applies defaults and resolves what depends on the
// machine: the agent's executable, the state directory and, for network
// auto, whether network namespaces work here (probe). It returns the parsed
// config and warnings for the operator.
func validate(c *Config, m machine, probe func() error) (*config, []string, error) {
	out := &config{machine: m}
	var warnings []string

	if len(c.AgentCommand) == 0 || c.AgentCommand[0] == "" {
		return nil, nil, pluginapi.NewInvalidConfig("agentCommand", "is required: the cell agent's command line, such as [\"kip-cell\", \"--bootstrap\", \"{bootstrap}\"]")
	}
	path, err := exec.LookPath(c.AgentCommand[0])
	if err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("agentCommand", "%q is not an executable: %v", c.AgentCommand[0], err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("agentCommand", "%v", err)
	}
	out.agentPath, out.agentArgs = path, slices.Clone(c.AgentCommand[1:])

	out.stateDir = c.StateDir
	if out.stateDir == "" {
		if out.stateDir, err = defaultStateDir(); err != nil {
			return nil, nil, pluginapi.NewInvalidConfig("stateDir", "no default: %v", err)
		}
	}
	if !filepath.IsAbs(out.stateDir) {
		return nil, nil, pluginapi.NewInvalidConfig("stateDir", "%q is not an absolute path", out.stateDir)
	}
	out.agentRun = out.agentPath
	if m.ns != nil {
		if err := os.MkdirAll(out.stateDir, 0o700); err != nil {
			return nil, nil, pluginapi.NewInvalidConfig("stateDir", "%v", err)
		}
		same, err := m.sameFile(out.stateDir)
		if err != nil {
			return nil, nil, pluginapi.NewInvalidConfig("stateDir", "%s must be the same directory here and in mount namespace %s: %v", out.stateDir, m.ns.path, err)
		}
		if !same {
			return nil, nil, pluginapi.NewInvalidConfig("stateDir", "%s is another directory in mount namespace %s: mount the same directory at the same path in both", out.stateDir, m.ns.path)
		}
		out.agentRun = filepath.Join(out.stateDir, agentBinDir, filepath.Base(out.agentPath))
	}

	out.bridge = cmp.Or(c.Bridge, defaultBridge)
	if !ifaceName.MatchString(out.bridge) {
		return nil, nil, pluginapi.NewInvalidConfig("bridge", "%q is not an interface name (1-15 of [A-Za-z0-9_.-])", out.bridge)
	}
	if out.subnet, err = parseSubnet(cmp.Or(c.Subnet, defaultSubnet)); err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("subnet", "%v", err)
	}
	if !out.subnet.Addr().IsPrivate() {
		return nil, nil, pluginapi.NewInvalidConfig("subnet", "%s is not a private (RFC 1918) range", out.subnet)
	}
	if out.loopbackSubnet, err = parseSubnet(cmp.Or(c.LoopbackSubnet, defaultLoopbackSubnet)); err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("loopbackSubnet", "%v", err)
	}
	if !out.loopbackSubnet.Addr().IsLoopback() {
		return nil, nil, pluginapi.NewInvalidConfig("loopbackSubnet", "%s is not inside 127.0.0.0/8", out.loopbackSubnet)
	}

	out.zone = cmp.Or(c.Zone, defaultZone)

	out.terminationGrace = defaultTerminationGrace
	if c.TerminationGrace != "" {
		d, err := time.ParseDuration(c.TerminationGrace)
		if err != nil || d < 0 {
			return nil, nil, pluginapi.NewInvalidConfig("terminationGrace", "%q is not a non-negative duration such as \"5s\"", c.TerminationGrace)
		}
		out.terminationGrace = d
	}

	if out.catalog, err = buildCatalog(c.InstanceTypes, out.zone); err != nil {
		return nil, nil, err
	}

	switch c.Network {
	case NetworkNetns:
		if err := netnsUsable(m, probe); err != nil {
			return nil, nil, pluginapi.NewInvalidConfig("network", "netns: %v", err)
		}
		out.network = NetworkNetns
	case NetworkLoopback:
		out.network = NetworkLoopback
	case "", NetworkAuto:
		out.network = NetworkLoopback
		if os.Geteuid() == 0 {
			if err := netnsUsable(m, probe); err != nil {
				warnings = append(warnings, fmt.Sprintf("network auto: using loopback, network namespaces do not work here: %v", err))
			} else {
				out.network = NetworkNetns
			}
		}
	default:
		return nil, nil, pluginapi.NewInvalidConfig("network", "%q is not one of auto, netns, loopback", c.Network)
	}
	if c.Masquerade {
		if out.network != NetworkNetns {
			return nil, nil, pluginapi.NewInvalidConfig("masquerade", "needs network netns: loopback cells are on this machine's network already")
		}
		if _, err := m.lookPath("iptables"); err != nil {
			return nil, nil, pluginapi.NewInvalidConfig("masquerade", "needs the iptables command: %v", err)
		}
		out.masquerade = true
	}
	return out, warnings, nil
}

// netnsUsable reports why network namespaces cannot be used where m's
// commands run, or nil.
func netnsUsable(m machine, probe func() error) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (running as uid %d)", os.Geteuid())
	}
	where := ""
	if m.ns != nil {
		where = " in mount namespace " + m.ns.path
	}
	if _, err := m.lookPath("ip"); err != nil {
		return fmt.Errorf("needs the ip command (iproute2)%s: %w", where, err)
	}
	if _, err := m.lookPath("nsenter"); err != nil {
		return fmt.Errorf("needs the nsenter command (util-linux)%s: %w", where, err)
	}
	return probe()
}

// parseSubnet parses an IPv4 CIDR with room for a few addresses and masks
// it to its network address.
func parseSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.213.0.0/16", s)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not IPv4", s)
	}
	if p.Bits() > 29 || p.Bits() < 8 {
		return netip.Prefix{}, fmt.Errorf("%q: prefix length must be between /8 and /29", s)
	}
	return p.Masked(), nil
}

// defaultStateDir is /var/lib/kip/local for root and the XDG state
// directory otherwise, so a plugin run by a user needs no privileges.
func defaultStateDir() (string, error) {
	if os.Geteuid() == 0 {
		return rootStateDir, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kip", "local"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "kip", "local"), nil
}

// validPrice reports whether p is usable as a price.
func validPrice(p float64) bool { return p >= 0 && !math.IsNaN(p) && !math.IsInf(p, 0) }
