package daemon

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kipcell/kip/cell/api/apitest"
	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/kubeconfig"
	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/serviceenv"
)

// pluginDir holds kip-plugin-fake, built by TestMain: Run starts it before
// it loads the CA, so the tests of what comes after need a real plugin.
var pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kip-daemon-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kip-plugin-fake"), "./testdata/fakeplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	pluginDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Answers as kube-apiserver gives them (metav1.Status bodies).
const (
	versionBody = `{"major":"1","minor":"36","gitVersion":"v1.36.3","gitCommit":"0","gitTreeState":"clean","goVersion":"go1.26.8","compiler":"gc","platform":"linux/amd64"}`

	statusUnauthorized = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`

	statusForbiddenVersion = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/version\"","reason":"Forbidden","details":{},"code":403}`

	statusForbiddenGetSecret = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets \"kip-ca\" is forbidden: User \"system:node:kip\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kip-system\": no relationship found between node 'kip' and this object","reason":"Forbidden","details":{"name":"kip-ca","kind":"secrets"},"code":403}`

	statusForbiddenGetSecretAnonymous = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets \"kip-ca\" is forbidden: User \"system:anonymous\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kip-system\"","reason":"Forbidden","details":{"name":"kip-ca","kind":"secrets"},"code":403}`

	statusForbiddenCreateSecret = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets is forbidden: User \"system:node:kip\" cannot create resource \"secrets\" in API group \"\" in the namespace \"kip-system\"","reason":"Forbidden","details":{"kind":"secrets"},"code":403}`

	statusSecretNotFound = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets \"kip-ca\" not found","reason":"NotFound","details":{"name":"kip-ca","kind":"secrets"},"code":404}`

	statusForbiddenListPods = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"system:node:kip\" cannot list resource \"pods\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"pods"},"code":403}`

	statusInternal = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: etcdserver: request timed out","reason":"InternalError","details":{"causes":[{"message":"etcdserver: request timed out"}]},"code":500}`

	statusNotFound = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`

	emptyPodList = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`

	statusForbiddenListServices = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"services is forbidden: User \"system:node:kip\" cannot list resource \"services\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"services"},"code":403}`

	emptyServiceList = `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`

	emptyEndpointSliceList = `{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`

	statusForbiddenListEndpointSlices = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"endpointslices.discovery.k8s.io is forbidden: User \"system:node:kip\" cannot list resource \"endpointslices\" in API group \"discovery.k8s.io\" at the cluster scope","reason":"Forbidden","details":{"group":"discovery.k8s.io","kind":"endpointslices"},"code":403}`
)

// The routes kip uses at start-up, as "METHOD path".
const (
	routeVersion       = "GET /version"
	routeGetSecret     = "GET /api/v1/namespaces/kip-system/secrets/kip-ca"
	routeCreateSecret  = "POST /api/v1/namespaces/kip-system/secrets"
	routeListPods      = "GET /api/v1/pods"
	routeWatchPods     = "WATCH /api/v1/pods"
	routeListServices  = "GET /api/v1/services"
	routeWatchServices = "WATCH /api/v1/services"
	routeListSlices    = "GET /apis/discovery.k8s.io/v1/endpointslices"
	routeWatchSlices   = "WATCH /apis/discovery.k8s.io/v1/endpointslices"
)

type answer struct {
	code int
	body string // "" echoes the request body (a create)
}

// healthy is a cluster where kip may do everything it does at start-up:
// the CA Secret is absent and may be created, the node has no pods, and
// watches fail (the informer then falls back to a list).
var healthy = map[string]answer{
	routeVersion:       {200, versionBody},
	routeGetSecret:     {404, statusSecretNotFound},
	routeCreateSecret:  {201, ""},
	routeListPods:      {200, emptyPodList},
	routeWatchPods:     {500, statusInternal},
	routeListServices:  {200, emptyServiceList},
	routeWatchServices: {500, statusInternal},
	routeListSlices:    {200, emptyEndpointSliceList},
	routeWatchSlices:   {500, statusInternal},
}

// fakeAPIServer answers as kube-apiserver does: healthy, with the routes
// in override answered otherwise ("*" answers every route).
func fakeAPIServer(t *testing.T, override map[string]answer) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			method = "WATCH"
		}
		route := method + " " + r.URL.Path
		a, ok := override["*"]
		if !ok {
			a, ok = override[route]
		}
		if !ok {
			a, ok = healthy[route]
		}
		if !ok {
			a = answer{404, statusNotFound}
		}
		body, contentType := []byte(a.body), "application/json"
		if a.body == "" {
			body, _ = io.ReadAll(r.Body)
			contentType = r.Header.Get("Content-Type") // client-go may send protobuf
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(a.code)
		_, _ = w.Write(body)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the TLS test's failed handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// closedURL is an https URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "https://" + addr
}

// serverCA is the PEM of srv's certificate, for a kubeconfig that trusts it.
func serverCA(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// clientCert returns a PEM certificate and key for cn in groups orgs,
// valid until notAfter.
func clientCert(t *testing.T, cn string, orgs []string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return apitest.NewCA(t).IssueWith(t, cn, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.Subject.Organization = orgs
		c.NotBefore, c.NotAfter = notAfter.Add(-365*24*time.Hour), notAfter
	})
}

// writeKubeconfig writes a kubeconfig for server (trusting ca, if any) with
// user and returns its path.
func writeKubeconfig(t *testing.T, server string, ca []byte, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = user
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig-node-kip")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Users a kubeconfig may hold.
func nodeCertUser(t *testing.T) *clientcmdapi.AuthInfo {
	cert, key := clientCert(t, "system:node:kip", []string{"system:nodes"}, time.Now().Add(24*time.Hour))
	return &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
}

func execUser() *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         "/bin/sh",
		Args:            []string{"-c", `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'`},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
}

