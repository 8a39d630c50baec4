package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/config"
)

func TestKeptLogsURL(t *testing.T) {
	for _, tc := range []struct {
		name, listen, internalIP, advertise, addr string
		want, wantErr                             string
	}{
		{name: "set", advertise: "https://kip.example:8443", listen: "0.0.0.0:10262", addr: "[::]:10262", want: "https://kip.example:8443"},
		{name: "the Deployment: the pod's IP", listen: "0.0.0.0:10262", internalIP: "10.244.1.7", addr: "[::]:10262", want: "http://10.244.1.7:10262"},
		{name: "any address, IPv6", listen: "[::]:10262", internalIP: "fd00::7", addr: "[::]:10262", want: "http://[fd00::7]:10262"},
		{name: "no host", listen: ":10262", internalIP: "10.0.0.7", addr: "[::]:10262", want: "http://10.0.0.7:10262"},
		{name: "loopback, a free port", listen: "127.0.0.1:0", internalIP: "10.0.0.7", addr: "127.0.0.1:41234", want: "http://127.0.0.1:41234"},
		{name: "nothing to tell", listen: "0.0.0.0:10262", addr: "[::]:10262", wantErr: "set keptLogs.advertiseURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Admin.ListenAddress, cfg.Node.InternalIP, cfg.KeptLogs.AdvertiseURL = tc.listen, tc.internalIP, tc.advertise
			got, err := keptLogsURL(cfg, tc.addr)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("keptLogsURL = %q, %v; want %q, an error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestMirrorToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, token string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	setting, projected := file("setting", "from-the-setting"), file("projected", "projected")
	for _, tc := range []struct {
		name      string
		tokenFile string
		election  rest.Config
		want      string
		wantErr   string
	}{
		{name: "keptLogs.tokenFile first", tokenFile: setting, election: rest.Config{BearerToken: "x", BearerTokenFile: projected}, want: "from-the-setting"},
		{name: "in-cluster: the file, read again", election: rest.Config{BearerToken: "stale", BearerTokenFile: projected}, want: "projected"},
		{name: "a kubeconfig's token", election: rest.Config{BearerToken: "kubeconfig-token"}, want: "kubeconfig-token"},
		{name: "a client certificate", election: rest.Config{}, wantErr: "set keptLogs.tokenFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.KeptLogs.TokenFile = tc.tokenFile
			got, err := mirrorToken(cfg, &tc.election)()
			if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("token = %q, %v; want %q, an error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestKeptLogsServedBehindTheAdminProtection: the admin server serves
// cells.podLogsDir at /keptlogs (the listing and each file) only to a
// token the API server authenticates whose user it allows the path.
func TestKeptLogsServedBehindTheAdminProtection(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ns_job_u1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ns_job_u1", "c.log"), []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			ok := strings.Contains(string(body), "kip-sa") // JSON or protobuf
			fmt.Fprintf(w, `{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","status":{"authenticated":%t,"user":{"username":"system:serviceaccount:kip-system:kip"}}}`, ok)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			ok := strings.Contains(string(body), "/keptlogs")
			fmt.Fprintf(w, `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":%t}}`, ok)
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
	cfg := config.Defaults()
	cfg.Cells.PodLogsDir = dir
	serveKeptLogs(o, cfg, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		path, token string
		wantCode    int
		wantBody    string
	}{
		{path: "/keptlogs", wantCode: http.StatusUnauthorized},
		{path: "/keptlogs", token: "forged", wantCode: http.StatusUnauthorized},
		{path: "/keptlogs/ns_job_u1/c.log", wantCode: http.StatusUnauthorized},
		{path: "/keptlogs", token: "kip-sa", wantCode: http.StatusOK, wantBody: `"name":"ns_job_u1"`},
		{path: "/keptlogs/ns_job_u1/c.log", token: "kip-sa", wantCode: http.StatusOK, wantBody: "kept\n"},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		o.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
			t.Errorf("GET %s with token %q = %d %q, want %d with %q", tc.path, tc.token, rec.Code, rec.Body, tc.wantCode, tc.wantBody)
		}
	}
}
