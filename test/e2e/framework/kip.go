package framework

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/pod"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/cloudsim/simcells"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
	"github.com/kipcell/kip/test/cloudsim/simknobs"
	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"
)

// Binaries are the programs BuildBinaries makes, by package.
var Binaries = map[string]string{
	"kip":              "github.com/kipcell/kip/cmd/kip",
	"kip-cell":         "github.com/kipcell/kip/cmd/kip-cell",
	"kip-plugin-local": "github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local",
	"kip-plugin-aws":   "github.com/kipcell/kip/plugins/aws/cmd/kip-plugin-aws",
	"kip-plugin-gce":   "github.com/kipcell/kip/plugins/gce/cmd/kip-plugin-gce",
	"kip-plugin-azure": "github.com/kipcell/kip/plugins/azure/cmd/kip-plugin-azure",
	// The light cells (KipOptions.LightCells).
	"kip-light-cells": "github.com/kipcell/kip/test/cmd/kip-light-cells",
	"kip-light-stub":  "github.com/kipcell/kip/test/cmd/kip-light-stub",
}

// standalone are the modules outside go.work (the Makefile's
// STANDALONE), by module path, with their directories: the workspace
// cannot build them (plugins/gce's build list is its own), so their
// packages are built in their directory with GOWORK=off.
var standalone = map[string]string{"github.com/kipcell/kip/plugins/gce": "plugins/gce"}

