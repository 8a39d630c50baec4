package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/kubeletnode"
)

// InfraNodeName is the run's real kubelet node: where the cluster's own
// add-ons run (CoreDNS, metrics-server, kip's pod in the in-cluster
// test), as on the ordinary nodes of a real cluster.
const InfraNodeName = kubeletnode.DefaultName

// InfraNode returns the run's real kubelet node (test/kubeletnode), named
// InfraNodeName, starting it on the first call: the kubelet and
// kube-proxy are built once (controlplane.BuildNode, cached), and its
// containerd pulls from the cells' registry. Teardown stops it. Pods of
// cells reach the node's pods, and its pods reach the Kip nodes' kubelet
// API, through this machine's routes (docs/kubelet-node.md).
func (f *Framework) InfraNode(ctx context.Context, cells *Cells, log io.Writer) (*kubeletnode.Node, error) {
	f.infraMu.Lock()
	defer f.infraMu.Unlock()
	if f.infra != nil {
		return f.infra, nil
	}
	n, err := StartInfraNode(ctx, f.Cluster, cells, log)
	if err != nil {
		return nil, err
	}
	f.infra = n
	return n, nil
}

// StartInfraNode builds (cached) and starts a kubelet node named
// InfraNodeName for cluster c whose containerd pulls from the cells'
// registry, in nodes/<name> of the cluster's state directory (where
// kip-cluster down finds it). make demo's kip-demo runs it this way; a
// node already running there is reused.
func StartInfraNode(ctx context.Context, c *controlplane.Cluster, cells *Cells, log io.Writer) (*kubeletnode.Node, error) {
	if log == nil {
		log = io.Discard
	}
	bin, err := controlplane.BuildNode(ctx, controlplane.BuildOptions{Log: log})
	if err != nil {
		return nil, fmt.Errorf("building the kubelet node: %w", err)
	}
	state := nodeStateDir(c)
	n, err := kubeletnode.Start(ctx, c, kubeletnode.Options{
		Name: InfraNodeName, StateDir: state, BinDir: bin, Registries: []string{cells.Registry.Host()}, Log: log,
	})
	if errors.Is(err, kubeletnode.ErrRunning) {
		return kubeletnode.Load(state)
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

// nodeStateDir is where the infra node keeps its state: nodes/<name> of
// the cluster's state directory, where kip-cluster down looks.
func nodeStateDir(c *controlplane.Cluster) string {
	return filepath.Join(c.StateDir, "nodes", InfraNodeName)
}

// stopInfra stops the infra node, if the run started one.
func (f *Framework) stopInfra() error {
	f.infraMu.Lock()
	defer f.infraMu.Unlock()
	if f.infra == nil {
		return nil
	}
	err := f.infra.Stop()
	f.infra = nil
	if err != nil {
		return fmt.Errorf("stopping the kubelet node: %w", err)
	}
	return nil
}
