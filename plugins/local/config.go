package local

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

// rootStateDir is stateDir's default for root (defaultStateDir).
const rootStateDir = "/var/lib/kip/local"

// Config is the plugin's configuration as the operator writes it (the
// plugin.config section of kip's configuration), one JSON object, decoded
// by pluginapi.DecodeConfig: each field's json tag is its key and its
// other tags its JSON Schema (configSchema), which GetInfo reports for
// documentation and tooling. Every key is optional except agentCommand;
// unknown keys are refused so that a typo does not silently fall back to a
// default. Configure remains the authority: validate checks what a schema
// cannot (that the agent is executable, that network namespaces work).
type Config struct {
	// AgentCommand's first element is resolved with exec.LookPath.
	AgentCommand []string `json:"agentCommand" required:"true" minItems:"1" doc:"The cell agent's command line. The first element must resolve to an executable; arguments may contain {bootstrap}, {address} and {cellID}."`
	// StateDir is the plugin's "cloud": one directory per cell.
	StateDir       string `json:"stateDir,omitempty" doc:"Directory holding one subdirectory per cell. Default /var/lib/kip/local as root, $XDG_STATE_HOME/kip/local otherwise."`
	Network        string `json:"network,omitempty" enum:"auto,netns,loopback" doc:"netns: a network namespace per cell on a bridge; loopback: a 127.x.y.z address per cell; auto: netns when running as root and network namespaces work, loopback otherwise."`
	Bridge         string `json:"bridge,omitempty" pattern:"^[A-Za-z0-9_.-]{1,15}$" doc:"Linux bridge the cells' veths join (netns mode); created if missing."`
	Subnet         string `json:"subnet,omitempty" doc:"Private IPv4 subnet of the cells' network namespaces (netns mode); the bridge gets its first address."`
	LoopbackSubnet string `json:"loopbackSubnet,omitempty" doc:"Subnet of 127.0.0.0/8 cells get addresses from (loopback mode)."`
	Zone           string `json:"zone,omitempty" doc:"The one zone of the catalog's offerings."`
	// TerminationGrace is a Go duration ("5s").
	TerminationGrace string               `json:"terminationGrace,omitempty" doc:"Time between SIGTERM and SIGKILL when terminating a cell, as a Go duration."`
	InstanceTypes    []InstanceTypeConfig `json:"instanceTypes,omitempty" minItems:"1" doc:"Replaces the built-in catalog (local.nano to local.xlarge)."`
	// MountNamespace, set, makes the plugin run ip, nsenter and the agents
	// there, so that they find the machine's tools and containerd sees
	// what an agent mounts (mountns.go).
	MountNamespace string `json:"mountNamespace,omitempty" doc:"Path of the mount namespace the cells live in (/proc/1/ns/mnt: the machine's, from a pod with hostPID): ip, nsenter and the agents run there, from a copy of the agent in <stateDir>/bin, and stateDir must be the same directory in both. Empty: the plugin's own."`
	// Masquerade's iptables rules are in network.go.
	Masquerade bool `json:"masquerade,omitempty" doc:"netns mode: masquerade what the cells send beyond their subnet (iptables rules of this machine's, and IPv4 forwarding on), so that they reach what the machine reaches."`
	// AttachmentLimit bounds the disks of one cell (volume.go), as a cloud
	// instance has so many slots.
	AttachmentLimit int `json:"attachmentLimit,omitempty" minimum:"1" doc:"How many disks (loop devices) one cell can have attached; AttachVolume past it answers VolumeConflict attachment-limit."`
}

// InstanceTypeConfig is one instance type of a catalog override.
type InstanceTypeConfig struct {
	Name      string `json:"name" required:"true" minLength:"1"`
	MilliCPU  int64  `json:"milliCPU" required:"true" minimum:"10" doc:"CPU limit in thousandths of a CPU."`
	MemoryMiB int64  `json:"memoryMiB" required:"true" minimum:"16" doc:"Memory limit in MiB."`
	// Price is a weight, not a cost: local cells cost nothing.
	Price *float64 `json:"price,omitempty" minimum:"0" doc:"Nominal hourly price in US dollars: a weight that makes the host prefer the smallest fitting type (local cells cost nothing). Default 0.01 per CPU + 0.005 per GiB."`
}

// defaults are the defaults of Config's keys that have one: validate
// applies them and configSchema shows them. stateDir's depends on the
// user (defaultStateDir).
var defaults = Config{
	Network:          NetworkAuto,
	Bridge:           "kip0",
	Subnet:           "10.213.0.0/16",
	LoopbackSubnet:   "127.77.0.0/16",
	Zone:             "local",
	TerminationGrace: "5s",
	AttachmentLimit:  16,
}

// configSchema is Config's JSON Schema, reported by GetInfo.
var configSchema = pluginapi.MustConfigSchema("kip-plugin-local configuration", &defaults)

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
	attachmentLimit  int
}

// decodeConfig parses raw strictly (pluginapi.DecodeConfig): it refuses
// unknown keys and values of the wrong type, naming the key. It does not
// touch the machine; validate does.
func decodeConfig(raw []byte) (*Config, error) {
	c := &Config{}
	if err := pluginapi.DecodeConfig(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// ifaceName matches a usable Linux interface name (IFNAMSIZ is 16 with NUL).
var ifaceName = pluginapi.ConfigPattern(Config{}, "bridge")

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

	out.bridge = cmp.Or(c.Bridge, defaults.Bridge)
	if !ifaceName.MatchString(out.bridge) {
		return nil, nil, pluginapi.NewInvalidConfig("bridge", "%q is not an interface name (1-15 of [A-Za-z0-9_.-])", out.bridge)
	}
	if out.subnet, err = parseSubnet(cmp.Or(c.Subnet, defaults.Subnet)); err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("subnet", "%v", err)
	}
	if !out.subnet.Addr().IsPrivate() {
		return nil, nil, pluginapi.NewInvalidConfig("subnet", "%s is not a private (RFC 1918) range", out.subnet)
	}
	if out.loopbackSubnet, err = parseSubnet(cmp.Or(c.LoopbackSubnet, defaults.LoopbackSubnet)); err != nil {
		return nil, nil, pluginapi.NewInvalidConfig("loopbackSubnet", "%v", err)
	}
	if !out.loopbackSubnet.Addr().IsLoopback() {
		return nil, nil, pluginapi.NewInvalidConfig("loopbackSubnet", "%s is not inside 127.0.0.0/8", out.loopbackSubnet)
	}

	out.zone = cmp.Or(c.Zone, defaults.Zone)

	grace := cmp.Or(c.TerminationGrace, defaults.TerminationGrace)
	if out.terminationGrace, err = time.ParseDuration(grace); err != nil || out.terminationGrace < 0 {
		return nil, nil, pluginapi.NewInvalidConfig("terminationGrace", "%q is not a non-negative duration such as %q", grace, defaults.TerminationGrace)
	}

	out.attachmentLimit = cmp.Or(c.AttachmentLimit, defaults.AttachmentLimit)
	if out.attachmentLimit < 1 {
		return nil, nil, pluginapi.NewInvalidConfig("attachmentLimit", "%d is not a number of disks (at least 1)", c.AttachmentLimit)
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
