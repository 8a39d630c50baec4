package kubeletnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kipcell/kip/test/containerdtest"
)

// bootstrapTokenTTL bounds the bootstrap token's life: the kubelet uses it
// once, to ask for its first certificate, and renews with that certificate.
const bootstrapTokenTTL = time.Hour

// bootstrapBindings are kubeadm's: a bootstrapper may ask for a node client
// certificate, such requests are approved by kube-controller-manager's
// csrapproving controller, and so are a node's renewals of its own.
var bootstrapBindings = []struct{ name, role, group string }{
	{"kip-kubeletnode:kubelet-bootstrap", "system:node-bootstrapper", "system:bootstrappers"},
	{"kip-kubeletnode:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
	{"kip-kubeletnode:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
}

// createBootstrapToken creates the RBAC of a kubelet's TLS bootstrap (once
// per cluster) and a fresh bootstrap token, and returns the token.
func createBootstrapToken(ctx context.Context, cs kubernetes.Interface, nodeName string) (string, error) {
	for _, b := range bootstrapBindings {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	id, secret := containerdtest.Random(6), containerdtest.Random(16)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"description":                    "kubelet TLS bootstrap of node " + nodeName + " (test/kubeletnode)",
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(bootstrapTokenTTL).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
		},
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating the bootstrap token: %w", err)
	}
	return id + "." + secret, nil
}
