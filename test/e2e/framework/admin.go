package framework

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ServiceAccount the tests read kip's admin server as (/metrics,
// /cells, /debug/pprof/), bound to the ClusterRoles of
// deploy/rbac/kip-admin-readers.yaml as an operator binds Prometheus's.
const (
	AdminReaderNamespace = "kip-system"
	AdminReader          = "kip-e2e-admin-reader"
	// adminTokenLifetime is the reader's token's: longer than a run.
	adminTokenLifetime = 2 * time.Hour
)

// adminReaderRoles are the ClusterRoles AdminReader is bound to.
var adminReaderRoles = []string{"kip-metrics-reader", "kip-cells-reader", "kip-profiles-reader"}

// ServiceAccountToken creates the ServiceAccount namespace/name if absent,
// binds it to each ClusterRole of roles (ClusterRoleBindings named
// <name>-<role>), and returns a token of it from the TokenRequest API,
// valid for lifetime.
func (f *Framework) ServiceAccountToken(ctx context.Context, namespace, name string, lifetime time.Duration, roles ...string) (string, error) {
	_, err := f.Client.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the ServiceAccount %s/%s: %w", namespace, name, err)
	}
	for _, role := range roles {
		_, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s/%s to the ClusterRole %s: %w", namespace, name, role, err)
		}
	}
	seconds := int64(lifetime / time.Second)
	tr, err := f.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of the ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// adminReaderToken is a token of AdminReader, bound to adminReaderRoles.
func (f *Framework) adminReaderToken(ctx context.Context) (string, error) {
	return f.ServiceAccountToken(ctx, AdminReaderNamespace, AdminReader, adminTokenLifetime, adminReaderRoles...)
}

// AdminToken is a bearer token kip's admin server lets read /metrics,
// /cells and /debug/pprof/: AdminReader's, made when StartKip started k.
func (k *Kip) AdminToken() string { return k.adminToken }

// AdminGet GETs path (with its query) from kip's admin server with
// AdminToken, as Prometheus or kip cells do.
func (k *Kip) AdminGet(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.adminURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("asking kip's admin server for %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+k.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking kip's admin server for %s: %w", path, err)
	}
	return resp, nil
}