// BuildBinaries builds kip, kip-cell and the plugins into dir (from the
// workspace the tests run in, or a standalone module's own); with
// RacePrograms, every one with -race, and their race reports go to
// dir/races (RaceReports).
func BuildBinaries(ctx context.Context, dir string) error {
	if RacePrograms() {
		races := filepath.Join(dir, "races")
		if err := os.MkdirAll(races, 0o755); err != nil { //nolint:gosec // kip's processes, of other users too, write there
			return fmt.Errorf("creating the race reports' directory: %w", err)
		}
		raceDir = races
	}
	for name := range Binaries {
		if err := BuildBinary(ctx, name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// BuildBinary builds the program name of Binaries to out, with more go
// build flags (-ldflags …) before the package; with -race when
// RacePrograms.
func BuildBinary(ctx context.Context, name, out string, flags ...string) error {
	pkg, ok := Binaries[name]
	if !ok {
		return fmt.Errorf("building %s: not one of framework.Binaries", name)
	}
	if RacePrograms() {
		flags = append([]string{"-race"}, flags...)
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	for module, dir := range standalone {
		if pkg == module || strings.HasPrefix(pkg, module+"/") {
			if cmd.Dir, err = repoFile(dir); err != nil {
				return fmt.Errorf("building %s: %w", name, err)
			}
			cmd.Env = append(os.Environ(), "GOWORK=off")
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return nil
}

// Cells is what a node needs to run real cells on this machine: a private
// containerd, a registry the cells reach through their bridge, and the
// test images in it.
type Cells struct {
	Containerd *containerdtest.Daemon
	Registry   *registry.Registry
	Images     images.Set
	// Bridge and Subnet are the local plugin's network for cells; Gateway
	// is the bridge's address, where cells find the registry.
	Bridge, Subnet, Gateway string
	// RegistryPort is the registry's port on every address.
	RegistryPort int
	stop         func()
}

// CellsOptions fix what StartCellsWith would otherwise choose afresh. The
// demo keeps them across runs, so that its registry's address, and with it
// its workload's image names, stay the same.
type CellsOptions struct {
	// ContainerdDir is where containerd keeps its state and socket; empty
	// means a new directory under /tmp, removed by Stop.
	ContainerdDir string `json:"containerdDir,omitempty"`
	// Bridge and Subnet are the cells' bridge and its /24; empty means a
	// random kipe* bridge in 10.213.0.0/16.
	Bridge string `json:"bridge,omitempty"`
	Subnet string `json:"subnet,omitempty"`
	// RegistryPort is the registry's port; zero or a port in use means a
	// free one (Cells.RegistryPort tells which).
	RegistryPort int `json:"registryPort,omitempty"`
}

// StartCells starts containerd and a registry on all addresses, advertised
// at the gateway of a fresh cell subnet, and pushes the test images.
func StartCells(ctx context.Context) (*Cells, error) {
	return StartCellsWith(ctx, CellsOptions{})
}

// StartCellsWith is StartCells with choices fixed by opts.
func StartCellsWith(ctx context.Context, opts CellsOptions) (*Cells, error) {
	start := containerdtest.Start
	if opts.ContainerdDir != "" {
		start = func() (*containerdtest.Daemon, func(), error) { return containerdtest.StartIn(opts.ContainerdDir) }
	}
	d, stopContainerd, err := start()
	if err != nil {
		return nil, err
	}
	c := &Cells{Containerd: d, Bridge: opts.Bridge, Subnet: opts.Subnet, stop: stopContainerd}
	// make e2e runs the cloud passes at once: each takes its subnets, and
	// makes its bridge, while it holds the machine's network lock, so that
	// another sees them taken.
	unlock, err := modbuild.Lock(ctx, filepath.Join(os.TempDir(), "kip-e2e-networks"))
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting cells: %w", err)
	}
	defer unlock()
	if c.Bridge == "" || c.Subnet == "" {
		suffix := containerdtest.Random(6)
		third, _ := strconv.ParseInt(suffix[:2], 16, 64)
		c.Bridge = "kipe" + suffix
		c.Subnet = fmt.Sprintf("10.213.%d.0/24", freeThird(int(10+third%200), usedThirds()))
	}
	if !strings.HasSuffix(c.Subnet, ".0/24") {
		c.Stop()
		return nil, fmt.Errorf("starting cells: subnet %q is not an a.b.c.0/24", c.Subnet)
	}
	c.Gateway = strings.TrimSuffix(c.Subnet, "0/24") + "1"
	if err := ensureBridge(c.Bridge, c.Gateway+"/24"); err != nil {
		c.Stop()
		return nil, err
	}
	port := opts.RegistryPort
	if port == 0 || !portFree(port) {
		if port, err = freePort(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	reg, err := registry.Start(ctx, registry.Options{
		Addr: fmt.Sprintf("0.0.0.0:%d", port), AdvertiseHost: c.Gateway,
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting registry: %w", err)
	}
	c.Registry, c.RegistryPort = reg, port
	if c.Images, err = images.PushAll(ctx, reg); err != nil {
		c.Stop()
		return nil, fmt.Errorf("pushing test images: %w", err)
	}
	return c, nil
}

// ensureBridge creates the cells' bridge with the gateway's address, as
// the local plugin does at its first cell (the same commands, so the
// plugin finds it ready; the plugin then pins its MAC address): the
// registry is advertised at the gateway, and a kubelet node's pods pull
// from it before any cell exists. It forwards what the cells send beyond
// it.
func ensureBridge(bridge, cidr string) error {
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "replace", cidr, "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		exists := args[1] == "add" && strings.Contains(string(out), "File exists")
		if err != nil && !exists {
			return fmt.Errorf("creating the cells' bridge %s (ip %s): %w: %s", bridge, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// Cells reach the pods of a kubelet node (CoreDNS on kip-infra)
	// through this machine's routes: it forwards what comes in on the
	// bridge, and on that bridge alone (a fresh machine has
	// net.ipv4.ip_forward off, and the local plugin leaves routing beyond
	// the bridge to the operator).
	if out, err := exec.Command("sysctl", "-q", "-w", "net.ipv4.conf."+bridge+".forwarding=1").CombinedOutput(); err != nil {
		return fmt.Errorf("turning on forwarding on the cells' bridge %s: %w: %s", bridge, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop stops the registry and containerd and removes the cells' bridge.
func (c *Cells) Stop() {
	if c.Registry != nil {
		_ = c.Registry.Close()
	}
	if c.stop != nil {
		c.stop()
	}
	_ = exec.Command("ip", "link", "del", c.Bridge).Run()
	for n := 1; n <= maxNetworks; n++ {
		bridge, _ := c.Network(n)
		_ = exec.Command("ip", "link", "del", bridge).Run()
	}
}

// maxNetworks is how many networks beside its own Cells.Network gives.
const maxNetworks = 4

// Network returns the bridge and subnet of the cells' n-th network: 0 is
// Bridge and Subnet; 1 to maxNetworks are bridges of their own with the
// next /24s, for a second kip whose local plugin must not hand out the
// addresses the first one does (each plugin allocates from its subnet
// alone, and a cell that outlives a test, CoreDNS's, keeps its address).
// Cells on any of them reach the registry at Gateway, an address of this
// machine. Stop deletes the bridges.
func (c *Cells) Network(n int) (bridge, subnet string) {
	if n <= 0 || n > maxNetworks {
		return c.Bridge, c.Subnet
	}
	third, _ := strconv.Atoi(strings.Split(c.Subnet, ".")[2])
	return fmt.Sprintf("%s%d", c.Bridge, n), fmt.Sprintf("10.213.%d.0/24", 10+(third-10+n)%200)
}

// usedThirds returns the third octets of the 10.213.x.0/24 subnets that an
// interface of this machine has an address in: a bridge of a run that was
// killed keeps its route (a bridge without ports is only "linkdown", and
// such routes are used), so a new run on the same subnet could not reach its
// cells.
func usedThirds() map[int]bool {
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return used
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 213 {
			used[int(ip4[2])] = true
		}
	}
	return used
}

// freeThird returns the first third octet from want on (wrapping within
// 10..209) whose subnet and the maxNetworks after it (Cells.Network) meet
// no used subnet's block: a used third may be the first of another run's
// networks, whose next ones it makes later; want itself when every choice
// collides.
func freeThird(want int, used map[int]bool) int {
	for i := range 200 {
		third := 10 + (want-10+i)%200
		free := true
		for n := -maxNetworks; n <= maxNetworks; n++ {
			if used[10+(third-10+n+200)%200] {
				free = false
				break
			}
		}
		if free {
			return third
		}
	}
	return want
}

// portFree reports whether port can be listened on at every address.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Kip is a running `kip run` process.
type Kip struct {
	NodeName string
	Dir      string
	LogPath  string
	// ConfigPath is kip's configuration file (kip.yaml in Dir), which
	// kip reads again on SIGHUP (Signal).
	ConfigPath string
	// BinDir holds kip, kip-cell and the plugins; PluginDir is the
	// directory kip runs its plugin from (BinDir unless
	// KipOptions.PluginDir).
	BinDir, PluginDir string
	// Plugin is the cloud plugin kip runs: "local", "aws", "gce" or
	// "azure".
	Plugin string
	// StateDir is the local plugin's: kip's own (plugin local), or the one
	// the EC2 or Compute simulator starts its instances' cells with
	// (plugin aws or gce). Either way it holds one directory per live
	// cell.
	StateDir string
	// PodLogsDir is kip's cells.podLogsDir, where it keeps the logs of
	// pods that ended.
	PodLogsDir string
	// EC2 is the simulator kip's aws plugin talks to; nil for another
	// plugin.
	EC2 *ec2sim.Server
	// GCE is the Compute Engine simulator kip's gce plugin talks to; nil
	// for another plugin.
	GCE *gcesim.Server
	// Azure is the ARM simulator kip's azure plugin talks to; nil for
	// another plugin.
	Azure *azuresim.Server
	// ClusterID is kip's clusterID.
	ClusterID string
	// Identity is kip's name in its node's Lease (leaderElection.identity)
	// when KipOptions.LeaderElection is on.
	Identity   string
	localCells *localcells.LocalCells
	// LightCellsLog is the log of the kip-light-cells process that hosts
	// this kip's cells (KipOptions.LightCells); empty without.
	LightCellsLog string
	lightCells    *exec.Cmd
	// cellNetwork is the local plugin's network mode
	// (KipOptions.CellNetwork); bridge the cells' bridge (Cells.Network).
	cellNetwork, bridge string
	env                 []string // KipOptions.Env
	// adminURL is where kip's admin server listens (AdminURL);
	// adminToken what it lets read /metrics and /cells (AdminToken).
	adminURL, adminToken string
	// pluginConfig is kip's plugin.config; beside is the kip whose plugin
	// state this one shares (KipOptions.Beside), which Stop leaves alone.
	pluginConfig map[string]any
	beside       *Kip
	// removeDir: Dir is a temporary directory that Stop removes.
	removeDir bool
	cmd       *exec.Cmd
	done      chan struct{}
}

// Plugins StartKip can run kip with.
const (
	PluginLocal = "local"
	PluginAWS   = "aws"
	PluginGCE   = "gce"
	PluginAzure = "azure"
)

// Sim is what the EC2, Compute Engine and ARM simulators all offer, by
// the same names (simknobs.Knobs, their cells' agents, their boot): a
// test about kip rather than about one cloud drives either through it.
type Sim interface {
	// SilenceAgents makes the next n instances run without their cell
	// agent ever starting.
	SilenceAgents(n int)
	SetBootDelay(d time.Duration)
	InjectFault(f simknobs.Fault)
	ClearFaults()
	Calls() map[string]int
	MaxCallsPerSecond() int
	Throttled() int
	ResetCalls()
}

// Sim is the simulator kip's cloud plugin talks to; nil for the local
// plugin.
func (k *Kip) Sim() Sim {
	switch {
	case k.EC2 != nil:
		return k.EC2
	case k.GCE != nil:
		return k.GCE
	case k.Azure != nil:
		return k.Azure
	}
	return nil
}

// KipOptions configure StartKip.
type KipOptions struct {
	NodeName string
	// Plugin is PluginLocal (the default), PluginAWS (the aws plugin
	// against an EC2 simulator whose instances are real local cells) or
	// PluginGCE (the gce plugin against a Compute Engine simulator whose
	// instances are real local cells) or PluginAzure (the azure plugin
	// against an ARM simulator whose VMs are real local cells).
	Plugin string
	// BinDir holds kip, kip-cell and the plugins (BuildBinaries).
	BinDir string
	// Log receives progress lines.
	Log io.Writer
	// Dir holds kip's configuration, its log and the local plugin's
	// state; empty means a new temporary directory, which Stop removes.
	// A Dir given here stays after Stop, with the log in it.
	Dir string
	// ClusterID is kip's clusterID; empty means "e2e".
	ClusterID string
	// PluginDir is kip's plugin.dir, where it finds kip-plugin-<name>;
	// empty means BinDir. A test that replaces the plugin binary gives
	// kip a directory of its own.
	PluginDir string
	// PluginSHA256 is kip's plugin.sha256 pin; empty means none.
	PluginSHA256 string
	// Network is which of the cells' networks (Cells.Network) the local
	// plugin puts this kip's cells on; a second kip running beside the
	// run's takes its own.
	Network int
	// Bootstrap gives kip no node kubeconfig, only a bootstrap identity
	// (bootstrapIdentity: a token of the ServiceAccount kip-system/kip),
	// with which it gets its node certificate by TLS bootstrap into
	// Kip.BootstrapCertDir (a certificate already there is used while
	// valid).
	Bootstrap bool
	// LeaderElection turns on kip's leader election, holding its node's
	// Lease with the ServiceAccount kip-system/kip (a TokenRequest token
	// in a kubeconfig, election.go) under Kip.Identity.
	LeaderElection bool
	// Beside, if set, starts a second kip process for Beside's node with
	// Beside's plugin state (the same local state directory, or the same
	// simulator), so that the two compete for the node's Lease: NodeName,
	// Plugin and Network are Beside's. StartKip returns once it has seen
	// the Lease's leader rather than the Node Ready. Its Stop stops only
	// the process.
	Beside *Kip
	// LightCells makes every cell of this kip a light cell
	// (test/lightcell: the real agent over a runtime whose containers run
	// no process): one kip-light-cells process, started before kip and
	// stopped after it, hosts them all, and the local plugin's agent
	// command (behind a simulator too) is kip-light-stub, which hands its
	// cell over. A container's command decides how it ends
	// (cell/runtime/fakeruntime: "exit N", "sleep S", else until stopped).
	LightCells bool
	// LightPullDelay is how long a light cell takes to pull an image.
	LightPullDelay time.Duration
	// CellNetwork is the local plugin's network mode for this kip's
	// cells: "netns" (the default: a namespace and an address of Network
	// each) or "loopback" (no namespace, an address of 127.77.0.0/16:
	// more cells than a /24 holds, for light cells by the thousand).
	CellNetwork string
	// VolumeRefreshInterval is kip's cells.volumeRefreshInterval; zero
	// means the e2e runs' VolumeRefreshInterval (a benchmark gives kip's
	// default, a minute).
	VolumeRefreshInterval time.Duration
	// AgentKeepalive is kip's cells.agentKeepalive and
	// AgentKeepaliveTimeout its agentKeepaliveTimeout; zero means the e2e
	// runs' (framework.AgentKeepalive: a benchmark of idle cost gives
	// kip's defaults, 30 s and 15 s).
	AgentKeepalive, AgentKeepaliveTimeout time.Duration
	// WarmPool is kip's cells.warmPool section as YAML, its keys at the
	// start of their lines ("pools:\n  - name: small\n ..."); empty: no
	// warm pool.
	WarmPool string
	// Choices is kip's cells.choices section as YAML, as WarmPool
	// ("rules:\n  - name: team\n ..."); empty: none.
	Choices string
	// Cells are more settings of kip's cells section as YAML, their keys
	// at the start of their lines ("allowHostNetwork: true\n").
	Cells string
	// Profiling turns on kip's admin.profiling: Go's runtime profiles at
	// AdminURL()+"/debug/pprof/", to AdminToken.
	Profiling bool
	// Env is more of kip's environment (NAME=value), over the test's own
	// (GOMEMLIMIT=…, for the scale benchmark).
	Env []string
}

// withCellsSections adds opts's cells.warmPool and cells.choices sections
// and its other cells settings (KipOptions.WarmPool, Choices, Cells) to
// kip's config.
func withCellsSections(config string, opts KipOptions) string {
	if opts.Cells != "" {
		config = strings.Replace(config, "cells:\n", "cells:\n"+indent(opts.Cells, "  "), 1)
	}
	for _, s := range []struct{ key, yaml string }{{"warmPool", opts.WarmPool}, {"choices", opts.Choices}} {
		if s.yaml != "" {
			config = strings.Replace(config, "cells:\n", "cells:\n  "+s.key+":\n"+indent(s.yaml, "    "), 1)
		}
	}
	return config
}

// nodeIP is the address kip's kubelet API listens on and the node
// reports: where pods reach the API server, so that a pod reaches the
// node too (metrics-server scrapes it); 127.0.0.1 when the control plane
// serves loopback alone.
func (f *Framework) nodeIP() string {
	if f.Cluster.AdvertiseAddress == "" {
		return "127.0.0.1"
	}
	return f.Cluster.AdvertiseAddress
}

// AdminURL is the base URL of kip's admin server (/metrics, /healthz,
// /readyz, /cells): a free loopback port StartKip chose. /metrics and
// /cells want AdminToken (AdminGet sends it).
func (k *Kip) AdminURL() string { return k.adminURL }

// StartKip runs kip as a real process with the node's own identity
// (system:node:<name>), the local plugin launching kip-cell agents on
// cells' containerd, and waits until the node is Ready. It grants the
// node what deploy/rbac grants and labels it kubernetes.io/role=agent as
// an administrator would (a node may not set that label itself).
func (f *Framework) StartKip(ctx context.Context, cells *Cells, opts KipOptions) (*Kip, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	opts = opts.withBeside()
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	if err := f.applyRBAC(ctx, opts.NodeName); err != nil {
		return nil, err
	}
	adminToken, err := f.adminReaderToken(ctx)
	if err != nil {
		return nil, err
	}
	dir, temporary := opts.Dir, opts.Dir == ""
	if temporary {
		dir, err = os.MkdirTemp("", "kip-e2e-node-")
	} else {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("creating kip directory: %w", err)
	}
	identity, err := f.nodeIdentity(ctx, opts, dir)
	if err != nil {
		return nil, err
	}
	if opts.ClusterID == "" {
		opts.ClusterID = "e2e"
	}
	if opts.PluginDir == "" {
		opts.PluginDir = opts.BinDir
	}
	k := &Kip{NodeName: opts.NodeName, Dir: dir, LogPath: filepath.Join(dir, "kip.log"), StateDir: filepath.Join(dir, "local"),
		PodLogsDir: filepath.Join(dir, "pod-logs"),
		ConfigPath: filepath.Join(dir, "kip.yaml"), BinDir: opts.BinDir, PluginDir: opts.PluginDir,
		removeDir: temporary, done: make(chan struct{}), ClusterID: opts.ClusterID, adminToken: adminToken}
	agent := []string{filepath.Join(opts.BinDir, "kip-cell"), "--containerd-address", cells.Containerd.Socket,
		"--runc-root", cells.Containerd.RuncRoot, "--bootstrap", "{bootstrap}"}
	if opts.LightCells && opts.Beside == nil {
		if agent, err = k.startLightCells(opts); err != nil {
			return nil, err
		}
	}
	k.cellNetwork = cmp.Or(opts.CellNetwork, "netns")
	k.env = opts.Env
	bridge, subnet := cells.Network(opts.Network)
	k.bridge = bridge
	if k.pluginConfig, err = k.pluginFor(ctx, opts, agent, bridge, subnet); err != nil {
		k.stopLightCells()
		return nil, err
	}
	pluginJSON, err := json.Marshal(k.pluginConfig)
	if err != nil {
		return nil, fmt.Errorf("encoding the plugin's configuration: %w", err)
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("choosing the admin server's port: %w", err)
	}
	adminAddress := net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort))
	k.adminURL = "http://" + adminAddress
	nodeIP := f.nodeIP()
	config := fmt.Sprintf(`clusterID: %[9]s
nodeName: %[1]s
%[2]s
node:
  internalIP: %[12]s
  listenAddress: %[13]s
  clientCAFile: %[3]s
cells:
  insecureRegistries: [%[4]q]
  unavailableTTL: %[8]s
  agentTimeout: %[14]s
  agentKeepalive: %[16]s
  agentKeepaliveTimeout: %[17]s
  bootRetry: %[18]s
  volumeRefreshInterval: %[10]s
  podLogsDir: %[11]s
log:
  level: debug
  format: text
admin:
  listenAddress: %[15]s
plugin:
  name: %[5]s
  dir: %[6]s
  config: %[7]s
`, opts.NodeName, identity, f.Cluster.CAFile, cells.Registry.Host(), k.Plugin, opts.PluginDir, pluginJSON, UnavailableTTL, opts.ClusterID,
		cmp.Or(opts.VolumeRefreshInterval, VolumeRefreshInterval), k.PodLogsDir, nodeIP, net.JoinHostPort(nodeIP, "0"), AgentTimeout, adminAddress,
		cmp.Or(opts.AgentKeepalive, AgentKeepalive), cmp.Or(opts.AgentKeepaliveTimeout, AgentKeepaliveTimeout), BootRetry)
	if opts.PluginSHA256 != "" {
		config += "  sha256: " + opts.PluginSHA256 + "\n"
	}
	config = withCellsSections(config, opts)
	election, err := f.electionConfig(ctx, k, opts.LeaderElection)
	if err != nil {
		return nil, err
	}
	config += election
	if opts.Profiling {
		config = strings.Replace(config, "admin:\n", "admin:\n  profiling: true\n", 1)
	}
	configPath := k.ConfigPath
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("writing kip config: %w", err)
	}
	logFile, err := os.Create(k.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating kip log: %w", err)
	}
	if err := k.start(logFile); err != nil {
		return nil, err
	}
	if opts.Beside != nil {
		if err := k.waitStandingBy(ctx); err != nil {
			k.Stop()
			return nil, fmt.Errorf("waiting for kip beside %s to see its node's leader: %w", opts.NodeName, err)
		}
		fmt.Fprintf(opts.Log, "kip beside %s running as node %s (log %s)\n", k.beside.LogPath, opts.NodeName, k.LogPath)
		return k, nil
	}

	err = Poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		select {
		case <-k.done:
			return false, fmt.Errorf("kip exited during start-up; last lines of %s:\n%s", k.LogPath, k.LogTail(40))
		default:
		}
		n, err := f.Client.CoreV1().Nodes().Get(ctx, opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		k.Stop()
		return nil, fmt.Errorf("waiting for node %s to be Ready: %w\nkip log:\n%s", opts.NodeName, err, k.LogTail(40))
	}
	label := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "label", "node", opts.NodeName, "kubernetes.io/role=agent", "--overwrite")
	if out, err := label.CombinedOutput(); err != nil {
		k.Stop()
		return nil, fmt.Errorf("labelling node: %w\n%s", err, out)
	}
	fmt.Fprintf(opts.Log, "kip running as node %s (log %s)\n", opts.NodeName, k.LogPath)
	return k, nil
}

// nodeIdentity returns kip.yaml's lines that give kip the node's identity:
// the node's own kubeconfig, or the bootstrap section (KipOptions.Bootstrap).
func (f *Framework) nodeIdentity(ctx context.Context, opts KipOptions, dir string) (string, error) {
	if opts.Bootstrap {
		return f.bootstrapIdentity(ctx, dir)
	}
	nodeKubeconfig, err := f.Cluster.AddNode(opts.NodeName)
	if err != nil {
		return "", err
	}
	return "kubeconfig: " + nodeKubeconfig, nil
}

// applyRBAC applies deploy/rbac/*.yaml for node (rbacFor), as an
// administrator installing kip for it does.
func (f *Framework) applyRBAC(ctx context.Context, node string) error {
	kubectl := filepath.Join(f.Cluster.BinDir, "kubectl")
	rbacDir, err := repoFile("deploy/rbac")
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(rbacDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		if err != nil {
			return fmt.Errorf("reading RBAC: %w", err)
		}
		return errors.New("reading RBAC: no deploy/rbac/*.yaml")
	}
	var rbac []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("reading RBAC: %w", err)
		}
		rbac = append(rbac, rbacFor(string(data), node))
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Cluster.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(strings.Join(rbac, "\n---\n"))
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("applying deploy/rbac: %w\n%s", err, out)
	}
	return nil
}

// startPlugin sets k.Plugin and returns its configuration: the local
// plugin's cells on bridge and subnet, or a simulator started for the aws
// or gce plugin whose instances are such cells.
func (k *Kip) startPlugin(ctx context.Context, plugin, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	switch plugin {
	case "", PluginLocal:
		k.Plugin = PluginLocal
		return map[string]any{
			"agentCommand": agent, "network": k.cellNetwork, "bridge": bridge, "subnet": subnet,
			"stateDir": k.StateDir, "terminationGrace": "5s",
		}, nil
	case PluginAWS:
		k.Plugin = PluginAWS
		return k.startEC2(ctx, binDir, agent, bridge, subnet)
	case PluginGCE:
		k.Plugin = PluginGCE
		return k.startGCE(ctx, binDir, agent, bridge, subnet)
	case PluginAzure:
		k.Plugin = PluginAzure
		return k.startAzure(ctx, binDir, agent, bridge, subnet)
	}
	return nil, fmt.Errorf("starting kip: unknown plugin %q (want %s, %s, %s or %s)", plugin, PluginLocal, PluginAWS, PluginGCE, PluginAzure)
}

// startEC2 starts the EC2 simulator for the aws plugin: every instance it
// runs is a real cell of the local plugin (kip-cell on the cells'
// containerd, in its own network namespace on bridge and subnet), booted
// with the bootstrap the aws plugin put in the instance's user data. It
// returns the aws plugin's configuration for the simulator.
func (k *Kip) startEC2(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	// The instance's metadata (the spot interruption notice) at the unix
	// socket the simulator serves for it.
	agent = append(slices.Clone(agent), "--imds-endpoint", "unix://{imds}")
	log, logFile, err := k.startSimCells(ctx, "ec2sim", binDir, agent, bridge, subnet, ec2sim.CellTypes(ec2sim.DefaultInstanceTypes))
	if err != nil {
		return nil, err
	}
	k.EC2 = ec2sim.New(ec2sim.Options{Cells: k.localCells, AccessKeyID: ec2AccessKey, Logger: log.With("component", "ec2sim")})
	url, err := k.EC2.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the EC2 simulator: %w", err)
	}
	// kip checks each cell's signed identity document (served by its
	// instance's metadata) against the simulator's certificate before it
	// signs the cell's certificate.
	identityCert := filepath.Join(k.StateDir, "ec2sim-identity.pem")
	if err := os.WriteFile(identityCert, k.EC2.IdentityCertificatePEM(), 0o600); err != nil {
		_ = k.EC2.Close()
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("writing the simulator's identity certificate: %w", err)
	}
	return map[string]any{
		"region": "us-east-1", "endpointURL": url, "ecrEndpointURL": url,
		"credentials": map[string]any{"accessKeyID": ec2AccessKey, "secretAccessKey": "e2e-secret"},
		"vpcID":       ec2sim.DefaultVPCID,
		"image":       map[string]any{"owner": ec2sim.DebianOwnerID, "name": "debian-12-amd64-*"},
		"identity":    map[string]any{"certificates": identityCert},
	}, nil
}

// startSimCells creates the log of simulator name (<name>.log in k.Dir,
// and the logger writing to it) and starts k.localCells, the local
// plugin's cells its instances run as (agent on bridge and subnet), sized
// as types. The caller closes logFile if it fails later.
func (k *Kip) startSimCells(ctx context.Context, name, binDir string, agent []string, bridge, subnet string,
	types []simcells.InstanceType,
) (log *slog.Logger, logFile *os.File, err error) {
	logFile, err = os.Create(filepath.Join(k.Dir, name+".log"))
	if err != nil {
		return nil, nil, fmt.Errorf("creating the simulator's log: %w", err)
	}
	log = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	k.localCells, err = localcells.New(ctx, localcells.Config{
		PluginPath: filepath.Join(binDir, "kip-plugin-local"), AgentCommand: agent, StateDir: k.StateDir, Network: k.cellNetwork,
		// Each instance's metadata also at 169.254.169.254, off the cell,
		// as its cloud serves it (TestPodCannotReachItsInstanceMetadata).
		Metadata:      k.cellNetwork == "netns",
		InstanceTypes: types,
		PluginConfig:  map[string]any{"bridge": bridge, "subnet": subnet, "terminationGrace": "5s"},
		ClusterID:     "e2e-" + name, NodeName: k.NodeName, Logger: log.With("component", "local-cells"),
	})
	if err != nil {
		_ = logFile.Close()
		return nil, nil, fmt.Errorf("starting the simulator's local cells: %w", err)
	}
	return log, logFile, nil
}

// startGCE starts the Compute Engine simulator for the gce plugin: every
// instance it runs is a real cell of the local plugin (kip-cell on the
// cells' containerd, in its own network namespace on bridge and subnet),
// sized as its machine type (gcesim.DefaultMachineTypes) and booted with
// the bootstrap the gce plugin put in the instance's kip-bootstrap
// metadata item. It returns the gce plugin's configuration for the
// simulator: its endpoint, without credentials, the cells' service
// account, and the simulator's keys for their identity tokens.
func (k *Kip) startGCE(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	// The agent joins with the identity token of its instance's metadata
	// server, at the unix socket the simulator serves for it, and reads
	// no EC2 metadata, as deploy/gce/startup.sh runs it.
	agent = append(slices.Clone(agent), "--imds-endpoint", "none", "--gce-metadata-endpoint", "unix://{imds}")
	log, logFile, err := k.startSimCells(ctx, "gcesim", binDir, agent, bridge, subnet, gcesim.CellTypes(gcesim.DefaultMachineTypes))
	if err != nil {
		return nil, err
	}
	// An insert's operation is RUNNING for a moment, as on Compute Engine
	// (never DONE in the insert's answer, which the plugin takes for a
	// replayed insert): the plugin waits for it with zoneOperations.wait.
	k.GCE = gcesim.New(gcesim.Options{Cells: k.localCells, OperationDelay: gceOperationDelay, Logger: log.With("component", "gcesim")})
	url, err := k.GCE.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the Compute Engine simulator: %w", err)
	}
	// kip checks each cell's identity token (which a cell has with a
	// service account) against the simulator's keys before it signs the
	// cell's certificate.
	return map[string]any{
		"project": gcesim.DefaultProject, "region": gcesim.DefaultRegion, "subnetwork": "default",
		"image":    map[string]any{"project": gcesim.DebianProject, "family": "debian-12"},
		"endpoint": url, "withoutAuthentication": true,
		"serviceAccount": GCEServiceAccount,
		"identity":       map[string]any{"certsURL": k.GCE.IdentityCertsURL()},
	}, nil
}

// GCEServiceAccount is the cells' service account in the gce pass.
const GCEServiceAccount = "kip-cell@" + gcesim.DefaultProject + ".iam.gserviceaccount.com"

// gceOperationDelay is how long the Compute Engine simulator's operations
// run before they are DONE.
const gceOperationDelay = 200 * time.Millisecond

// startAzure starts the ARM simulator for the azure plugin: every VM it
// runs is a real cell of the local plugin (kip-cell on the cells'
// containerd, in its own network namespace on bridge and subnet), sized
// as its VM size (azuresim.DefaultSizes) and booted with the bootstrap
// the azure plugin put in the VM's userData. It returns the azure
// plugin's configuration for the simulator: its endpoint, its TLS
// certificate as the CA bundle, without credentials.
func (k *Kip) startAzure(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	log, logFile, err := k.startSimCells(ctx, "azuresim", binDir, agent, bridge, subnet, azuresim.CellSizes(azuresim.DefaultSizes))
	if err != nil {
		return nil, err
	}
	// A create's allocation is decided a moment after ARM accepted it, as
	// in Azure (where it takes seconds).
	k.Azure = azuresim.New(azuresim.Options{Cells: k.localCells, AllocationDelay: azureAllocationDelay, Logger: log.With("component", "azuresim")})
	url, err := k.Azure.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the ARM simulator: %w", err)
	}
	ca := filepath.Join(k.StateDir, "azuresim-ca.pem")
	if err := os.WriteFile(ca, k.Azure.CACert(), 0o600); err != nil {
		_ = k.Azure.Close()
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("writing the ARM simulator's certificate: %w", err)
	}
	return map[string]any{
		"subscriptionID": azuresim.DefaultSubscription, "resourceGroup": azuresim.DefaultResourceGroup,
		"location": azuresim.DefaultLocation,
		"subnetID": k.Azure.SubnetID(azuresim.DefaultSubnets[0]), "networkSecurityGroupID": k.Azure.SecurityGroupID(azuresim.DefaultSecurityGroups[0]),
		"image":    map[string]any{"publisher": "Debian", "offer": "debian-12", "sku": "12-gen2"},
		"endpoint": url, "caBundle": ca, "withoutAuthentication": true,
	}, nil
}

// azureAllocationDelay is how long after its PUT the ARM simulator
// decides a VM's allocation.
const azureAllocationDelay = 200 * time.Millisecond

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

// ec2AccessKey is the only access key the simulator accepts.
const ec2AccessKey = "AKIDE2ESIMULATOR"

// start runs `kip run` with the configuration file, its output to
// logFile, which it closes when kip exits (then k.done closes).
func (k *Kip) start(logFile *os.File) error {
	k.cmd = exec.Command(filepath.Join(k.BinDir, "kip"), "run", "--config", k.ConfigPath)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.Env = append(append(append(os.Environ(), "KUBECONFIG="), raceEnv(k.NodeName)...), k.env...)
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := k.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting kip: %w", err)
	}
	done := k.done
	go func() { _ = k.cmd.Wait(); _ = logFile.Close(); close(done) }()
	return nil
}

// Kill ends kip and its plugin at once (SIGKILL to its process group), as
// a crash would, and waits until kip has exited. With the aws or gce
// plugin the simulator and its instances' cells run on (the local plugin's cells
// may not: they are kip's children). Restart starts kip again.
func (k *Kip) Kill() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
}

// Restart starts kip again after Kill, with the same configuration,
// appending to its log. It does not wait for anything: the node stays
// Ready through a short outage (its lease lasts 40 s).
func (k *Kip) Restart() error {
	logFile, err := os.OpenFile(k.LogPath, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("reopening kip's log: %w", err)
	}
	k.done = make(chan struct{})
	return k.start(logFile)
}

// Signal sends sig to the kip process (not its plugin or cells): SIGHUP
// makes kip read its configuration again and swap its plugin process.
func (k *Kip) Signal(sig syscall.Signal) error {
	if err := k.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling kip: %w", err)
	}
	return nil
}

