package framework

import (
	"context"
	"fmt"
	"path/filepath"
)

// The bootstrap identity KipOptions.Bootstrap gives kip: the ServiceAccount
// deploy/rbac/kip-bootstrap.yaml binds.
const (
	BootstrapNamespace      = "kip-system"
	BootstrapServiceAccount = "kip"
)

// BootstrapCertDir is kip's bootstrap.certDir under KipOptions.Bootstrap:
// where it keeps the node's key and certificate.
func (k *Kip) BootstrapCertDir() string { return bootstrapCertDir(k.Dir) }

func bootstrapCertDir(dir string) string { return filepath.Join(dir, "pki") }

// bootstrapIdentity writes dir/bootstrap.kubeconfig, a token of the
// ServiceAccount kip-system/kip (created when absent, as the manifests
// create it) from the TokenRequest API, and returns kip.yaml's bootstrap
// section with it and its certDir (bootstrapCertDir).
func (f *Framework) bootstrapIdentity(ctx context.Context, dir string) (*bootstrapSection, error) {
	path := filepath.Join(dir, "bootstrap.kubeconfig")
	if err := f.ServiceAccountKubeconfig(ctx, BootstrapNamespace, BootstrapServiceAccount, path); err != nil {
		return nil, fmt.Errorf("writing the bootstrap kubeconfig: %w", err)
	}
	return &bootstrapSection{Kubeconfig: path, CertDir: bootstrapCertDir(dir)}, nil
}
