package cell

import (
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kipcell/kip/cell/api"
)

// Flags is kip-cell's command line: the agent's Config, the bootstrap
// file and the log level. The light cells of test/lightcell take the same
// flags, so that either is the local plugin's agent command.
type Flags struct {
	Config    Config
	Bootstrap string
	Debug     bool
	insecure  listFlag
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// Register defines the flags on fs, their defaults read from the
// environment through getenv (os.Getenv for the process's own).
func (f *Flags) Register(fs *flag.FlagSet, getenv func(string) string) {
	cfg := &f.Config
	envOr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&f.Bootstrap, "bootstrap", getenv(api.BootstrapEnv), "bootstrap file: the bootstrap JSON, or cloud user data holding it as a MIME part (default $"+api.BootstrapEnv+")")
	fs.StringVar(&cfg.ContainerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd socket")
	fs.StringVar(&cfg.NetNSPath, "netns", "", "network namespace the containers join (default: the agent's own)")
	fs.StringVar(&cfg.StateDir, "state-dir", getenv("KIP_CELL_STATE_DIR"), "directory for logs, FIFOs, volumes, the pod's state and the agent's key and certificate (identity/, 0700), which an agent started again on it resumes without a join (default $KIP_CELL_STATE_DIR, else /var/lib/kip-cell/<cell ID>)")
	fs.StringVar(&cfg.PodIP, "pod-ip", getenv("KIP_CELL_ADDRESS"), "pod IP to report (default $KIP_CELL_ADDRESS)")
	fs.StringVar(&cfg.Listen, "listen", "", "gRPC listen address (default: the bootstrap's, else pod-ip:6421)")
	fs.StringVar(&cfg.RuncRoot, "runc-root", "", "runc state directory (default: containerd's)")
	fs.StringVar(&cfg.SharedNamespace, "shared-namespace", getenv("KIP_CELL_SHARED_NAMESPACE"),
		"containerd namespace shared with the other cells of this machine, where images are pulled and unpacked once for all (default $KIP_CELL_SHARED_NAMESPACE; empty: the cell's own, kip-<cell ID>)")
	fs.StringVar(&cfg.CgroupParent, "cgroup-parent", getenv("KIP_CELL_CGROUP_PARENT"),
		"the pod's cgroup (from the hierarchy's root, /kip/<cell ID>/pod), which the agent makes, limits to the cell's memory (its parent's limit, else the machine's) less --agent-memory-mib, and makes the containers' cgroups in (default $KIP_CELL_CGROUP_PARENT; empty: /kip-<cell ID>, containerd's parent of the cell's containers)")
	fs.Func("agent-memory-mib", "memory in MiB the pod's cgroup leaves the agent, at most half the cell's (default 64)", func(v string) error {
		mib, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mib <= 0 {
			return fmt.Errorf("not a positive number of MiB: %q", v)
		}
		cfg.AgentMemory = mib << 20
		return nil
	})
	fs.IntVar(&cfg.OOMScoreAdj, "oom-score-adj", DefaultOOMScoreAdj,
		"the agent's OOM score adjustment, -1000 to 1000 (0: left as started): lower than any container's (-997 at least), so that the kernel's OOM killer chooses the pod's processes first")
	fs.StringVar(&cfg.ResolvConf, "resolv-conf", "/etc/resolv.conf", "the cell's resolver configuration, which pods with dnsPolicy Default get (empty: the local resolver, 127.0.0.1)")
	fs.Var(&f.insecure, "insecure-registry", "registry host[:port] to pull from over plain HTTP (repeatable; loopback always is)")
	fs.StringVar(&cfg.ServiceProxy, "service-proxy", envOr("KIP_CELL_SERVICE_PROXY", ServiceProxyIPTables),
		"how ClusterIP services are programmed in the pod's network namespace: iptables, or none when the agent shares the machine's (default $KIP_CELL_SERVICE_PROXY, else iptables)")
	fs.StringVar(&cfg.IMDSEndpoint, "imds-endpoint", envOr("KIP_CELL_IMDS_ENDPOINT", DefaultIMDSEndpoint),
		"the instance metadata service whose spot interruption notices and rebalance recommendations the agent reports (http://host or unix:///socket); none or empty: no instance metadata (default $KIP_CELL_IMDS_ENDPOINT, else EC2's)")
	fs.StringVar(&cfg.GCEMetadataEndpoint, "gce-metadata-endpoint", getenv("KIP_CELL_GCE_METADATA_ENDPOINT"),
		"Compute Engine's metadata server, whose identity token of the instance the agent sends when it joins, instead of EC2's identity document (http://metadata.google.internal, or unix:///socket); none or empty: none (default $KIP_CELL_GCE_METADATA_ENDPOINT)")
	fs.BoolVar(&cfg.PodMetadata, "pod-metadata", getenv("KIP_CELL_POD_METADATA") == "1",
		"let a pod in a network namespace of its own reach the instance metadata at 169.254.169.254 and its credentials (default $KIP_CELL_POD_METADATA=1; off: dropped)")
	fs.StringVar(&cfg.DiskPathRoot, "disk-path-root", "",
		"for the cloud simulators' cells, which share one machine's /dev: a directory standing in for the instance's root where udev makes the disks' device links, under which (and only there) the agent looks up an attached disk's path; its links lead to the devices (empty: the path as it is)")
	fs.BoolVar(&f.Debug, "debug", false, "log at debug level")
}

// DefaultOOMScoreAdj is kip-cell's OOM score adjustment: below a
// Guaranteed container's (-997), above the kubelet's (-999).
const DefaultOOMScoreAdj = -998

// DefaultStateRoot holds a cell's state directory when neither
// --state-dir nor $KIP_CELL_STATE_DIR names one: <root>/<cell ID>.
const DefaultStateRoot = "/var/lib/kip-cell"

// Load is the agent's Config the parsed flags give: the bootstrap read
// (ReadBootstrap), the state directory by default under DefaultStateRoot,
// "none" endpoints cleared. Logger and the rest are the caller's.
func (f *Flags) Load() (Config, error) {
	cfg := f.Config
	if f.Bootstrap == "" {
		return Config{}, fmt.Errorf("no bootstrap: set --bootstrap or $%s", api.BootstrapEnv)
	}
	b, err := ReadBootstrap(f.Bootstrap)
	if err != nil {
		return Config{}, err
	}
	cfg.Bootstrap = b
	if cfg.StateDir == "" {
		// One machine may hold several cells (the local plugin): keep
		// each cell's logs apart.
		cfg.StateDir = filepath.Join(DefaultStateRoot, b.CellID)
	}
	if cfg.OOMScoreAdj < -1000 || cfg.OOMScoreAdj > 1000 {
		return Config{}, fmt.Errorf("--oom-score-adj %d is not within -1000 and 1000", cfg.OOMScoreAdj)
	}
	cfg.InsecureRegistries = append([]string(nil), f.insecure...)
	if cfg.IMDSEndpoint == "none" {
		cfg.IMDSEndpoint = ""
	}
	if cfg.GCEMetadataEndpoint == "none" {
		cfg.GCEMetadataEndpoint = ""
	}
	return cfg, nil
}
