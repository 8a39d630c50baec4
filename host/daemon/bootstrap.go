package daemon

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/bootstrap"
	"github.com/kipcell/kip/host/config"
)

// nodeIdentity returns the node's client configuration and the apiServer
// that names it in errors: by TLS bootstrap (host/bootstrap) when
// bootstrap.kubeconfig is set, with the Manager that keeps its
// certificate (stop it when kip ends); else from kubeconfig (restConfig),
// with a nil Manager.
func nodeIdentity(ctx context.Context, cfg *config.Config, log *slog.Logger) (*rest.Config, apiServer, *bootstrap.Manager, error) {
	if !cfg.Bootstrap.Enabled() {
		rc, kubeconfig, err := restConfig(cfg.Kubeconfig)
		if err != nil {
			return nil, apiServer{}, nil, err
		}
		return rc, newAPIServer(rc, kubeconfig), nil, nil
	}
	rc, certs, err := bootstrap.NodeConfig(ctx, cfg.Bootstrap, cfg.NodeName, log.With("component", "bootstrap"))
	if err != nil {
		return nil, apiServer{}, nil, err
	}
	return rc, apiServer{
		url:        rc.Host,
		kubeconfig: "the bootstrap identity's kubeconfig " + cfg.Bootstrap.Kubeconfig + " (config key bootstrap.kubeconfig)",
		identity: identity{
			desc: certs.Identity(),
			hint: "check that kube-controller-manager signs with the cluster's client CA (--cluster-signing-cert-file), or remove the certificate from bootstrap.certDir to ask for a new one",
		},
	}, certs, nil
}
