package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
