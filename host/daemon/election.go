package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/election"
	"github.com/kipcell/kip/host/kubeconfig"
)

// drainTimeout bounds how long a leader that stops waits for its
// components before it releases the Lease.
const drainTimeout = 10 * time.Second

// elect runs lead while this process holds the node's Lease (ecfg, after
// ForNode; host/election): a standby holds no cells, runs no plugin and
// writes neither the Node nor its Lease; it waits, and mirrors the
// leader's kept logs (keptlogs.go; nodeClient, the node's identity, reads
// where they are), until it leads: the mirror has stopped when lead
// starts. The election's identity is checked first, so that one that may
// not hold the Lease (the node's own) is an error at start rather than a
// standby forever.
func elect(ctx context.Context, cfg *config.Config, ecfg election.Config, log *slog.Logger, obs *observed, nodeClient kubernetes.Interface,
	lead func(context.Context) error,
) error {
	restCfg, source, err := electionRESTConfig(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("creating the leader election's Kubernetes client: %w", err)
	}
	if err := election.CanHold(ctx, client, ecfg); err != nil {
		return fmt.Errorf("%w (the election's identity is from %s)", err, source)
	}
	e, err := election.New(ecfg, client, log.With("component", "election"))
	if err != nil {
		return err
	}
	obs.m.SetLeader(e.IsLeader)
	obs.addHealthCheck("leader-election", e.Check)
	// A standby runs no plugin, and is ready: ready to take over.
	obs.pluginReady.set(func(context.Context) error {
		if e.IsLeader() {
			return errors.New("not started")
		}
		return nil
	})
	stopMirror := startMirror(ctx, cfg, obs, nodeClient, restCfg, e.Leader, e.IsLeader, log.With("component", "keptlogs"))
	defer stopMirror()
	return e.Run(ctx, func(ctx context.Context) error {
		stopMirror()
		return lead(ctx)
	})
}

// electionKubeconfig is the setting that holds the Lease, as kip.yaml
// names it, and its value: leaderElection.kubeconfig; when that is empty,
// the bootstrap identity (bootstrap.kubeconfig, perhaps in-cluster) with
// the bootstrap on, else the pod's ServiceAccount. Never $KUBECONFIG or
// the node's kubeconfig: a node identity cannot hold the Lease.
func electionKubeconfig(cfg *config.Config) (key, path string) {
	switch {
	case cfg.LeaderElection.Kubeconfig != "":
		return "leaderElection.kubeconfig", cfg.LeaderElection.Kubeconfig
	case cfg.Bootstrap.Enabled():
		return "bootstrap.kubeconfig", cfg.Bootstrap.Kubeconfig
	}
	return "leaderElection.kubeconfig", kubeconfig.InCluster
}

// electionRESTConfig loads the identity that holds the Lease
// (electionKubeconfig) and says where it came from.
func electionRESTConfig(cfg *config.Config) (*rest.Config, string, error) {
	key, path := electionKubeconfig(cfg)
	rc, source, err := kubeconfig.Load(key, path)
	if err != nil && cfg.LeaderElection.Kubeconfig == "" {
		means := "the pod's ServiceAccount"
		if key != "leaderElection.kubeconfig" {
			means = "the bootstrap identity (" + key + ")"
		}
		return nil, "", fmt.Errorf("leader election: leaderElection.kubeconfig is empty, which means %s: %w: "+
			"set it to the kubeconfig of an identity that may hold the Lease (not the node's; %s grants the ServiceAccount kip-system/kip)",
			means, err, election.RBACFile)
	}
	return rc, source, err
}
