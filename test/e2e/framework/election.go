package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The identity kip's leader election holds the Lease with, as
// deploy/rbac/kip-leader-election.yaml grants it: the ServiceAccount
// kip-system/kip.
const (
	ElectionNamespace      = "kip-system"
	ElectionServiceAccount = "kip"
	// electionTokenLifetime is the TokenRequest's: longer than a run.
	electionTokenLifetime = 2 * time.Hour
)

// ServiceAccountKubeconfig writes to path a kubeconfig that presents a
// token of the ServiceAccount namespace/name (created if absent), made
// with the TokenRequest API as an admin would for a process outside the
// cluster: what a pod's projected token is, in a file.
func (f *Framework) ServiceAccountKubeconfig(ctx context.Context, namespace, name, path string) error {
	_, err := f.Client.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the ServiceAccount %s/%s: %w", namespace, name, err)
	}
	seconds := int64(electionTokenLifetime / time.Second)
	tr, err := f.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token of the ServiceAccount %s/%s: %w", namespace, name, err)
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kip-e2e"] = &clientcmdapi.Cluster{Server: f.Cluster.APIServerURL, CertificateAuthority: f.Cluster.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["kip-e2e"] = &clientcmdapi.Context{Cluster: "kip-e2e", AuthInfo: user}
	cfg.CurrentContext = "kip-e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing the ServiceAccount's kubeconfig: %w", err)
	}
	return nil
}

// electionConfig is kip.yaml's leaderElection section for k when on is
// set (nil otherwise): k.Identity, named after k.Dir, and the
// ServiceAccount's kubeconfig, written into k.Dir.
func (f *Framework) electionConfig(ctx context.Context, k *Kip, on bool) (*electionSection, error) {
	if !on {
		return nil, nil
	}
	k.Identity = filepath.Base(k.Dir)
	kubeconfig := filepath.Join(k.Dir, "kubeconfig-election")
	if err := f.ServiceAccountKubeconfig(ctx, ElectionNamespace, ElectionServiceAccount, kubeconfig); err != nil {
		return nil, err
	}
	return &electionSection{Enabled: true, Identity: k.Identity, Kubeconfig: kubeconfig}, nil
}