// Exited is closed once the kip process has exited.
func (k *Kip) Exited() <-chan struct{} { return k.done }

// PID is the kip process's.
func (k *Kip) PID() int { return k.cmd.Process.Pid }

// LogTail returns the last n lines of kip's log.
func (k *Kip) LogTail(n int) string {
	data, _ := os.ReadFile(k.LogPath)
	return tail(string(data), n)
}

// LightCellsLogTail returns the last n lines of the log of the
// kip-light-cells process hosting k's light cells (KipOptions.LightCells).
func (k *Kip) LightCellsLogTail(n int) string {
	data, _ := os.ReadFile(k.LightCellsLog)
	return tail(string(data), n)
}

// AgentLogTails returns the last n lines of the agent log of every cell
// still in the local plugin's state directory (each cell's directory
// holds one: <StateDir>/cells/<cell ID>/agent.log), each headed by its
// path: what a cell's agent said when a pod did not start.
func (k *Kip) AgentLogTails(n int) string {
	var b strings.Builder
	k.eachAgentLog(func(path string, data []byte) {
		fmt.Fprintf(&b, "--- last lines of %s\n%s\n", path, tail(string(data), n))
	})
	return b.String()
}

// eachAgentLog calls fn with the path and content of the agent log of
// every cell still in the local plugin's state directory.
func (k *Kip) eachAgentLog(fn func(path string, data []byte)) {
	logs, _ := filepath.Glob(filepath.Join(k.StateDir, "cells", "*", "agent.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the cell ended meanwhile
		}
		fn(path, data)
	}
}

