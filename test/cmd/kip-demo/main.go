// Command kip-demo runs what make demo shows, on a control plane that
// kip-cluster already started: a private containerd and a local registry
// holding the demo image, kip with the local plugin (as the node's own
// identity), a real kubelet node, kip-infra (test/kubeletnode), for the
// cluster's own add-ons: the cluster DNS (deploy/coredns, when
// framework.ClusterDNS is on) and metrics-server (deploy/metrics-server:
// kubectl top, the HorizontalPodAutoscaler); and
// deploy/examples/hello.yaml on the Kip node. For persistent volumes
// (volumes.go) it applies the StorageClass kip-local, runs
// kip-local-provisioner on the local plugin's state directory and, when
// kip reports volume support, applies the StatefulSet example
// (deploy/examples/statefulset.yaml). kip starts beside the kubelet node
// and its add-ons (start.go). It writes a ready file once the workload is
// applied, and stays in the foreground until SIGTERM, when it deletes the
// workload (so every cell ends), the StatefulSet example and its claims
// (so that the provisioner deletes their disks), metrics-server and the
// DNS, and stops everything.
//
// What it prints: one line per step on stdout (starting containerd and
// the registry, kip, the kubelet node, deploying CoreDNS and
// metrics-server, applying the workload), with a line for each build from
// source that a first run makes, about how long it takes, and its end
// (controlplane.Progress); everything else, the Go tool's output among it,
// on stderr, where each step also has the seconds since kip-demo started.
// hack/demo.sh shows the first on the screen and keeps the second in
// demo.log.
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
//	kip-demo --state DIR [--dir DIR] --bin DIR --ready FILE [--manifest FILE] [--storage-class FILE] [--statefulset FILE] [--insecure-registry HOST:PORT]... [--untainted]
//	kip-demo --resolve
//
// kip-demo --resolve only downloads and resolves the Go modules of what
// kip-demo builds (start.go's resolveAddons), then exits.
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

	"github.com/kipcell/kip/plugins/local"
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
	statefulSet := flag.String("statefulset", "deploy/examples/statefulset.yaml", "the StatefulSet whose pods keep a disk of class kip-local")
	var node nodeOptions
	flag.Func("insecure-registry", "another plain-HTTP registry cells may pull from, HOST:PORT or :PORT on the cells' bridge (repeatable)",
		func(s string) error { node.insecureRegistries = append(node.insecureRegistries, s); return nil })
	flag.BoolVar(&node.untainted, "untainted", false, "register the node with no taint")
	resolve := flag.Bool("resolve", false, "only download and resolve the Go modules of CoreDNS, metrics-server and the kubelet node, then exit")
	flag.Parse()
	if *resolve {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := resolveAddons(ctx, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "kip-demo --resolve:", err)
			os.Exit(1)
		}
		return
	}
	if *dir == "" && *state != "" {
		*dir = filepath.Join(*state, "demo")
	}
	if err := run(*state, *dir, *bin, *ready, demoManifests{*manifest, *storageClass, *statefulSet}, node); err != nil {
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

// demoManifests are the files kip-demo applies: the workload, the
// StorageClass kip-local and the StatefulSet notes.
type demoManifests struct {
	workload, storageClass, statefulSet string
}

func run(state, dir, bin, ready string, files demoManifests, node nodeOptions) error {
	manifest, storageClass, statefulSet := files.workload, files.storageClass, files.statefulSet
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
	st := newSteps(os.Stdout, os.Stderr, time.Now)
	st.announce("starting containerd and the demo's registry")
	cells, err := startCells(ctx, dir)
	if err != nil {
		return err
	}
	defer cells.Stop()
	if err := setKipEnv(node, cells.Registry.Host(), cells.Gateway); err != nil {
		return err
	}
	// kip starts beside the kubelet node and its add-ons: neither needs
	// the other, and the add-ons' node, about 4 s warm, is the longer. The
	// first to fail ends the other's start (what runs is not bound to
	// the context: the processes run on until stopped below).
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	kipc := make(chan startedKip, 1)
	go func() {
		k := startKip(startCtx, fw, st, cells, bin, dir, cluster.Kubeconfig, log)
		if k.err != nil {
			cancelStart()
		}
		kipc <- k
	}()
	add, addErr := startAddons(startCtx, fw, st, cluster, cells, log)
	if addErr != nil {
		cancelStart()
	}
	k := <-kipc
	if k.kip != nil {
		defer k.kip.Stop()
	}
	if k.prov != nil {
		defer k.prov.Stop()
	}
	if add.infra != nil {
		defer func() {
			if err := add.infra.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	if err := errors.Join(k.err, addErr); err != nil {
		return err
	}
	kip := k.kip

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
	// The cluster DNS was applied first (startAddons), so that the
	// workload's pods find it.
	st.announce("applying " + manifest + " and the StorageClass kip-local")
	if err := kubectl(workload, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying %s: %w", manifest, err)
	}
	if err := kubectl("", "apply", "-f", storageClass); err != nil {
		return fmt.Errorf("applying %s: %w", storageClass, err)
	}
	if volumeSupport(ctx, fw.Client, kip.NodeName, 10*time.Second) {
		notes, err := os.ReadFile(statefulSet)
		if err != nil {
			return fmt.Errorf("reading %s: %w", statefulSet, err)
		}
		st.announce("applying " + statefulSet + ": the StatefulSet notes, a disk of class kip-local for each pod")
		if err := kubectl(strings.ReplaceAll(string(notes), framework.RegistryVar, cells.Registry.Host()), "apply", "-f", "-"); err != nil {
			return fmt.Errorf("applying %s: %w", statefulSet, err)
		}
	} else {
		st.logf("kip does not report volume support (CSINode %s lists no driver %s): no StatefulSet notes", kip.NodeName, local.VolumeDriver)
	}
	info := fmt.Sprintf("kip log: %s\nregistry: %s\nprovisioner log: %s\n", kip.LogPath, cells.Registry.Host(), filepath.Join(dir, "provisioner.log"))
	if err := os.WriteFile(ready, []byte(info), 0o600); err != nil {
		return fmt.Errorf("writing ready file: %w", err)
	}
	st.logf("ready")
	<-ctx.Done()

	stopDemo(fw, kubectl, workload, storageClass, add, kip.StateDir)
	return nil
}

// stopDemo deletes the workload while kip still runs, so that it ends
// every cell, and the StatefulSet example's claims while the provisioner
// runs, so that it deletes their disks; then the add-ons, and waits for
// the cells to end.
func stopDemo(fw *framework.Framework, kubectl func(stdin string, args ...string) error, workload, storageClass string, add addons, kipStateDir string) {
	fmt.Fprintln(os.Stderr, "deleting the workload and waiting for its cells to end")
	if err := deleteNotes(context.Background(), fw.Client, 90*time.Second); err != nil { // ctx has ended
		fmt.Fprintln(os.Stderr, err)
	}
	_ = kubectl("", "delete", "-f", storageClass, "--ignore-not-found")
	_ = kubectl(workload, "delete", "-f", "-", "--wait=true", "--timeout=60s")
	if err := add.ms.Delete(context.Background(), fw); err != nil { // ctx has ended
		fmt.Fprintln(os.Stderr, err)
	}
	if add.dns != nil {
		if err := add.dns.Delete(context.Background(), fw); err != nil { // ctx has ended
			fmt.Fprintln(os.Stderr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(filepath.Join(kipStateDir, "cells"))
		if countDirs(entries) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
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
