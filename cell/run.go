package cell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/clusterip"
	"github.com/kipcell/kip/cell/ephemeral"
	"github.com/kipcell/kip/cell/imds"
	"github.com/kipcell/kip/cell/pod"
	"github.com/kipcell/kip/cell/podnet"
	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/cell/server"
	"github.com/kipcell/kip/pluginapi/identity"
)

// Config is the agent's configuration, from flags and the bootstrap.
type Config struct {
	Bootstrap *api.Bootstrap
	// ContainerdAddress is containerd's socket.
	ContainerdAddress string
	// Runtime, when set, runs the pod's containers instead of containerd
	// (ContainerdAddress, RuncRoot and InsecureRegistries are then
	// unused): a light cell's fake runtime (cell/runtime/fakeruntime),
	// which runs in the agent's process and so sees the agent's mounts.
	Runtime runtime.Runtime
	// NetNSPath is the network namespace the containers join; empty means
	// the agent's own.
	NetNSPath string
	// StateDir holds logs, FIFOs, the pod's volumes and its state
	// (StateFile), and the agent's key and certificate (IdentityDir): an
	// agent started on the same StateDir after one that died serves as
	// the joined cell again and resumes its pod.
	StateDir string
	// InstanceIdentity, when set, reads the cloud's signed instance
	// identity, sent with the join request (agent.InstanceIdentity).
	InstanceIdentity server.InstanceIdentity
	// PodIP is the cell's address: reported as hostIP, and as podIP of a
	// pod that shares the cell's network (one without an address of its
	// own from the host, or with hostNetwork).
	PodIP string
	// Listen is the gRPC address; empty means Bootstrap.ListenAddress, else
	// PodIP:6421, else :6421.
	Listen string
	// Listener, when set, is where the agent serves instead of a listener
	// of its own on Listen (a light cell whose socket another process of
	// the cell opened); Run closes it.
	Listener net.Listener
	// InsecureRegistries are pulled from over plain HTTP.
	InsecureRegistries []string
	// ResolvConf is the cell's own resolver configuration, what a pod's
	// dnsPolicy Default means (pod.Config.ResolvConf); empty: none.
	ResolvConf string
	// RuncRoot is runc's state directory; empty means containerd's default.
	RuncRoot string
	// SharedNamespace, when set, is a containerd namespace shared by the
	// cells of this machine (the local plugin's), where images are pulled
	// and unpacked once for all of them and each cell owns only its
	// containers and a lease on its images (runtime.ContainerdConfig.Cell);
	// empty: the cell's own namespace (Namespace), as on a cloud
	// instance, one cell per machine.
	SharedNamespace string
	// CgroupParent, when set, is the pod's cgroup, which the containers'
	// cgroups are made in (runtime.ContainerdConfig.CgroupParent): the
	// local plugin's /kip/<cell ID>/pod, beside the agent's group in the
	// cell's. Empty: containerd's default, /kip-<cell ID>, on a machine
	// that is the cell (or /<SharedNamespace>, not the pod's alone). The
	// agent makes the pod's group and limits it to the cell's memory (its
	// parent's limit, else the machine's) less AgentMemory
	// (runtime.PreparePodCgroup), so that a pod that exhausts it is
	// OOM-killed and the agent is not.
	CgroupParent string
	// AgentMemory is the memory the pod's cgroup leaves the agent (at
	// most half the cell's); zero: runtime.DefaultAgentMemory.
	AgentMemory int64
	// OOMScoreAdj, when not zero, is the agent's own OOM score adjustment,
	// set as it starts (kip-cell's default -998: after any container;
	// the kubelet's is -999).
	OOMScoreAdj int
	// Backoff is the restart back-off; zero means the kubelet's.
	Backoff pod.Backoff
	// DiskWait is how long the pod waits for an attached disk's device to
	// appear (pod.Config.DiskWait); zero means pod.DefaultDiskWait.
	DiskWait time.Duration
	// DiskPathRoot stands in for the instance's root where udev makes the
	// disks' device links (pod.Config.DiskPathRoot): only the cloud
	// simulators' cells have one (kip-cell --disk-path-root).
	DiskPathRoot string
	// ServiceProxy is how the cell serves ClusterIP services:
	// ServiceProxyIPTables (the default when empty) or ServiceProxyNone,
	// for an agent that shares its network namespace with the machine
	// (the local plugin's loopback cells), whose rules would be the
	// machine's.
	ServiceProxy string
	// ServicePrograms, when set, programs the ClusterIP services instead
	// of iptables (a light cell only counts them); ServiceProxyNone still
	// means none.
	ServicePrograms clusterip.Programmer
	// PodMetadata lets a pod in a network namespace of its own reach the
	// instance metadata (podnet.Options.Metadata), as the operator's boot
	// recipe allows (KIP_POD_IMDS, KIP_POD_METADATA).
	PodMetadata bool
	// IMDSEndpoint is the instance metadata service (cell/imds: http:// or
	// unix://) the agent reads the cloud's spot interruption notices and
	// rebalance recommendations from, and reports them to the host; empty:
	// none (not an EC2 instance).
	IMDSEndpoint string
	// GCEMetadataEndpoint is Compute Engine's metadata server (cell/imds:
	// http:// or unix://) the agent reads the instance's identity token
	// from for its join, instead of EC2's identity document; empty: none
	// (not a Compute Engine instance). The token's audience is the cell's
	// (pluginapi/identity.Audience of the bootstrap's cluster and cell).
	GCEMetadataEndpoint string
	// NoticeInterval is how often it reads them; zero means
	// agent.NoticeInterval (5 s).
	NoticeInterval time.Duration
	// StopGrace bounds the grace given to the containers when the agent
	// itself stops.
	StopGrace time.Duration
	// StorageInterval is how often the pod's local ephemeral storage is
	// measured against its limits (cell/ephemeral); zero means
	// ephemeral.DefaultInterval (10 s, the kubelet's).
	StorageInterval time.Duration
	Logger          *slog.Logger
	// Now, when set, replaces time.Now for the agent's checks of
	// certificates (its own, the host's at each handshake): tests that
	// move time set the host's clock and this one alike.
	Now func() time.Time
	// Ready, when set, is called with the listener's address once the
	// agent serves.
	Ready func(addr net.Addr)
}

