// Command kip-demo runs what make demo shows, on a control plane that
// kip-cluster already started: a private containerd and a local registry
// holding the demo image, kip with the local plugin (as the node's own
// identity), and deploy/examples/hello.yaml. It writes a ready file once
// the workload is applied, and stays in the foreground until SIGTERM,
// when it deletes the workload (so every cell ends) and stops everything.
//
//	kip-demo --state DIR --bin DIR --ready FILE
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	bin := flag.String("bin", "bin", "directory holding kip, kip-cell and kip-plugin-local")
	ready := flag.String("ready", "", "file to write once the demo runs")
	manifest := flag.String("manifest", "deploy/examples/hello.yaml", "the workload")
	flag.Parse()
	if err := run(*state, *bin, *ready, *manifest); err != nil {
		fmt.Fprintln(os.Stderr, "kip-demo:", err)
		os.Exit(1)
	}
}

func run(state, bin, ready, manifest string) error {
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
	cells, err := framework.StartCells(ctx)
	if err != nil {
		return fmt.Errorf("starting containerd and the registry: %w", err)
	}
	defer cells.Stop()
	kip, err := fw.StartKip(ctx, cells, framework.KipOptions{NodeName: "kip", BinDir: bin, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer kip.Stop()

	data, err := os.ReadFile(manifest)
	if err != nil {
		return fmt.Errorf("reading %s: %w", manifest, err)
	}
	workload := strings.ReplaceAll(string(data), "${KIP_DEMO_REGISTRY}", cells.Registry.Host())
	kubectl := func(stdin string, args ...string) error {
		cmd := exec.Command(filepath.Join(cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := kubectl(workload, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying %s: %w", manifest, err)
	}
	info := fmt.Sprintf("kip log: %s\nregistry: %s\n", kip.LogPath, cells.Registry.Host())
	if err := os.WriteFile(ready, []byte(info), 0o600); err != nil {
		return fmt.Errorf("writing ready file: %w", err)
	}
	<-ctx.Done()

	// Delete the workload while kip still runs, so that it ends every cell.
	fmt.Fprintln(os.Stderr, "kip-demo: deleting the workload and waiting for its cells to end")
	_ = kubectl(workload, "delete", "-f", "-", "--wait=true", "--timeout=60s")
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

func countDirs(entries []os.DirEntry) int {
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}
