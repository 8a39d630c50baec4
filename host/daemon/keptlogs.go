package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/keptlogs"
)

// serveKeptLogs serves the kept logs of ended pods (cells.podLogsDir) on
// the admin server at /keptlogs, behind its protection (host/keptlogs):
// the leader's for its standbys to mirror; a standby's (its copy) too,
// which costs nothing and reads the same.
func serveKeptLogs(obs *observed, cfg *config.Config, log *slog.Logger) {
	if obs.srv == nil {
		return
	}
	obs.keptLogsChanged = keptlogs.NewChanges()
	h := &keptlogs.Server{Dir: cfg.Cells.PodLogsDir, Changes: obs.keptLogsChanged, Log: log}
	obs.srv.HandleProtected(keptlogs.Path, h)
	obs.srv.HandleProtected(keptlogs.Path+"/", h)
}

// keptLogsAnnotations are the leader's Node annotations: where it serves
// its kept logs (keptlogs.Annotation) under identity, for its standbys
// to mirror (keptLogs.mirror); none without an admin server, or when no
// address can be told (logged).
func keptLogsAnnotations(cfg *config.Config, obs *observed, identity string, log *slog.Logger) map[string]string {
	if obs.srv == nil {
		return nil
	}
	u, err := keptLogsURL(cfg, obs.adminAddr)
	if err != nil {
		log.Warn("not advertising the kept logs of ended pods: standbys cannot mirror them, and a rollout loses them", "error", err)
		return nil
	}
	return map[string]string{keptlogs.Annotation: keptlogs.Advertisement{Identity: identity, URL: u}.Encode()}
}

// keptLogsURL is where a standby reaches this process's admin server:
// keptLogs.advertiseURL; else the host of admin.listenAddress when it
// names one (127.0.0.1 for kips on one machine); else node.internalIP (in
// the Deployment, the pod's IP: KIP_NODE_INTERNAL_IP is $(POD_IP)), each
// with the port the admin server listens on (addr).
func keptLogsURL(cfg *config.Config, addr string) (string, error) {
	if cfg.KeptLogs.AdvertiseURL != "" {
		return cfg.KeptLogs.AdvertiseURL, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("telling the admin server's port from %q: %w", addr, err)
	}
	host, _, _ := net.SplitHostPort(cfg.Admin.ListenAddress)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = cfg.Node.InternalIP
	}
	if host == "" {
		return "", errors.New("keptLogs.advertiseURL is empty, admin.listenAddress names no host and node.internalIP is empty: set keptLogs.advertiseURL to the admin server's URL as the other replicas reach it")
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// startMirror starts a standby's mirror of the leader's kept logs
// (keptLogs.mirror; host/keptlogs) into cells.podLogsDir and adds its
// readiness check "kept-logs", which a leader passes. The leader is the
// one node's Annotation names, if it is the Lease's holder (leader); the
// Node is read with client (the node's identity). The mirror presents
// the token of keptLogs.tokenFile, else the election's identity's
// (election). stop stops it and returns once it no longer writes: call
// it before leading, and when Run ends.
func startMirror(ctx context.Context, cfg *config.Config, obs *observed, client kubernetes.Interface, election *rest.Config,
	leader func() string, isLeader func() bool, log *slog.Logger,
) (stop func()) {
	if !cfg.KeptLogs.Mirror {
		return func() {}
	}
	m := keptlogs.NewMirror(keptlogs.MirrorConfig{
		Dir: cfg.Cells.PodLogsDir, MaxTotalBytes: int64(cfg.Cells.PodLogsMaxTotalBytes),
		Leader: func(ctx context.Context) (keptlogs.Advertisement, error) {
			return keptlogs.Leader(ctx, client.CoreV1().Nodes(), cfg.NodeName, leader)
		},
		Token: mirrorToken(cfg, election),
		Log:   log,
	})
	obs.addReadyCheck("kept-logs", func(r *http.Request) error {
		if isLeader() {
			return nil
		}
		return m.Check(r)
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// mirrorToken is the bearer token a standby presents to the leader:
// keptLogs.tokenFile's, else the election identity's (a token file, such
// as the pod's projected ServiceAccount token, is read again each time).
func mirrorToken(cfg *config.Config, election *rest.Config) func() (string, error) {
	switch {
	case cfg.KeptLogs.TokenFile != "":
		return keptlogs.FileToken(cfg.KeptLogs.TokenFile)
	case election.BearerTokenFile != "":
		return keptlogs.FileToken(election.BearerTokenFile)
	case election.BearerToken != "":
		token := election.BearerToken
		return func() (string, error) { return token, nil }
	}
	return func() (string, error) {
		return "", errors.New("the election's identity has no bearer token (a client certificate?): set keptLogs.tokenFile to a token of an identity that may get /keptlogs")
	}
}