// Stop stops kip (SIGTERM, then SIGKILL) and then whatever cells of its
// local plugin are still running, so that nothing outlives the tests.
func (k *Kip) Stop() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
	}
	if k.beside != nil {
		k.keepLogs() // the plugin state, and the cells, are the first kip's
		if k.removeDir {
			_ = os.RemoveAll(k.Dir)
		}
		return
	}
	if k.EC2 != nil {
		_ = k.EC2.Close() // stops the instances' cells
	}
	if k.GCE != nil {
		_ = k.GCE.Close() // stops the instances' cells
	}
	if k.Azure != nil {
		_ = k.Azure.Close() // stops the VMs' cells
	}
	if k.localCells != nil {
		_ = k.localCells.Close()
	}
	killUnder(k.StateDir)
	k.stopLightCells()
	removeNetns(k.bridge)
	k.keepLogs()
	if k.removeDir {
		// Unmounts first: a cell still running when kip stopped leaves the
		// tmpfs its agent mounted for secrets (cells outlive kip).
		if err := pod.RemoveVolumes(k.Dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing kip's directory %s: %v\n", k.Dir, err)
		}
	}
}

// keepLogs copies kip's and the simulator's logs into the directory
// KIP_E2E_KEEP_LOGS names, if set, before Stop removes kip's directory: a
// run's full logs for reading afterwards (the failure dumps show tails).
// They are named after the node (kip.kip.log, kip.gcesim.log;
// kip-swap.kip.log for a test's second kip), so that the kips of a run
// do not overwrite each other's.
func (k *Kip) keepLogs() {
	dst, ok := keepLogsDir()
	if !ok {
		return
	}
	for _, name := range []string{"kip.log", "ec2sim.log", "gcesim.log", "azuresim.log", "light-cells.log"} {
		data, err := os.ReadFile(filepath.Join(k.Dir, name))
		if err != nil {
			continue // no simulator on the local plugin
		}
		prefix := k.NodeName
		if k.beside != nil {
			prefix += "." + k.Identity
		}
		if err := os.WriteFile(filepath.Join(dst, prefix+"."+name), data, 0o644); err != nil { //nolint:gosec // as above
			fmt.Fprintln(os.Stderr, "e2e: keeping logs:", err)
		}
	}
}