// DefaultIMDSEndpoint is kip-cell's instance metadata service: EC2's.
const DefaultIMDSEndpoint = imds.DefaultEndpoint

// Values of Config.ServiceProxy.
const (
	ServiceProxyIPTables = "iptables"
	ServiceProxyNone     = "none"
)

// StateFile is the file under Config.StateDir where the agent keeps its
// pod's state for the next agent of the cell (pod.Config.StatePath).
const StateFile = "pod.json"

// IdentityDir is the directory under Config.StateDir (0700) where the
// agent keeps its key and certificate (agent.Identity).
const IdentityDir = "identity"

// PodNetDir is the directory under Config.StateDir where the pod's own
// network namespace is pinned (cell/podnet), so that an agent started
// again finds it.
const PodNetDir = "podnet"

// Namespace is the containerd namespace of a cell that has its own.
func Namespace(cellID string) string { return "kip-" + cellID }

// runtimeNamespace is the containerd namespace of the cell's containers
// and, in a shared one, the cell ID that marks them as the cell's.
func (c *Config) runtimeNamespace() (namespace, cell string) {
	if c.SharedNamespace != "" {
		return c.SharedNamespace, c.Bootstrap.CellID
	}
	return Namespace(c.Bootstrap.CellID), ""
}

// ListenAddress resolves the address the agent listens on.
func (c *Config) ListenAddress() string {
	switch {
	case c.Listen != "":
		return c.Listen
	case c.Bootstrap != nil && c.Bootstrap.ListenAddress != "":
		return c.Bootstrap.ListenAddress
	case c.PodIP != "":
		return net.JoinHostPort(c.PodIP, strconv.Itoa(api.Port))
	}
	return ":" + strconv.Itoa(api.Port)
}

