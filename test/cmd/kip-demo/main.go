// Command kip-demo runs what make demo shows, on a control plane that
// kip-cluster already started: a private containerd and a local registry
// holding the demo image, kip with the local plugin (as the node's own
// identity), a real kubelet node, kip-infra (test/kubeletnode), for the
// cluster's own add-ons: the cluster DNS (deploy/coredns, when
// framework.ClusterDNS is on) and metrics-server (deploy/metrics-server:
// kubectl top, the HorizontalPodAutoscaler); and
// deploy/examples/hello.yaml on the Kip node. For persistent volumes
// (volumes.go) it applies the StorageClass kip-local and runs
// kip-local-provisioner on the local plugin's state directory;
// hack/demo.sh applies the StatefulSet example when kip reports volume
// support. It writes a ready file once the workload is applied, and stays
// in the foreground until SIGTERM, when it deletes the workload (so every
// cell ends), the StatefulSet example and its claims (so that the
// provisioner deletes their disks), metrics-server and the DNS, and stops
// everything.
//
// What it prints: one line per step on stdout (starting containerd and
// the registry, kip, the kubelet node, deploying CoreDNS and
// metrics-server, applying the workload), with a line for each build from
// source that a first run makes, about how long it takes, and its end
// (controlplane.Progress); everything else, the Go tool's output among it,
// on stderr. hack/demo.sh shows the first on the screen and keeps the
// second in demo.log.
//
// Everything it keeps lives in the demo's directory (--dir, by default
// demo/ in kip-cluster's state directory): kip/ (kip.yaml, kip.log, the
// local plugin's cells and disks), provisioner.log, containerd/, and
// cells.json, which holds the cells' bridge, subnet and registry port so
// that the next run advertises the registry at the same address and the
// workload stays the same object.
//
// Two options make the node one that another test suite can use (the
// upstream conformance suite, docs/conformance.md), both passed to kip as
// KIP_* variables, which override what the framework writes in kip.yaml:
//
//   - --insecure-registry HOST:PORT (repeatable) adds a plain-HTTP
//     registry that cells may pull from, beside the demo's own; ":PORT"
//     means the cells' bridge address (the gateway, where the demo's
//     registry is too) at that port, for a registry started after the
//     demo on the bridge;
//   - --untainted registers the node with no taint (node.taint ""), so that
//     pods with no toleration are scheduled to it.
//
// hack/demo.sh passes $KIP_DEMO_FLAGS on to kip-demo, so that
//
//	KIP_DEMO_FLAGS='--insecure-registry :5055 --untainted' make demo
//
// starts such a node. The usage:
//
//	kip-demo --state DIR [--dir DIR] --bin DIR --ready FILE [--manifest FILE] [--storage-class FILE] [--insecure-registry HOST:PORT]... [--untainted]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/e2e/framework"
)

func main() {
	state := flag.String("state", "", "kip-cluster's state directory")
	dir := flag.String("dir", "", "the demo's own directory (default: demo/ in the state directory)")
	bin := flag.String("bin", "bin", "directory holding kip, kip-cell and kip-plugin-local")
	ready := flag.String("ready", "", "file to write once the demo runs")
	manifest := flag.String("manifest", "deploy/examples/hello.yaml", "the workload")
	storageClass := flag.String("storage-class", "deploy/examples/storageclass-kip-local.yaml", "the local plugin's StorageClass")
	var node nodeOptions
	flag.Func("insecure-registry", "another plain-HTTP registry cells may pull from, HOST:PORT or :PORT on the cells' bridge (repeatable)",
		func(s string) error { node.insecureRegistries = append(node.insecureRegistries, s); return nil })
	flag.BoolVar(&node.untainted, "untainted", false, "register the node with no taint")
	flag.Parse()
	if *dir == "" && *state != "" {
		*dir = filepath.Join(*state, "demo")
	}
	if err := run(*state, *dir, *bin, *ready, *manifest, *storageClass, node); err != nil {
		fmt.Fprintln(os.Stderr, "kip-demo:", err)
		os.Exit(1)
	}
}

