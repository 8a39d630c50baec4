package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
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
func (f *Framework) bootstrapIdentity(ctx context.Context, dir string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: BootstrapServiceAccount, Namespace: BootstrapNamespace}}
	if _, err := f.Client.CoreV1().ServiceAccounts(BootstrapNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", BootstrapNamespace, BootstrapServiceAccount, err)
	}
	tr, err := f.Client.CoreV1().ServiceAccounts(BootstrapNamespace).CreateToken(ctx, BootstrapServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", BootstrapNamespace, BootstrapServiceAccount, err)
	}
	ca, err := os.ReadFile(f.Cluster.CAFile)
	if err != nil {
		return "", fmt.Errorf("reading the cluster CA: %w", err)
	}
	path := filepath.Join(dir, "bootstrap.kubeconfig")
	err = clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"e2e": {Server: f.Cluster.APIServerURL, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"kip-bootstrap": {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"kip-bootstrap": {Cluster: "e2e", AuthInfo: "kip-bootstrap"}},
		CurrentContext: "kip-bootstrap",
	}, path)
	if err != nil {
		return "", fmt.Errorf("writing the bootstrap kubeconfig: %w", err)
	}
	return fmt.Sprintf("bootstrap:\n  kubeconfig: %s\n  certDir: %s", path, bootstrapCertDir(dir)), nil
}