// Run runs the agent until ctx ends; then it stops the pod and removes it
// from containerd. An agent that dies instead (kill -9, a crash) leaves
// the pod running and its state in StateDir, and the next Run on the same
// StateDir and bootstrap takes it over (pod.Manager.Restore).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Bootstrap == nil {
		return errors.New("running cell agent: no bootstrap")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("cell", cfg.Bootstrap.CellID)
	// A pod gets a network namespace of its own only where the agent
	// runs in the cell's (an instance's, a local cell's): cell/podnet
	// works in the agent's. An agent given another one (--netns: a light
	// cell, one process for many cells) runs every pod there, at the
	// cell's address, and refuses a pod address (pod.ErrNoPodNetwork).
	ownPodNetwork := cfg.NetNSPath == ""
	if cfg.NetNSPath == "" {
		// The agent's own namespace, named by PID: runc would resolve
		// /proc/self in its own process.
		cfg.NetNSPath = fmt.Sprintf("/proc/%d/ns/net", os.Getpid())
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	var meta *imds.Client
	if cfg.IMDSEndpoint != "" {
		var err error
		if meta, err = imds.New(cfg.IMDSEndpoint); err != nil {
			return fmt.Errorf("running cell agent: %w", err)
		}
	}
	joinIdentity, err := instanceIdentity(cfg, meta)
	if err != nil {
		return fmt.Errorf("running cell agent: %w", err)
	}
	id, err := server.LoadIdentity(filepath.Join(cfg.StateDir, IdentityDir), cfg.Bootstrap, joinIdentity, log, server.WithClock(cfg.Now))
	if err != nil {
		return fmt.Errorf("running cell agent: %w", err)
	}
	if cfg.OOMScoreAdj != 0 {
		if err := runtime.SetOOMScoreAdj(0, cfg.OOMScoreAdj); err != nil {
			log.WarnContext(ctx, "the agent's OOM score is not adjusted: the OOM killer may choose it before the pod", "error", err)
		}
	}
	memoryCapacity, makePodCgroup := podCgroup(ctx, cfg, log)
	rt, noTmpfs, closeRuntime, err := containerRuntime(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeRuntime()
	proxy, podIPTables, noServices, err := serviceProxy(cfg, ownPodNetwork, log)
	if err != nil {
		return err
	}
	volumesDir := filepath.Join(cfg.StateDir, "volumes")
	etcDir := filepath.Join(cfg.StateDir, "etc")
	termDir := filepath.Join(cfg.StateDir, "termination")
	store := logs.NewStore(filepath.Join(cfg.StateDir, "logs"))
	mgr := pod.New(pod.Config{
		Runtime: rt, Logs: store, PodIP: cfg.PodIP, HostIP: cfg.PodIP,
		NetNSPath: cfg.NetNSPath, Network: podNetwork(cfg, ownPodNetwork, proxy, podIPTables, log), VolumesDir: volumesDir, NoTmpfs: noTmpfs, EtcDir: etcDir, TerminationDir: termDir, ResolvConf: cfg.ResolvConf,
		StatePath: filepath.Join(cfg.StateDir, StateFile), MemoryCapacity: memoryCapacity, MakePodCgroup: makePodCgroup, Backoff: cfg.Backoff, DiskWait: cfg.DiskWait, DiskPathRoot: cfg.DiskPathRoot, NFS: nfsMounter(cfg), Logger: log,
	})
	// An earlier agent of this cell (it died; its service manager started
	// this one) left its pod running: take it over. Otherwise whatever it
	// left goes.
	resumed, err := mgr.Restore(ctx, cfg.Bootstrap.PodUID)
	if err != nil {
		log.WarnContext(ctx, "not resuming the pod of an earlier agent", "error", err)
	}
	if !resumed {
		cleanup(ctx, rt, log, volumesDir, etcDir, termDir)
		if err := podnet.Teardown(ctx, filepath.Join(cfg.StateDir, PodNetDir)); err != nil {
			log.WarnContext(ctx, "removing the pod network of an earlier agent", "error", err)
		}
	}
	storageCtx, stopStorage := context.WithCancel(ctx)
	storageDone := make(chan struct{})
	go func() {
		defer close(storageDone)
		ephemeral.Watch(storageCtx, ephemeral.Config{
			Pod: mgr, LogDir: store.ContainerDir, EtcDir: etcDir, Interval: cfg.StorageInterval, Logger: log,
		})
	}()
	defer func() { stopStorage(); <-storageDone }()
	notices := watchNotices(ctx, meta, cfg, log)
	srv := server.New(server.Config{
		Pod: mgr, Logs: store, Services: proxy, NoServices: noServices,
		DiskDir: cfg.StateDir, EtcDir: etcDir, Notices: notices, Logger: log,
	})

	lis := cfg.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", cfg.ListenAddress()); err != nil {
			return fmt.Errorf("listening for the host: %w", err)
		}
	}
	namespace, _ := cfg.runtimeNamespace()
	log.InfoContext(ctx, "cell agent serving", "address", lis.Addr().String(), "namespace", namespace, "joined", id.Joined())
	if cfg.Ready != nil {
		cfg.Ready(lis.Addr())
	}
	serveErr := server.Serve(ctx, lis, id, srv)

	grace := cfg.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+30*time.Second)
	defer cancel()
	if err := mgr.Delete(dctx, &grace); err != nil {
		return errors.Join(serveErr, fmt.Errorf("stopping pod: %w", err))
	}
	if err := podnet.Teardown(dctx, filepath.Join(cfg.StateDir, PodNetDir)); err != nil {
		return errors.Join(serveErr, err)
	}
	return serveErr
}

