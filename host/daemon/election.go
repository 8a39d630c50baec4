package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/election"
)

// drainTimeout bounds how long a leader that stops waits for its
// components before it releases the Lease.
const drainTimeout = 10 * time.Second

// elect runs lead while this process holds the node's Lease (host/election):
// a standby holds no cells, runs no plugin and writes neither the Node nor
// its Lease; it only waits. The election's identity is checked first, so
// that one that may not hold the Lease (the node's own) is an error at
// start rather than a standby forever.
func elect(ctx context.Context, cfg *config.Config, log *slog.Logger, obs *observed, lead func(context.Context) error) error {
	ecfg := cfg.LeaderElection.ForNode(cfg.NodeName)
	restCfg, source, err := electionRESTConfig(ecfg.Kubeconfig)
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
	return e.Run(ctx, lead)
}

// electionRESTConfig is the identity that holds the Lease: the kubeconfig
// at path, else the pod's ServiceAccount. Never $KUBECONFIG or the node's
// kubeconfig by default: a node identity cannot hold it.
func electionRESTConfig(path string) (*rest.Config, string, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, "", fmt.Errorf("loading kubeconfig %s (config key leaderElection.kubeconfig): %w", path, err)
		}
		return cfg, "kubeconfig " + path + " (config key leaderElection.kubeconfig)", nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("leader election: leaderElection.kubeconfig is empty, which means the pod's ServiceAccount, and kip runs in no pod (%w): "+
			"set it to the kubeconfig of an identity that may hold the Lease (not the node's; %s grants the ServiceAccount kip-system/kip)",
			err, election.RBACFile)
	}
	return cfg, inClusterSource, nil
}

// drainComponents waits for the components still running (running of
// them send to errs when they return), at most drainTimeout.
func drainComponents(errs <-chan error, running *int, log *slog.Logger) {
	timeout := time.After(drainTimeout)
	for ; *running > 0; *running-- {
		select {
		case err := <-errs:
			if err != nil {
				log.Warn("stopping", "error", err)
			}
		case <-timeout:
			log.Warn("stopping: components still running; releasing the lease anyway", "running", *running, "waited", drainTimeout)
			return
		}
	}
}
