package daemon

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kipcell/kip/host/admin"
)

func TestLateCheck(t *testing.T) {
	var l lateCheck
	r := httptest.NewRequest("GET", "/readyz", nil)
	if err := l.ready(r); err == nil || err.Error() != "not started" {
		t.Errorf("ready before set: %v, want not started", err)
	}
	if err := l.live(r); err != nil {
		t.Errorf("live before set: %v, want nil", err)
	}
	failed := errors.New("plugin unreachable")
	l.set(func(context.Context) error { return failed })
	if err := l.ready(r); !errors.Is(err, failed) {
		t.Errorf("ready after set: %v, want the check's error", err)
	}
	if err := l.live(r); !errors.Is(err, failed) {
		t.Errorf("live after set: %v, want the check's error", err)
	}
}

// TestAdminBeforeIdentity checks the probes while kip waits for its
// identity (the TLS bootstrap's CSR, for minutes): the admin server
// answers, /healthz passes (the startup and liveness probes) and /readyz
// fails, naming the checks not started; once the identity's checks are
// set, they decide.
func TestAdminBeforeIdentity(t *testing.T) {
	probe := func(t *testing.T, srv *admin.Server, path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path+"?verbose", nil))
		return rec.Code, rec.Body.String()
	}
	type answer struct {
		path string
		code int
		has  []string
	}
	expired := errors.New("no valid client certificate")
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name      string
		bootstrap bool
		set       func(*observed)
		want      []answer
	}{
		{name: "bootstrap, waiting for the certificate", bootstrap: true, set: func(*observed) {},
			want: []answer{
				{admin.PathHealthz, http.StatusOK, []string{"[+]node-certificate ok"}},
				{admin.PathReadyz, http.StatusInternalServerError, []string{"[-]api failed: not started", "[-]plugin failed: not started", "[-]node-certificate failed: not started"}},
			}},
		{name: "bootstrap, identity and plugin up", bootstrap: true,
			set: func(o *observed) { o.apiReady.set(ok); o.pluginReady.set(ok); o.nodeCertificate.set(ok) },
			want: []answer{
				{admin.PathHealthz, http.StatusOK, []string{"[+]node-certificate ok"}},
				{admin.PathReadyz, http.StatusOK, []string{"[+]api ok", "[+]plugin ok", "[+]node-certificate ok"}},
			}},
		{name: "bootstrap, certificate expired", bootstrap: true,
			set: func(o *observed) {
				o.apiReady.set(ok)
				o.pluginReady.set(ok)
				o.nodeCertificate.set(func(context.Context) error { return expired })
			},
			want: []answer{
				{admin.PathHealthz, http.StatusInternalServerError, []string{"[-]node-certificate failed: no valid client certificate"}},
				{admin.PathReadyz, http.StatusInternalServerError, []string{"[-]node-certificate failed: no valid client certificate"}},
			}},
		{name: "kubeconfig, before the API client", set: func(*observed) {},
			want: []answer{
				{admin.PathHealthz, http.StatusOK, nil},
				{admin.PathReadyz, http.StatusInternalServerError, []string{"[-]api failed: not started"}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := startAdmin(t.Context(), admin.Config{ListenAddress: "127.0.0.1:0"}, tt.bootstrap, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			tt.set(o)
			for _, w := range tt.want {
				code, body := probe(t, o.srv, w.path)
				if code != w.code {
					t.Errorf("%s: %d, want %d:\n%s", w.path, code, w.code, body)
				}
				for _, has := range w.has {
					if !strings.Contains(body, has) {
						t.Errorf("%s lacks %q:\n%s", w.path, has, body)
					}
				}
			}
			if code, body := probe(t, o.srv, admin.PathReadyz+"/node-certificate"); tt.bootstrap != (code != http.StatusNotFound) {
				t.Errorf("/readyz/node-certificate with bootstrap %v: %d %s", tt.bootstrap, code, body)
			}
		})
	}
}

// The readiness check "api" asks the API server through a client of its
// own, and the admin server's reviews through another: neither spends a
// request of the client that writes pod status and the node's Lease, nor
// waits on its rate limiter.
func TestAdminClientsAreTheirOwn(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // "user agent path"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.UserAgent()+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/readyz":
			_, _ = w.Write([]byte("ok"))
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			_, _ = w.Write([]byte(`{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","status":{"authenticated":true,"user":{"username":"prometheus"}}}`))
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			_, _ = w.Write([]byte(`{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	cs, err := newClients(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	o, err := startAdmin(t.Context(), admin.Config{ListenAddress: "127.0.0.1:0", Authorization: admin.AuthorizationCluster}, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	o.useClients(cs)
	o.pluginReady.set(func(context.Context) error { return nil })
	for _, path := range []string{admin.PathReadyz, admin.PathReadyz, admin.PathMetrics, admin.PathMetrics} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		o.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
		}
	}
	mu.Lock()
	got := maps.Clone(seen)
	mu.Unlock()
	want := map[string]int{
		"kip-readyz /readyz": 2,
		// Once: the second scrape is a cache hit.
		"kip-admin-auth /apis/authentication.k8s.io/v1/tokenreviews":        1,
		"kip-admin-auth /apis/authorization.k8s.io/v1/subjectaccessreviews": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests by user agent and path (-want +got):\n%s", diff)
	}
	limiter := func(c kubernetes.Interface) flowcontrol.RateLimiter { return c.CoreV1().RESTClient().GetRateLimiter() }
	all := map[string]kubernetes.Interface{"status": cs.status, "events": cs.events, "probe": cs.probe, "reviews": cs.reviews}
	for a, ca := range all {
		if limiter(ca) == nil {
			t.Errorf("the %s client has no rate limiter", a)
		}
		for b, cb := range all {
			if a < b && limiter(ca) == limiter(cb) {
				t.Errorf("the %s and %s clients share a rate limiter", a, b)
			}
		}
	}
}

// admin.authorization decides whether /metrics and /cells want a token;
// the probes never do.
func TestAdminAuthorization(t *testing.T) {
	tests := []struct {
		authorization string
		path          string
		want          int
	}{
		{admin.AuthorizationCluster, admin.PathMetrics, http.StatusUnauthorized},
		{admin.AuthorizationCluster, admin.PathCells, http.StatusUnauthorized},
		{admin.AuthorizationCluster, admin.PathHealthz, http.StatusOK},
		{admin.AuthorizationNone, admin.PathMetrics, http.StatusOK},
		{admin.AuthorizationNone, admin.PathCells, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.authorization+tt.path, func(t *testing.T) {
			cfg := admin.DefaultConfig()
			cfg.ListenAddress, cfg.Authorization = "127.0.0.1:0", tt.authorization
			o, err := startAdmin(t.Context(), cfg, false, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			o.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if rec.Code != tt.want {
				t.Errorf("GET %s with admin.authorization %s = %d, want %d", tt.path, tt.authorization, rec.Code, tt.want)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:10262": true, "[::1]:10262": true, "localhost:10262": true,
		"0.0.0.0:10262": false, ":10262": false, "10.0.0.5:10262": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