// podCgroup plans the pod's cgroup (Config.CgroupParent, else the
// cell's own namespace's, which containerd's default puts the containers
// in): the cell's memory less the agent's reservation. It returns the
// cell's memory, which Burstable containers' OOM scores are reckoned
// against, and the function that makes the group with the pod's own
// limit when that is less (pod.Config.MakePodCgroup: before the pod's
// first container starts, once what an earlier agent left is cleaned up,
// since runtime.Containerd.Cleanup removes the namespace's group); nil
// without a group to make. A fake runtime runs no container: no group. A
// shared namespace without CgroupParent is no pod's own: the cell's
// memory is then the machine's, and no group is made.
func podCgroup(ctx context.Context, cfg Config, log *slog.Logger) (memoryCapacity int64, makeGroup func(podLimit int64) error) {
	if cfg.Runtime != nil {
		return 0, nil
	}
	group := cfg.CgroupParent
	if group == "" && cfg.SharedNamespace == "" {
		group = "/" + Namespace(cfg.Bootstrap.CellID)
	}
	agentMemory := cfg.AgentMemory
	if agentMemory == 0 {
		agentMemory = runtime.DefaultAgentMemory
	}
	if group == "" {
		total, err := runtime.MachineMemory()
		if err != nil {
			log.WarnContext(ctx, "the cell's memory is unknown", "error", err)
		}
		return total, nil
	}
	pc, err := runtime.PlanPodCgroup(group, agentMemory)
	if err != nil {
		log.WarnContext(ctx, "the cell's memory is unknown", "error", err)
		return 0, nil
	}
	return pc.CellMemory, func(podLimit int64) error {
		// Without write access to the cgroups the pod still runs.
		protected, err := pc.Make(podLimit)
		if err != nil {
			return fmt.Errorf("making the pod's cgroup %s: a pod that exhausts the cell's memory may take the agent's: %w", pc.Path, err)
		}
		log.InfoContext(ctx, "the pod's cgroup is limited", "cgroup", pc.Path, "cell_memory", pc.CellMemory,
			"cell_part", pc.Limit, "pod_limit", podLimit, "agent_memory_protected", protected)
		return nil
	}
}

// containerRuntime is the runtime the pod's containers run on:
// cfg.Runtime, or containerd's at cfg.ContainerdAddress; noTmpfs is why a
// tmpfs the agent mounts would not be seen by it (pod.Config.NoTmpfs),
// and closeRuntime releases it.
func containerRuntime(ctx context.Context, cfg Config, log *slog.Logger) (rt runtime.Runtime, noTmpfs error, closeRuntime func(), err error) {
	if cfg.Runtime != nil {
		return cfg.Runtime, nil, func() {}, nil
	}
	c, err := client.New(cfg.ContainerdAddress, client.WithTimeout(10*time.Second))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connecting to containerd at %s: %w", cfg.ContainerdAddress, err)
	}
	namespace, shareAs := cfg.runtimeNamespace()
	ctrd, err := runtime.NewContainerd(c, runtime.ContainerdConfig{
		Namespace:          namespace,
		Cell:               shareAs,
		StateDir:           cfg.StateDir,
		RuncRoot:           cfg.RuncRoot,
		InsecureRegistries: append(append([]string(nil), cfg.InsecureRegistries...), cfg.Bootstrap.InsecureRegistries...),
		CgroupParent:       cfg.CgroupParent,
		Logger:             log,
	})
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, fmt.Errorf("running cell agent: %w", err)
	}
	// Secrets go on a tmpfs only where containerd would see it.
	noTmpfs = runtime.MountsShared(ctx, cfg.ContainerdAddress)
	if noTmpfs != nil {
		log.WarnContext(ctx, "secret and projected volumes will be on disk: the container runtime would not see a tmpfs the agent mounts", "reason", noTmpfs)
	}
	return ctrd, noTmpfs, func() { _ = c.Close() }, nil
}

// cleanup removes what an earlier agent left that is not resumed: its
// containers, volumes, /etc files and termination messages.
func cleanup(ctx context.Context, rt runtime.Runtime, log *slog.Logger, volumesDir, etcDir, termDir string) {
	if err := rt.Cleanup(ctx); err != nil {
		log.WarnContext(ctx, "cleaning up left-overs of an earlier agent", "error", err)
	}
	if err := pod.RemoveVolumes(volumesDir); err != nil {
		log.WarnContext(ctx, "removing volumes of an earlier agent", "error", err)
	}
	if err := os.RemoveAll(etcDir); err != nil {
		log.WarnContext(ctx, "removing the /etc files of an earlier agent", "error", err)
	}
	if err := os.RemoveAll(termDir); err != nil {
		log.WarnContext(ctx, "removing the termination messages of an earlier agent", "error", err)
	}
}

