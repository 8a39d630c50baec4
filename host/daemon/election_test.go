package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Outside a pod and without leaderElection.kubeconfig, the election has no
// identity: the error names the key and the RBAC file, and never falls
// back to $KUBECONFIG (the node's identity, which cannot hold the Lease).
func TestElectionRESTConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	_, _, err := electionRESTConfig("")
	if err == nil {
		t.Fatal("no kubeconfig and no pod: nil error")
	}
	for _, want := range []string{"leaderElection.kubeconfig is empty", "not the node's", "deploy/rbac/kip-leader-election.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	cfg, source, err := electionRESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || !strings.Contains(source, "leaderElection.kubeconfig") {
		t.Errorf("host %q, source %q", cfg.Host, source)
	}
	if _, _, err := electionRESTConfig(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "leaderElection.kubeconfig") {
		t.Errorf("a missing kubeconfig: %v, want an error naming the key", err)
	}
}

// drainComponents takes every component's result, and gives up on those
// that do not return (bounded by drainTimeout, not measured here).
func TestDrainComponents(t *testing.T) {
	errs := make(chan error, 3)
	errs <- nil
	errs <- errors.New("plugin exited")
	errs <- nil
	running := 3
	drainComponents(errs, &running, slog.New(slog.DiscardHandler))
	if running != 0 || len(errs) != 0 {
		t.Errorf("running %d, %d results left; want all taken", running, len(errs))
	}
}
