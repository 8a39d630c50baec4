//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kipcell/kip/host/admin"
)

// TestAdminServerAuthorizesCallers reads the shared kip's admin server as
// outsiders do: /metrics and /cells answer 401 without a token or with
// one the API server does not know, 403 to a ServiceAccount with no
// binding, and the data to a ServiceAccount bound as the shipped
// deploy/prometheus/kip-scrape.yaml binds Prometheus's (kip-metrics-reader
// from deploy/rbac), with a token from the TokenRequest API; /cells wants
// kip-cells-reader. The probes answer anyone.
func TestAdminServerAuthorizesCallers(t *testing.T) {
	ctx := t.Context()
	ns := f.Namespace(t)
	get := func(t *testing.T, path, token string) (int, string) {
		t.Helper()
		return httpGet(t, kip.AdminURL()+path, token)
	}

	for _, path := range []string{admin.PathMetrics, admin.PathCells} {
		if code, body := get(t, path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d %.200q, want 401", path, code, body)
		}
		if code, body := get(t, path, "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a token nobody issued = %d %.200q, want 401", path, code, body)
		}
	}
	for _, path := range []string{admin.PathHealthz, admin.PathReadyz} {
		if code, body := get(t, path, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token = %d %.200q, want 200: the probes carry none", path, code, body)
		}
	}

	// A ServiceAccount of no binding: authenticated, not authorized.
	stranger, err := f.ServiceAccountToken(ctx, ns, "stranger", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{admin.PathMetrics, admin.PathCells} {
		code, body := get(t, path, stranger)
		if code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+ns+":stranger") {
			t.Errorf("GET %s as an unbound ServiceAccount = %d %.200q, want 403 naming it", path, code, body)
		}
	}

	// Prometheus's ServiceAccount, bound by the shipped manifest (its
	// subject moved to the test's namespace).
	binding := shippedScrapeBinding(t)
	binding.Name = ns + "-" + binding.Name
	binding.Subjects[0].Namespace, binding.Subjects[0].Name = ns, "prometheus"
	if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.RbacV1().ClusterRoleBindings().Delete(bg, binding.Name, metav1.DeleteOptions{})
	})
	prometheus, err := f.ServiceAccountToken(ctx, ns, "prometheus", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, admin.PathMetrics, prometheus)
	if code != http.StatusOK || !strings.Contains(body, "kip_cells{") || !strings.Contains(body, "kip_api_requests_total{") {
		t.Errorf("GET /metrics as Prometheus = %d %.200q, want 200 with kip's metrics", code, body)
	}
	if code, body := get(t, admin.PathCells, prometheus); code != http.StatusForbidden {
		t.Errorf("GET /cells as Prometheus = %d %.200q, want 403: kip-metrics-reader grants /metrics alone", code, body)
	}

	// kip cells's reader.
	reader, err := f.ServiceAccountToken(ctx, ns, "cells-reader", 10*time.Minute, "kip-cells-reader")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.RbacV1().ClusterRoleBindings().Delete(bg, "cells-reader-kip-cells-reader", metav1.DeleteOptions{})
	})
	if code, body := get(t, admin.PathCells, reader); code != http.StatusOK || !strings.HasPrefix(body, "[") {
		t.Errorf("GET /cells as a kip-cells-reader = %d %.200q, want 200 with the cells as JSON", code, body)
	}
}

// shippedScrapeBinding is deploy/prometheus/kip-scrape.yaml's
// ClusterRoleBinding.
func shippedScrapeBinding(t *testing.T) *rbacv1.ClusterRoleBinding {
	t.Helper()
	data, err := os.ReadFile("../../deploy/prometheus/kip-scrape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b rbacv1.ClusterRoleBinding
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&b); err != nil {
		t.Fatalf("reading deploy/prometheus/kip-scrape.yaml: %v", err)
	}
	if b.RoleRef.Name != "kip-metrics-reader" || len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind {
		t.Fatalf("deploy/prometheus/kip-scrape.yaml binds %+v to %+v, want kip-metrics-reader to one ServiceAccount", b.RoleRef, b.Subjects)
	}
	return &b
}
