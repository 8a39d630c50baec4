package daemon

import (
	"context"
	"errors"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/bootstrap"
	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/kubeconfig"
)

// nodeIdentity returns the node's client configuration and the apiServer
// that names it in errors: by TLS bootstrap (host/bootstrap) when
// bootstrap.kubeconfig is set, with the Manager that keeps its
// certificate (stop it when kip ends); else from kubeconfig
// (kubeconfig.Load), with a nil Manager.
func nodeIdentity(ctx context.Context, cfg *config.Config, log *slog.Logger) (*rest.Config, apiServer, *bootstrap.Manager, error) {
	if !cfg.Bootstrap.Enabled() {
		rc, source, err := kubeconfig.Load("kubeconfig", cfg.Kubeconfig)
		if err != nil {
			return nil, apiServer{}, nil, err
		}
		return rc, newAPIServer(rc, source), nil, nil
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

// untilExpired returns a context that ends when expired receives (the
// node's certificate expired and was not renewed:
// bootstrap.Manager.Expired), and stop, which releases it and says what
// Run returns: err, or the expiry's error when the expiry ended the
// context (the components stopped as on SIGTERM, the leader released its
// Lease), so that kip exits with it and starts again, bootstrapping anew,
// as the kubelet does.
func untilExpired(ctx context.Context, expired <-chan error) (context.Context, func(err error) error) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case err := <-expired:
			cancel(err)
		case <-ctx.Done():
		}
	}()
	return ctx, func(err error) error {
		cause := context.Cause(ctx)
		cancel(nil)
		if errors.Is(cause, bootstrap.ErrExpired) {
			return cause
		}
		return err
	}
}
