// Command kip-cell is the cell agent: it runs the pod bound to its cell
// through containerd and serves the kip host over mutual TLS (see package
// github.com/kipcell/kip/cell).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"

	containerdlog "github.com/containerd/log"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/api"
)

// version is set at build time (make build, make dist, make images:
// -X main.version=...).
var version = "dev"

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		cfg       cell.Config
		bootstrap string
		insecure  listFlag
		debug     bool
		showVer   bool
	)
	flag.StringVar(&bootstrap, "bootstrap", os.Getenv(api.BootstrapEnv), "bootstrap file: the bootstrap JSON, or cloud user data holding it as a MIME part (default $"+api.BootstrapEnv+")")
	flag.StringVar(&cfg.ContainerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd socket")
	flag.StringVar(&cfg.NetNSPath, "netns", "", "network namespace the containers join (default: the agent's own)")
	flag.StringVar(&cfg.StateDir, "state-dir", os.Getenv("KIP_CELL_STATE_DIR"), "directory for logs, FIFOs, volumes, the pod's state and the agent's key and certificate (identity/, 0700), which an agent started again on it resumes without a join (default $KIP_CELL_STATE_DIR, else /var/lib/kip-cell/<cell ID>)")
	flag.StringVar(&cfg.PodIP, "pod-ip", os.Getenv("KIP_CELL_ADDRESS"), "pod IP to report (default $KIP_CELL_ADDRESS)")
	flag.StringVar(&cfg.Listen, "listen", "", "gRPC listen address (default: the bootstrap's, else pod-ip:6421)")
	flag.StringVar(&cfg.RuncRoot, "runc-root", "", "runc state directory (default: containerd's)")
	flag.StringVar(&cfg.ResolvConf, "resolv-conf", "/etc/resolv.conf", "the cell's resolver configuration, which pods with dnsPolicy Default get (empty: the local resolver, 127.0.0.1)")
	flag.Var(&insecure, "insecure-registry", "registry host[:port] to pull from over plain HTTP (repeatable; loopback always is)")
	flag.StringVar(&cfg.ServiceProxy, "service-proxy", envOr("KIP_CELL_SERVICE_PROXY", cell.ServiceProxyIPTables),
		"how ClusterIP services are programmed in the pod's network namespace: iptables, or none when the agent shares the machine's (default $KIP_CELL_SERVICE_PROXY, else iptables)")
	flag.StringVar(&cfg.IMDSEndpoint, "imds-endpoint", envOr("KIP_CELL_IMDS_ENDPOINT", cell.DefaultIMDSEndpoint),
		"the instance metadata service whose spot interruption notices and rebalance recommendations the agent reports (http://host or unix:///socket); none or empty: no instance metadata (default $KIP_CELL_IMDS_ENDPOINT, else EC2's)")
	flag.StringVar(&cfg.GCEMetadataEndpoint, "gce-metadata-endpoint", os.Getenv("KIP_CELL_GCE_METADATA_ENDPOINT"),
		"Compute Engine's metadata server, whose identity token of the instance the agent sends when it joins, instead of EC2's identity document (http://metadata.google.internal, or unix:///socket); none or empty: none (default $KIP_CELL_GCE_METADATA_ENDPOINT)")
	flag.BoolVar(&debug, "debug", false, "log at debug level")
	flag.BoolVar(&showVer, "version", false, "print the version and exit")
	flag.Parse()
	if showVer {
		fmt.Printf("kip-cell %s (%s %s/%s)\n", version, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
		return
	}
	cfg.InsecureRegistries = insecure
	if cfg.IMDSEndpoint == "none" {
		cfg.IMDSEndpoint = ""
	}
	if cfg.GCEMetadataEndpoint == "none" {
		cfg.GCEMetadataEndpoint = ""
	}

	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	_ = containerdlog.SetLevel("warn")

	if err := run(cfg, bootstrap); err != nil {
		cfg.Logger.Error("kip-cell failed", "error", err)
		os.Exit(1)
	}
}

func run(cfg cell.Config, bootstrapPath string) error {
	if bootstrapPath == "" {
		return fmt.Errorf("no bootstrap: set --bootstrap or $%s", api.BootstrapEnv)
	}
	b, err := readBootstrap(bootstrapPath)
	if err != nil {
		return err
	}
	cfg.Bootstrap = b
	if cfg.StateDir == "" {
		// One machine may hold several cells (the local plugin): keep
		// each cell's logs apart.
		cfg.StateDir = filepath.Join("/var/lib/kip-cell", b.CellID)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return cell.Run(ctx, cfg)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
