package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/kubeconfig"
)

// TestElectionKubeconfig checks which setting holds the Lease:
// leaderElection.kubeconfig, else the bootstrap identity with the
// bootstrap on, else the pod's ServiceAccount; never the top-level
// kubeconfig (the node's identity).
func TestElectionKubeconfig(t *testing.T) {
	tests := []struct {
		name                         string
		kubeconfig, boot, leaderElec string
		wantKey, wantPath            string
	}{
		{name: "neither", wantKey: "leaderElection.kubeconfig", wantPath: kubeconfig.InCluster},
		{name: "the node's kubeconfig only", kubeconfig: "/etc/kip/node", wantKey: "leaderElection.kubeconfig", wantPath: kubeconfig.InCluster},
		{name: "bootstrap in-cluster", boot: kubeconfig.InCluster, wantKey: "bootstrap.kubeconfig", wantPath: kubeconfig.InCluster},
		{name: "bootstrap from a file", boot: "/etc/kip/bootstrap", wantKey: "bootstrap.kubeconfig", wantPath: "/etc/kip/bootstrap"},
		{name: "its own", boot: "/etc/kip/bootstrap", leaderElec: "/etc/kip/election",
			wantKey: "leaderElection.kubeconfig", wantPath: "/etc/kip/election"},
		{name: "its own, bootstrap off", kubeconfig: "/etc/kip/node", leaderElec: "/etc/kip/election",
			wantKey: "leaderElection.kubeconfig", wantPath: "/etc/kip/election"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Kubeconfig, cfg.Bootstrap.Kubeconfig, cfg.LeaderElection.Kubeconfig = tt.kubeconfig, tt.boot, tt.leaderElec
			key, path := electionKubeconfig(cfg)
			if key != tt.wantKey || path != tt.wantPath {
				t.Errorf("electionKubeconfig = %q, %q; want %q, %q", key, path, tt.wantKey, tt.wantPath)
			}
		})
	}
}

// TestElectionRESTConfig loads the election's identity. Outside a pod and
// without leaderElection.kubeconfig, the election has no identity: the
// error names the key, what its emptiness means and the RBAC file, and
// never falls back to $KUBECONFIG (the node's identity, which cannot hold
// the Lease).
func TestElectionRESTConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	node := writeKubeconfig(t, "https://node.example:6443", nil, &clientcmdapi.AuthInfo{Token: "abc"})
	t.Setenv("KUBECONFIG", node)
	election := writeKubeconfig(t, "https://election.example:6443", nil, &clientcmdapi.AuthInfo{Token: "abc"})
	boot := writeKubeconfig(t, "https://bootstrap.example:6443", nil, &clientcmdapi.AuthInfo{Token: "abc"})
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name                         string
		kubeconfig, boot, leaderElec string
		wantHost, wantSource         string
		wantErr                      []string
	}{
		{name: "empty, no pod", kubeconfig: node,
			wantErr: []string{"leaderElection.kubeconfig is empty, which means the pod's ServiceAccount", "not the node's", "deploy/rbac/kip-leader-election.yaml"}},
		{name: "empty, no pod, no kubeconfig key",
			wantErr: []string{"leaderElection.kubeconfig is empty, which means the pod's ServiceAccount", "not the node's", "deploy/rbac/kip-leader-election.yaml"}},
		{name: "empty, bootstrap in-cluster, no pod", boot: kubeconfig.InCluster,
			wantErr: []string{"leaderElection.kubeconfig is empty, which means the bootstrap identity (bootstrap.kubeconfig)",
				"loading bootstrap.kubeconfig in-cluster", "deploy/rbac/kip-leader-election.yaml"}},
		{name: "empty, bootstrap from a file", boot: boot,
			wantHost: "https://bootstrap.example:6443", wantSource: "kubeconfig " + boot + " (config key bootstrap.kubeconfig)"},
		{name: "its own", boot: boot, leaderElec: election,
			wantHost: "https://election.example:6443", wantSource: "kubeconfig " + election + " (config key leaderElection.kubeconfig)"},
		{name: "its own, missing", leaderElec: missing,
			wantErr: []string{"loading leaderElection.kubeconfig " + missing + ": "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Kubeconfig, cfg.Bootstrap.Kubeconfig, cfg.LeaderElection.Kubeconfig = tt.kubeconfig, tt.boot, tt.leaderElec
			rc, source, err := electionRESTConfig(cfg)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("host %q from %q, want an error", rc.Host, source)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tt.wantHost || source != tt.wantSource {
				t.Errorf("host %q, source %q; want %q, %q", rc.Host, source, tt.wantHost, tt.wantSource)
			}
		})
	}
}
