package kubeconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// writeKubeconfig writes a kubeconfig for server into dir.
func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoad checks each kind of value, and that every error names the key
// and the value, and every source where the configuration came from.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "https://file.example:6443")
	missing := filepath.Join(dir, "missing")
	inCluster := func() (*rest.Config, error) {
		return &rest.Config{Host: "https://in-cluster.example:443", BearerTokenFile: InClusterTokenFile}, nil
	}
	notInPod := func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	tests := []struct {
		name       string
		key, path  string
		env        string // $KUBECONFIG
		inCluster  func() (*rest.Config, error)
		wantHost   string
		wantSource string
		wantErr    []string
	}{
		{name: "a path", key: "leaderElection.kubeconfig", path: path, inCluster: inCluster,
			wantHost: "https://file.example:6443", wantSource: "kubeconfig " + path + " (config key leaderElection.kubeconfig)"},
		{name: "a path that is missing", key: "leaderElection.kubeconfig", path: missing, inCluster: inCluster,
			wantErr: []string{"loading leaderElection.kubeconfig " + missing + ": "}},
		{name: "a path beside $KUBECONFIG", key: "kubeconfig", path: path, env: missing, inCluster: notInPod,
			wantHost: "https://file.example:6443", wantSource: "kubeconfig " + path + " (config key kubeconfig)"},
		{name: "in-cluster", key: "bootstrap.kubeconfig", path: InCluster, inCluster: inCluster,
			wantHost: "https://in-cluster.example:443", wantSource: InClusterSource + " (config key bootstrap.kubeconfig in-cluster)"},
		{name: "in-cluster outside a pod", key: "bootstrap.kubeconfig", path: InCluster, inCluster: notInPod,
			wantErr: []string{"loading bootstrap.kubeconfig in-cluster (the pod's ServiceAccount): ", rest.ErrNotInCluster.Error()}},
		{name: "empty: $KUBECONFIG", key: "kubeconfig", env: path, inCluster: inCluster,
			wantHost: "https://file.example:6443", wantSource: "kubeconfig " + path + " ($KUBECONFIG)"},
		{name: "empty: in-cluster", key: "kubeconfig", inCluster: inCluster,
			wantHost: "https://in-cluster.example:443", wantSource: InClusterSource},
		{name: "empty: nothing", key: "kubeconfig", inCluster: notInPod,
			wantErr: []string{"loading kubeconfig: it is empty, and there is no kubeconfig (", rest.ErrNotInCluster.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			t.Setenv("KUBECONFIG", tt.env)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			old := inClusterConfig
			inClusterConfig = tt.inCluster
			defer func() { inClusterConfig = old }()

			cfg, source, err := Load(tt.key, tt.path)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load = %v, %q; want an error", cfg, source)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				if errors.Is(err, rest.ErrNotInCluster) != strings.Contains(strings.Join(tt.wantErr, ""), rest.ErrNotInCluster.Error()) {
					t.Errorf("error %q: wraps rest.ErrNotInCluster %v", err, errors.Is(err, rest.ErrNotInCluster))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.wantHost || source != tt.wantSource {
				t.Errorf("Load = host %q, source %q; want %q, %q", cfg.Host, source, tt.wantHost, tt.wantSource)
			}
		})
	}
}