// runKip runs the daemon as `kip run` does with kubeconfig and the fake
// plugin, and returns what `kip run` would print.
func runKip(t *testing.T, kubeconfig string) string {
	t.Helper()
	cfg, err := config.Load("", nil, map[string]any{
		"clusterID": "test", "kubeconfig": kubeconfig, "plugin.name": "fake", "plugin.dir": pluginDir,
		"node.internalIP": "127.0.0.1", "node.listenAddress": "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = Run(ctx, cfg, "test", slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("Run returned no error")
	}
	return err.Error()
}

// check reports every substring of want missing from msg and every
// substring of never found in it.
func check(t *testing.T, msg string, want, never []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not name %q:\n%s", w, msg)
		}
	}
	for _, n := range never {
		if strings.Contains(msg, n) {
			t.Errorf("the error says %q, which is wrong here:\n%s", n, msg)
		}
	}
}

// checkErr checks the error of call: none when want is nil, else one
// that names every substring of want and url, and none of never.
func checkErr(t *testing.T, call string, err error, want []string, url string, never []string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: %v", call, err)
	case want == nil:
	case err == nil:
		t.Fatalf("%s returned no error", call)
	default:
		check(t, err.Error(), append(want, url), never)
	}
}

// rbacHints are what kip says only when a request is forbidden.
var rbacHints = []string{"deploy/rbac", "403 Forbidden", "may not"}