// instanceIdentity is what the agent sends as its instance's identity
// when it joins: cfg.InstanceIdentity when set; else, with
// GCEMetadataEndpoint, the identity token of Compute Engine's metadata
// server for the cell's audience as the document, with no signature (the
// token carries its own); else EC2's signed identity document from meta;
// nil without any.
func instanceIdentity(cfg Config, meta *imds.Client) (server.InstanceIdentity, error) {
	switch {
	case cfg.InstanceIdentity != nil:
		return cfg.InstanceIdentity, nil
	case cfg.GCEMetadataEndpoint != "":
		gce, err := imds.NewGCE(cfg.GCEMetadataEndpoint)
		if err != nil {
			return nil, err
		}
		audience := identity.Audience(cfg.Bootstrap.ClusterID, cfg.Bootstrap.CellID)
		return func(ctx context.Context) ([]byte, []byte, error) {
			token, err := gce.IdentityToken(ctx, audience)
			return token, nil, err
		}, nil
	case meta != nil:
		return meta.IdentityDocument, nil
	}
	return nil, nil
}

// watchNotices starts reading the cloud's notices from the instance
// metadata meta, in the background until ctx ends, and returns where they
// go; nil when the cell has no metadata to read (meta nil).
func watchNotices(ctx context.Context, meta *imds.Client, cfg Config, log *slog.Logger) *server.Notices {
	if meta == nil {
		return nil
	}
	notices := server.NewNotices()
	go server.WatchInstanceMetadata(ctx, meta, cfg.NoticeInterval, notices, log.With("imds", cfg.IMDSEndpoint))
	return notices
}

// serviceProxy is what programs the ClusterIP services the host sends
// into the pod's network namespace, or nil and why the cell programs
// none. A cell without iptables still runs its pod: it says so in its log
// and to the host. Where the pod may have a namespace of its own
// (ownPodNetwork), the proxy holds the table until podNetwork knows the
// namespace and points podIPTables, checked here in the cell's, at it.
func serviceProxy(cfg Config, ownPodNetwork bool, log *slog.Logger) (proxy *clusterip.Proxy, podIPTables *clusterip.IPTables, why string, err error) {
	switch cfg.ServiceProxy {
	case "", ServiceProxyIPTables:
		if cfg.ServicePrograms != nil {
			return clusterip.New(cfg.ServicePrograms), nil, "", nil
		}
		ipt, err := clusterip.NewIPTables(cfg.NetNSPath, log)
		if err != nil {
			log.Warn("ClusterIP services will not be reachable from this cell", "error", err)
			return nil, nil, err.Error(), nil
		}
		if !ownPodNetwork {
			return clusterip.New(ipt), nil, "", nil
		}
		return clusterip.New(nil), ipt, "", nil
	case ServiceProxyNone:
		return nil, nil, "the cell agent runs with --service-proxy=none", nil
	}
	return nil, nil, "", fmt.Errorf("running cell agent: unknown service proxy %q (want %s or %s)", cfg.ServiceProxy, ServiceProxyIPTables, ServiceProxyNone)
}

// podNetwork is the pod manager's Network (pod.Config.Network), nil
// unless the pod may have a namespace of its own (own: the agent runs in
// the cell's). Given the pod's own address it makes the pod its own
// namespace (cell/podnet, pinned under PodNetDir), else the pod joins the
// agent's (NetNSPath); then, with ipt (serviceProxy's podIPTables: the
// proxy programs iptables, not counts services), the ClusterIP services
// are programmed into the namespace the pod joins. A failure to program
// them does not keep the pod from starting: the host's next
// ApplyServices tries again, as before the pod had a namespace of its
// own.
func podNetwork(cfg Config, own bool, proxy *clusterip.Proxy, ipt *clusterip.IPTables, log *slog.Logger) func(ctx context.Context, address string) (string, error) {
	if !own {
		return nil
	}
	return func(ctx context.Context, address string) (string, error) {
		path := cfg.NetNSPath
		if address != "" {
			addr, err := netip.ParseAddr(address)
			if err != nil {
				return "", fmt.Errorf("setting up the pod's network: its address from the host: %w", err)
			}
			if path, err = podnet.Setup(ctx, filepath.Join(cfg.StateDir, PodNetDir), addr, podnet.Options{Metadata: cfg.PodMetadata}); err != nil {
				return "", err
			}
		}
		if ipt != nil {
			if err := proxy.SetProgrammer(ctx, ipt.In(path)); err != nil {
				log.WarnContext(ctx, "programming the ClusterIP services into the pod's network", "error", err)
			}
		}
		return path, nil
	}
}