// keepLogsDir is the directory KIP_E2E_KEEP_LOGS names, made if needed;
// false when it is unset or cannot be made (said on stderr).
func keepLogsDir() (string, bool) {
	dst := os.Getenv("KIP_E2E_KEEP_LOGS")
	if dst == "" {
		return "", false
	}
	if err := os.MkdirAll(dst, 0o755); err != nil { //nolint:gosec // the person running the tests names the directory
		fmt.Fprintln(os.Stderr, "e2e: keeping logs:", err)
		return "", false
	}
	return dst, true
}

// KeepAgentLogs copies the agent log of every cell still in the local
// plugin's state directory (AgentLogTails) into the directory
// KIP_E2E_KEEP_LOGS names, if set, as <node>.agent.<cell>.log: a test
// calls it while its pods' cells still run, since Stop comes after they
// ended.
func (k *Kip) KeepAgentLogs() {
	dst, ok := keepLogsDir()
	if !ok {
		return
	}
	k.eachAgentLog(func(path string, data []byte) {
		name := k.NodeName + ".agent." + filepath.Base(filepath.Dir(path)) + ".log"
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil { //nolint:gosec // as above
			fmt.Fprintln(os.Stderr, "e2e: keeping agent logs:", err)
		}
	})
}

// startLightCells starts the kip-light-cells process that hosts k's
// cells (KipOptions.LightCells), its log in k.Dir, and returns the local
// plugin's agent command: kip-light-stub handing each cell to it.
func (k *Kip) startLightCells(opts KipOptions) ([]string, error) {
	socket := filepath.Join(k.Dir, "light-cells.sock")
	k.LightCellsLog = filepath.Join(k.Dir, "light-cells.log")
	logFile, err := os.Create(k.LightCellsLog)
	if err != nil {
		return nil, fmt.Errorf("creating the light cells' log: %w", err)
	}
	defer logFile.Close() // the process has its own copy
	k.lightCells = exec.Command(filepath.Join(opts.BinDir, "kip-light-cells"), "-listen", socket,
		"-pull-delay", opts.LightPullDelay.String())
	k.lightCells.Stdout, k.lightCells.Stderr = logFile, logFile
	k.lightCells.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := k.lightCells.Start(); err != nil {
		k.lightCells = nil
		return nil, fmt.Errorf("starting kip-light-cells: %w", err)
	}
	// A stub waits a while for the socket: no need to wait for it here.
	return []string{filepath.Join(opts.BinDir, "kip-light-stub"), socket, "--bootstrap", "{bootstrap}"}, nil
}