// setKipEnv sets the environment kip is started with: the node's options
// (kipEnv) and its zone, the local plugin's (volumes.go), for the
// kip-local class's topology.
func setKipEnv(node nodeOptions, registry, gateway string) error {
	env, err := node.kipEnv(registry, gateway)
	if err != nil {
		return err
	}
	for _, kv := range append(env, "KIP_NODE_ZONE="+localZone) {
		name, value, _ := strings.Cut(kv, "=")
		if err := os.Setenv(name, value); err != nil {
			return fmt.Errorf("setting %s for kip: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "kip runs with %s\n", kv)
	}
	return nil
}

func run(state, dir, bin, ready, manifest, storageClass string, node nodeOptions) error {
	if state == "" || ready == "" {
		return errors.New("usage: kip-demo --state DIR --bin DIR --ready FILE")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cluster, err := controlplane.Load(state)
	if err != nil {
		return err
	}
	fw, err := framework.FromCluster(cluster)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the demo's directory: %w", err)
	}
	// log is stderr, with each cold build announced on stdout.
	log := controlplane.Progress(os.Stdout, os.Stderr)
	step("starting containerd and the demo's registry")
	cells, err := startCells(ctx, dir)
	if err != nil {
		return err
	}
	defer cells.Stop()
	if err := setKipEnv(node, cells.Registry.Host(), cells.Gateway); err != nil {
		return err
	}
	step("starting kip with the local plugin, as node kip")
	kip, err := fw.StartKip(ctx, cells, framework.KipOptions{
		NodeName: "kip", ClusterID: "kip-demo", BinDir: bin, Dir: filepath.Join(dir, "kip"), Log: log,
	})
	if err != nil {
		return err
	}
	defer kip.Stop()
	// The local plugin's disks for claims of class kip-local, made in
	// kip's local plugin's state directory.
	prov, err := startProvisioner(bin, kip.StateDir, cluster.Kubeconfig, filepath.Join(dir, "provisioner.log"))
	if err != nil {
		return err
	}
	defer prov.Stop()

	data, err := os.ReadFile(manifest)
	if err != nil {
		return fmt.Errorf("reading %s: %w", manifest, err)
	}
	workload := strings.ReplaceAll(string(data), framework.RegistryVar, cells.Registry.Host())
	kubectl := func(stdin string, args ...string) error {
		cmd := exec.Command(filepath.Join(cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	// The cluster's own add-ons run where they run in a real cluster: on
	// a kubelet node, kip-infra, pinned there (an --untainted Kip node
	// would otherwise be a candidate too).
	step("starting the kubelet node kip-infra, for the cluster's add-ons")
	infra, err := framework.StartInfraNode(ctx, cluster, cells, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := infra.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	onInfra := framework.Placement{Node: infra.Name}
	// The cluster DNS first, so that the workload's pods find it.
	var dns *framework.DNS
	if framework.ClusterDNS() {
		step("deploying CoreDNS, the cluster DNS, on kip-infra")
		if dns, err = fw.ApplyDNS(ctx, cells, framework.DNSOptions{Placement: onInfra, Log: log}); err != nil {
			return err
		}
	}
	// metrics-server, behind kubectl top and the HorizontalPodAutoscaler.
	step("deploying metrics-server, behind kubectl top, on kip-infra")
	ms, err := fw.ApplyMetricsServer(ctx, cells, onInfra, log)
	if err != nil {
		return err
	}
	step("applying " + manifest + " and the StorageClass kip-local")
	if err := kubectl(workload, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying %s: %w", manifest, err)
	}
	if err := kubectl("", "apply", "-f", storageClass); err != nil {
		return fmt.Errorf("applying %s: %w", storageClass, err)
	}
	info := fmt.Sprintf("kip log: %s\nregistry: %s\nprovisioner log: %s\n", kip.LogPath, cells.Registry.Host(), filepath.Join(dir, "provisioner.log"))
	if err := os.WriteFile(ready, []byte(info), 0o600); err != nil {
		return fmt.Errorf("writing ready file: %w", err)
	}
	<-ctx.Done()

	// Delete the workload while kip still runs, so that it ends every cell,
	// and the StatefulSet example's claims while the provisioner runs, so
	// that it deletes their disks.
	fmt.Fprintln(os.Stderr, "deleting the workload and waiting for its cells to end")
	if err := deleteNotes(context.Background(), fw.Client, 90*time.Second); err != nil { // ctx has ended
		fmt.Fprintln(os.Stderr, err)
	}
	_ = kubectl("", "delete", "-f", storageClass, "--ignore-not-found")
	_ = kubectl(workload, "delete", "-f", "-", "--wait=true", "--timeout=60s")
	if err := ms.Delete(context.Background(), fw); err != nil { // ctx has ended
		fmt.Fprintln(os.Stderr, err)
	}
	if dns != nil {
		if err := dns.Delete(context.Background(), fw); err != nil { // ctx has ended
			fmt.Fprintln(os.Stderr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(filepath.Join(kip.StateDir, "cells"))
		if countDirs(entries) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// step announces the next step on stdout, and in the log on stderr.
func step(what string) {
	fmt.Println(what)
	fmt.Fprintln(os.Stderr, "kip-demo:", what)
}

// nodeOptions are what kip-demo changes in kip's configuration.
type nodeOptions struct {
	insecureRegistries []string // HOST:PORT, or :PORT on the cells' gateway
	untainted          bool
}

// kipEnv returns the KIP_* variables ("NAME=value") that give kip the
// options: cells.insecureRegistries is the demo's registry (registry,
// HOST:PORT) and the extra ones, a ":PORT" one on gateway; node.taint is
// empty when untainted. No options, no variables: kip.yaml stays as the
// framework writes it.
func (o nodeOptions) kipEnv(registry, gateway string) ([]string, error) {
	var env []string
	if len(o.insecureRegistries) > 0 {
		hosts := []string{registry}
		for _, r := range o.insecureRegistries {
			host, port, err := net.SplitHostPort(r)
			if err != nil || port == "" {
				return nil, fmt.Errorf("reading --insecure-registry %q: want HOST:PORT or :PORT", r)
			}
			if host == "" {
				host = gateway
			}
			hosts = append(hosts, net.JoinHostPort(host, port))
		}
		env = append(env, "KIP_CELLS_INSECURE_REGISTRIES="+strings.Join(hosts, ","))
	}
	if o.untainted {
		env = append(env, "KIP_NODE_TAINT=")
	}
	return env, nil
}

// cellsFile remembers the choices of the demo's first run.
const cellsFile = "cells.json"

// startCells starts containerd and the registry with the bridge, subnet
// and registry port of the previous run (the first run picks them and
// writes them down), so that the registry's address, and with it the
// workload's image names, are the same in every run.
func startCells(ctx context.Context, dir string) (*framework.Cells, error) {
	var opts framework.CellsOptions
	path := filepath.Join(dir, cellsFile)
	switch data, err := os.ReadFile(path); {
	case err == nil:
		if err := json.Unmarshal(data, &opts); err != nil {
			fmt.Fprintf(os.Stderr, "ignoring %s (%v): choosing a new bridge and registry port\n", path, err)
			opts = framework.CellsOptions{}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	opts.ContainerdDir = filepath.Join(dir, "containerd")
	if socket := filepath.Join(opts.ContainerdDir, "containerd.sock"); len(socket) > 107 {
		fmt.Fprintf(os.Stderr, "%s is too long for a Unix socket: containerd runs in a directory under /tmp\n", socket)
		opts.ContainerdDir = ""
	}
	cells, err := framework.StartCellsWith(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting containerd and the registry: %w", err)
	}
	if cells.RegistryPort != opts.RegistryPort && opts.RegistryPort != 0 {
		fmt.Fprintf(os.Stderr, "registry port %d is taken: the registry moved to port %d, so the workload's image names change\n",
			opts.RegistryPort, cells.RegistryPort)
	}
	data, err := json.MarshalIndent(framework.CellsOptions{Bridge: cells.Bridge, Subnet: cells.Subnet, RegistryPort: cells.RegistryPort}, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(data, '\n'), 0o600)
	}
	if err != nil {
		cells.Stop()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return cells, nil
}

func countDirs(entries []os.DirEntry) int {
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}
