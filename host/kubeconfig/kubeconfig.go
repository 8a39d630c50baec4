package kubeconfig

import (
	"fmt"
	"net"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// InCluster as a kubeconfig setting is the pod's ServiceAccount.
	InCluster = "in-cluster"
	// InClusterTokenFile is where rest.InClusterConfig reads the token.
	InClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // a path, not a credential
	// InClusterSource names the in-cluster configuration as a source.
	InClusterSource = "the in-cluster service account (/var/run/secrets/kubernetes.io/serviceaccount)"
)

// inClusterConfig is rest.InClusterConfig, replaced in tests.
var inClusterConfig = rest.InClusterConfig

// Load returns the client configuration that the setting key (as kip.yaml
// spells it: "leaderElection.kubeconfig") gives with value path, and
// where it came from ("kubeconfig /x (config key leaderElection.kubeconfig)"):
//
//   - InCluster: the pod's ServiceAccount;
//   - a path: that kubeconfig's current context;
//   - empty: $KUBECONFIG, else ~/.kube/config, else the pod's
//     ServiceAccount.
//
// Its error names the key and the value: "loading
// leaderElection.kubeconfig /x: ...".
func Load(key, path string) (*rest.Config, string, error) {
	if path == InCluster {
		cfg, err := inClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("loading %s %s (the pod's ServiceAccount): %w", key, InCluster, err)
		}
		return cfg, InClusterSource + " (config key " + key + " " + InCluster + ")", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		return cfg, source(key, rules, cfg), nil
	}
	if path != "" {
		return nil, "", fmt.Errorf("loading %s %s: %w", key, path, err)
	}
	in, inErr := inClusterConfig()
	if inErr != nil {
		return nil, "", fmt.Errorf("loading %s: it is empty, and there is no kubeconfig (%w) and no pod's ServiceAccount (%w)", key, err, inErr)
	}
	return in, InClusterSource, nil
}

// source names where Load found cfg: the key, $KUBECONFIG,
// ~/.kube/config, or the in-cluster service account (which client-go's
// loader falls back to by itself when no kubeconfig is found).
func source(key string, rules *clientcmd.ClientConfigLoadingRules, cfg *rest.Config) string {
	if rules.ExplicitPath != "" {
		return "kubeconfig " + rules.ExplicitPath + " (config key " + key + ")"
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host != "" && port != "" && cfg.BearerTokenFile == InClusterTokenFile &&
		cfg.Host == "https://"+net.JoinHostPort(host, port) {
		return InClusterSource
	}
	var files []string
	for _, f := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return "kubeconfig " + strings.Join(files, string(os.PathListSeparator)) + " ($KUBECONFIG)"
	}
	return "kubeconfig " + strings.Join(files, string(os.PathListSeparator)) + " (the default, ~/.kube/config)"
}
