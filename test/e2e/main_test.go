//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kipcell/kip/test/e2e/framework"
)

var (
	// f is the run's shared control plane.
	f *framework.Framework
	// cells and kip are the run's shared node "kip": a real kip process
	// with the local plugin (or the aws plugin against the EC2 simulator),
	// kip-cell agents and containerd.
	cells *framework.Cells
	kip   *framework.Kip
	// clusterDNS is CoreDNS as the cluster DNS (kube-system/kube-dns) on
	// the kubelet node (f.InfraNode) when framework.ClusterDNSFor the
	// pass;
	// nil otherwise.
	clusterDNS *framework.DNS
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	// The pass (KIP_E2E_PLUGIN) runs what its tests' markers give it
	// (doc.go lists them): the full pass, with the local plugin,
	// everything; a cloud's pass the plugin path and that cloud's own.
	plan, err := framework.ReadPlan(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	all := os.Getenv(framework.AllEnv) == "1"
	if err := plan.Select(framework.Pass(), all, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// ctx lasts as long as the run: the registry and the simulators'
	// cells live until it ends (a 30-minute ctx closed the registry in
	// the middle of a full pass on a cold cache). go test's -timeout
	// bounds the run, and every wait of the set-up has its own.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err = framework.Setup(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the control plane:", err)
		return 1
	}
	defer func() {
		if err := f.Teardown(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: tearing down the control plane:", err)
		}
	}()

	bin, err := os.MkdirTemp("", "kip-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(bin)
	// Deferred before every process starts, so run after every one has
	// stopped: a race reported while kip ends fails the run too.
	defer func() {
		races, err := framework.RaceReports()
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		case races != "":
			fmt.Fprintf(os.Stderr, "e2e: FAIL: the race detector found data races in kip's processes (kip, its plugin, the cells' agents):\n%s", races)
			code = 1
		}
	}()
	if err := framework.BuildBinaries(ctx, bin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if framework.RacePrograms() {
		fmt.Fprintln(os.Stderr, "e2e: kip, kip-cell and the plugins are built with -race; a race they report fails the run")
	}
	cells, err = framework.StartCells(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting containerd and the registry (run as root after make deps):", err)
		return 1
	}
	defer cells.Stop()
	// KIP_E2E_PLUGIN picks the cloud plugin the same tests run kip with:
	// local (default), or aws against the EC2 simulator (make e2e runs both).
	kip, err = f.StartKip(ctx, cells, framework.KipOptions{NodeName: "kip", Plugin: os.Getenv("KIP_E2E_PLUGIN"), BinDir: bin, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting kip:", err)
		return 1
	}
	defer kip.Stop()
	if framework.ClusterDNSFor(framework.Pass(), all) {
		// CoreDNS runs where it runs in a real cluster: on a kubelet node.
		if _, err := f.InfraNode(ctx, cells, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: starting the kubelet node for the cluster DNS:", err)
			return 1
		}
		if clusterDNS, err = f.DeployDNS(ctx, cells, framework.DNSOptions{Log: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: deploying the cluster DNS:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "cluster DNS: CoreDNS pod %s at %s on node %s, Service kube-dns at %s\n",
			clusterDNS.Pod, clusterDNS.PodIP, clusterDNS.Node, framework.ClusterDNSIP)
	}
	return m.Run()
}