// stopLightCells stops the kip-light-cells process, once its stubs are
// gone (then its cells have stopped) or after a while.
func (k *Kip) stopLightCells() {
	if k.lightCells == nil {
		return
	}
	_ = k.lightCells.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = k.lightCells.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = k.lightCells.Process.Kill()
		<-done
	}
	k.lightCells = nil
}

// killUnder kills processes whose command line names dir (cell agents).
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(data), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeNetns deletes the network namespaces of the killed cells on
// bridge: those named kip-<id> that no process is in, whose veth (kv<id>,
// as the local plugin names them) is a port of bridge. Another run's
// cells (make e2e runs the cloud passes at once), even one whose
// namespace is still empty while its plugin sets it up, are not on it.
func removeNetns(bridge string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		id, ok := strings.CutPrefix(name, "kip-")
		if !ok || !netnsEmpty(name) {
			continue
		}
		if master, err := os.Readlink(filepath.Join("/sys/class/net", "kv"+id, "master")); err != nil || filepath.Base(master) != bridge {
			continue
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

func netnsEmpty(name string) bool {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}

// repoFile finds path relative to the repository root (the directory with
// go.work) from the test's working directory.
func repoFile(path string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, path), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding %s: no go.work above the working directory", path)
		}
		dir = parent
	}
}

// indent puts prefix before every line of text, which it ends with a
// newline.
func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
