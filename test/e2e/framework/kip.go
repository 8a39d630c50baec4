package framework

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
)

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
	// at the start of their lines ("allowHostNetwork: true\n"), none of
	// those StartKip sets itself (kipConfig's cellsSection). StartKip
	// reads WarmPool, Choices and Cells as YAML and fails on one that is
	// not.
	Cells string
	// Profiling turns on kip's admin.profiling: Go's runtime profiles at
	// AdminURL()+"/debug/pprof/", to AdminToken.
	Profiling bool
	// Env is more of kip's environment (NAME=value), over the test's own
	// (GOMEMLIMIT=…, for the scale benchmark).
	Env []string
}

// withBeside takes NodeName, Plugin, BinDir, PluginDir and ClusterID from
// o.Beside, if set.
func (o KipOptions) withBeside() KipOptions {
	if b := o.Beside; b != nil {
		o.NodeName, o.Plugin, o.BinDir, o.PluginDir, o.ClusterID = b.NodeName, b.Plugin, b.BinDir, b.PluginDir, b.ClusterID
	}
	return o
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
	kubeconfig, bootstrap, err := f.nodeIdentity(ctx, opts, dir)
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
	adminPort, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("choosing the admin server's port: %w", err)
	}
	adminAddress := net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort))
	k.adminURL = "http://" + adminAddress
	election, err := f.electionConfig(ctx, k, opts.LeaderElection)
	if err != nil {
		return nil, err
	}
	config, err := newKipConfig(k, opts, kipSite{
		Kubeconfig: kubeconfig, Bootstrap: bootstrap, NodeIP: f.nodeIP(), ClientCAFile: f.Cluster.CAFile,
		Registry: cells.Registry.Host(), AdminAddress: adminAddress, Election: election,
	})
	if err != nil {
		return nil, err
	}
	if err := config.write(k.ConfigPath); err != nil {
		return nil, err
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

	if err := f.waitNodeReady(ctx, k); err != nil {
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

// nodeIdentity returns what gives kip the node's identity: the node's
// own kubeconfig, or the bootstrap section (KipOptions.Bootstrap).
func (f *Framework) nodeIdentity(ctx context.Context, opts KipOptions, dir string) (kubeconfig string, bootstrap *bootstrapSection, err error) {
	if opts.Bootstrap {
		bootstrap, err = f.bootstrapIdentity(ctx, dir)
		return "", bootstrap, err
	}
	kubeconfig, err = f.Cluster.AddNode(opts.NodeName)
	if err != nil {
		return "", nil, err
	}
	return kubeconfig, nil, nil
}