// TestRunAPIServerErrors drives `kip run` against API servers that are
// down, untrusted, refuse kip's credentials, forbid what kip needs, or
// fail otherwise, and checks that the error names what to fix.
func TestRunAPIServerErrors(t *testing.T) {
	type setup struct {
		url, kubeconfig string
	}
	tests := []struct {
		name string
		// start returns the server URL and the kubeconfig for it.
		start func(t *testing.T) setup
		want  func(s setup) []string
		never []string
	}{
		{
			name: "unreachable: nothing listens",
			start: func(t *testing.T) setup {
				url := closedURL(t)
				return setup{url, writeKubeconfig(t, url, nil, nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"checking the API server: cannot reach the API server " + s.url,
					"from kubeconfig " + s.kubeconfig + " (config key kubeconfig)", "connection refused"}
			},
			never: append([]string{"secrets", "401 Unauthorized", "credentials"}, rbacHints...),
		},
		{
			name: "unreachable: the server's certificate is not trusted",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, nil)
				return setup{srv.URL, writeKubeconfig(t, srv.URL, nil, nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"checking the API server: the TLS handshake with the API server " + s.url + " failed",
					"certificate-authority of kubeconfig " + s.kubeconfig, "x509: certificate signed by unknown authority"}
			},
			never: append([]string{"secrets", "401 Unauthorized", "credentials"}, rbacHints...),
		},
		{
			name: "unauthenticated: node client certificate",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"checking the API server: the API server " + s.url + " does not accept kip's credentials (401 Unauthorized)",
					"kip presented a client certificate for system:node:kip in group system:nodes",
					"from kubeconfig " + s.kubeconfig, "check that it is signed by the cluster's client CA"}
			},
			never: append([]string{"secrets"}, rbacHints...),
		},
		{
			name: "unauthenticated: expired client certificate",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				cert, key := clientCert(t, "system:node:kip", []string{"system:nodes"}, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
				user := &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), user)}
			},
			want: func(s setup) []string {
				return []string{"401 Unauthorized",
					"a client certificate for system:node:kip in group system:nodes that expired 2024-01-02T03:04:05Z",
					"renew the certificate"}
			},
			never: rbacHints,
		},
		{
			name: "unauthenticated: bearer token",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})}
			},
			want: func(s setup) []string {
				return []string{"401 Unauthorized", "kip presented a bearer token, from kubeconfig " + s.kubeconfig}
			},
			never: append([]string{"abcdef.0123456789abcdef"}, rbacHints...),
		},
		{
			name: "unauthenticated: token file holding a service account token",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				file := filepath.Join(t.TempDir(), "token")
				payload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"kubernetes/serviceaccount","sub":"system:serviceaccount:kip-system:kip"}`))
				if err := os.WriteFile(file, []byte("eyJhbGciOiJSUzI1NiJ9."+payload+".c2ln\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), &clientcmdapi.AuthInfo{TokenFile: file})}
			},
			want: func(s setup) []string {
				return []string{"401 Unauthorized", "kip presented the bearer token in ",
					"for system:serviceaccount:kip-system:kip, from kubeconfig " + s.kubeconfig}
			},
			never: rbacHints,
		},
		{
			name: "unauthenticated: exec plugin",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), execUser())}
			},
			want: func(s setup) []string {
				return []string{"401 Unauthorized", `kip presented credentials from the exec plugin "/bin/sh", from kubeconfig ` + s.kubeconfig}
			},
			never: rbacHints,
		},
		{
			name: "unauthenticated: no credentials",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), &clientcmdapi.AuthInfo{})}
			},
			want: func(s setup) []string {
				return []string{"401 Unauthorized", "kip presented no credentials (anonymous, system:anonymous), from kubeconfig " + s.kubeconfig}
			},
			never: rbacHints,
		},
		{
			name: "forbidden: get the CA Secret",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{routeGetSecret: {403, statusForbiddenGetSecret}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"loading the cluster CA: kip's identity, a client certificate for system:node:kip in group system:nodes from kubeconfig " + s.kubeconfig,
					`may not get secrets "kip-ca" in namespace kip-system at ` + s.url + ` (403 Forbidden); apply deploy/rbac/kip-ca-secret.yaml`,
					`User "system:node:kip" cannot get resource "secrets"`}
			},
			never: []string{"401 Unauthorized", "cannot reach"},
		},
		{
			name: "forbidden: create the CA Secret",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{routeCreateSecret: {403, statusForbiddenCreateSecret}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"loading the cluster CA: kip's identity, a client certificate for system:node:kip in group system:nodes",
					"may not create secrets in namespace kip-system at " + s.url + " (403 Forbidden); apply deploy/rbac/kip-ca-secret.yaml"}
			},
			never: []string{"401 Unauthorized", "cannot reach", "get secrets"},
		},
		{
			name: "forbidden: anonymous, with /version forbidden too",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{
					routeVersion:   {403, statusForbiddenVersion},
					routeGetSecret: {403, statusForbiddenGetSecretAnonymous},
				})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), &clientcmdapi.AuthInfo{})}
			},
			want: func(s setup) []string {
				return []string{"loading the cluster CA: kip's identity, no credentials (anonymous, system:anonymous) from kubeconfig " + s.kubeconfig,
					`may not get secrets "kip-ca" in namespace kip-system at ` + s.url + ` (403 Forbidden); apply deploy/rbac/kip-ca-secret.yaml`}
			},
			never: []string{"checking the API server"},
		},
		{
			name: "forbidden: list the node's pods",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{routeListPods: {403, statusForbiddenListPods}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"syncing the cache of the node's pods: kip's identity, a client certificate for system:node:kip in group system:nodes",
					"may not list pods in all namespaces with field selector spec.nodeName=kip at " + s.url + " (403 Forbidden)",
					"run kip as the node, system:node:kip in group system:nodes"}
			},
			never: []string{"kip-ca-secret.yaml", "timed out"},
		},
		{
			name: "forbidden: list EndpointSlices",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{routeListSlices: {403, statusForbiddenListEndpointSlices}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{"watching the cluster's EndpointSlices for the cells' ClusterIP services: kip's identity, a client certificate for system:node:kip in group system:nodes",
					"may not list endpointslices.discovery.k8s.io in all namespaces at " + s.url + " (403 Forbidden); apply deploy/rbac/kip-endpointslices.yaml"}
			},
			never: []string{"kip-ca-secret.yaml", "401 Unauthorized", "cannot reach"},
		},
		{
			name: "other: the server fails reading the CA Secret",
			start: func(t *testing.T) setup {
				srv := fakeAPIServer(t, map[string]answer{routeGetSecret: {500, statusInternal}})
				return setup{srv.URL, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t))}
			},
			want: func(s setup) []string {
				return []string{`loading the cluster CA (get secrets "kip-ca" in namespace kip-system at ` + s.url + `): `,
					"reading CA secret kip-system/kip-ca: Internal error occurred: etcdserver: request timed out"}
			},
			never: append([]string{"401 Unauthorized", "cannot reach", "credentials"}, rbacHints...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.start(t)
			msg := runKip(t, s.kubeconfig)
			t.Logf("kip run: %s", msg)
			check(t, msg, tt.want(s), tt.never)
		})
	}
}

// TestLoadCAServerGone checks the CA step's own errors for a server that
// went away or stopped accepting kip's credentials after the preflight.
func TestLoadCAServerGone(t *testing.T) {
	tests := []struct {
		name   string
		server func(t *testing.T) (url string, ca []byte)
		want   []string
	}{
		{
			name:   "unreachable",
			server: func(t *testing.T) (string, []byte) { return closedURL(t), nil },
			want:   []string{"loading the cluster CA: cannot reach the API server", "connection refused"},
		},
		{
			name: "unauthenticated",
			server: func(t *testing.T) (string, []byte) {
				srv := fakeAPIServer(t, map[string]answer{"*": {401, statusUnauthorized}})
				return srv.URL, serverCA(srv)
			},
			want: []string{"loading the cluster CA: the API server", "does not accept kip's credentials (401 Unauthorized)",
				"kip presented a client certificate for system:node:kip in group system:nodes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, ca := tt.server(t)
			api, client := connect(t, writeKubeconfig(t, url, ca, nodeCertUser(t)))
			_, err := api.loadCA(t.Context(), client, "kip-system", "kip-ca")
			if err == nil {
				t.Fatal("loadCA returned no error")
			}
			check(t, err.Error(), append(tt.want, url), rbacHints)
		})
	}
}

// connect builds what Run builds from the kubeconfig at path.
func connect(t *testing.T, path string) (apiServer, kubernetes.Interface) {
	t.Helper()
	rc, source, err := kubeconfig.Load("kubeconfig", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(node.ClientConfig(rc))
	if err != nil {
		t.Fatal(err)
	}
	return newAPIServer(rc, source), client
}

// TestSyncPods checks the first sync of the node's pods: it succeeds
// against a healthy server, fails at once saying which of unreachable,
// unauthenticated and forbidden it is, and otherwise times out naming the
// last error.
func TestSyncPods(t *testing.T) {
	tests := []struct {
		name     string
		override map[string]answer
		closed   bool
		want     []string // nil: no error
		never    []string
	}{
		{name: "synced"},
		{
			name:   "unreachable",
			closed: true,
			want:   []string{"syncing the cache of the node's pods: cannot reach the API server", "connection refused"},
			never:  append([]string{"timed out"}, rbacHints...),
		},
		{
			name:     "unauthenticated",
			override: map[string]answer{"*": {401, statusUnauthorized}},
			want:     []string{"syncing the cache of the node's pods: the API server", "(401 Unauthorized): kip presented a client certificate for system:node:kip"},
			never:    append([]string{"timed out"}, rbacHints...),
		},
		{
			name:     "forbidden",
			override: map[string]answer{routeListPods: {403, statusForbiddenListPods}},
			want: []string{"syncing the cache of the node's pods: kip's identity, a client certificate for system:node:kip in group system:nodes",
				"may not list pods in all namespaces with field selector spec.nodeName=kip at ", "(403 Forbidden)", "Node authorizer"},
			never: []string{"timed out", "kip-ca-secret.yaml"},
		},
		{
			name:     "other: the server keeps failing",
			override: map[string]answer{routeListPods: {500, statusInternal}},
			want: []string{"syncing the cache of the node's pods: timed out after 1s (list pods in all namespaces with field selector spec.nodeName=kip at ",
				"etcdserver: request timed out"},
			never: append([]string{"cannot reach", "credentials"}, rbacHints...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, ca := closedURL(t), []byte(nil)
			if !tt.closed {
				srv := fakeAPIServer(t, tt.override)
				url, ca = srv.URL, serverCA(srv)
			}
			api, client := connect(t, writeKubeconfig(t, url, ca, nodeCertUser(t)))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			factory := node.NewPodInformerFactory(client, "kip")
			informer := factory.Core().V1().Pods().Informer()
			defer factory.Shutdown()
			defer cancel() // runs before Shutdown, which waits for the informer
			err := api.syncPods(ctx, client, factory, informer, "kip", time.Second)
			checkErr(t, "syncPods", err, tt.want, url, tt.never)
		})
	}
}

// TestSyncServices checks the first sync of the Services, through the
// same syncCache as TestSyncPods: synced, forbidden at once, or timed out
// naming the last error.
func TestSyncServices(t *testing.T) {
	tests := []struct {
		name     string
		override map[string]answer
		want     []string // nil: no error
		never    []string
	}{
		{name: "synced"},
		{
			name:     "forbidden",
			override: map[string]answer{routeListServices: {403, statusForbiddenListServices}},
			want: []string{"syncing the cache of Services: kip's identity, a client certificate for system:node:kip in group system:nodes",
				"may not list services in all namespaces at ", "(403 Forbidden)", "Node authorizer"},
			never: []string{"timed out"},
		},
		{
			name:     "other: the server keeps failing",
			override: map[string]answer{routeListServices: {500, statusInternal}},
			want:     []string{"syncing the cache of Services: timed out after 1s (list services in all namespaces at ", "etcdserver: request timed out"},
			never:    append([]string{"cannot reach", "credentials"}, rbacHints...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeAPIServer(t, tt.override)
			api, client := connect(t, writeKubeconfig(t, srv.URL, serverCA(srv), nodeCertUser(t)))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			svcs := serviceenv.New(informers.NewSharedInformerFactory(client, 0), nil)
			err := api.syncServices(ctx, client, svcs, "kip", time.Second)
			checkErr(t, "syncServices", err, tt.want, srv.URL, tt.never)
		})
	}
}
