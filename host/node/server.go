package node

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// decisionAllow is the authorizer's Allow decision, taken from an
// always-allow authorizer: host/node may not import k8s.io/apiserver
// directly (it is only an indirect requirement of the module).
var decisionAllow, _, _ = nodeutil.NoAuth().Authorize(context.Background(), nil)

// x509User is a user authenticated by a verified client certificate, named
// like the API server and the kubelet name them: CN is the user, O the
// groups. It satisfies k8s.io/apiserver's user.Info.
type x509User struct {
	name   string
	groups []string
}

func (u x509User) GetName() string               { return u.name }
func (u x509User) GetUID() string                { return "" }
func (u x509User) GetGroups() []string           { return u.groups }
func (u x509User) GetExtra() map[string][]string { return nil }

// withAuth authenticates and authorizes every request to the kubelet API
// the way the kubelet does in webhook mode:
//   - a client certificate the TLS handshake verified against the client CA
//     (the API server's --kubelet-client-certificate) names the user;
//   - otherwise a bearer token is checked with a TokenReview;
//   - nothing else is anonymous: 401;
//   - the user is then authorized with a SubjectAccessReview on
//     nodes/<name> with subresource proxy, log, stats or metrics and a verb
//     from the HTTP method: 403 when denied.
//
// Tokens go through virtual-kubelet's nodeutil.WebhookAuth unchanged;
// certificates are handled here because WebhookAuth's own x509 option needs
// a k8s.io/apiserver type (see decisionAllow). Both share its cached
// SubjectAccessReview authorizer.
func withAuth(auth nodeutil.Auth, next http.Handler, log *slog.Logger) http.Handler {
	byToken := nodeutil.WithAuth(auth, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			byToken.ServeHTTP(w, r)
			return
		}
		leaf := r.TLS.VerifiedChains[0][0]
		if leaf.Subject.CommonName == "" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		u := x509User{name: leaf.Subject.CommonName, groups: leaf.Subject.Organization}
		decision, reason, err := auth.Authorize(r.Context(), auth.GetRequestAttributes(u, r))
		switch {
		case err != nil:
			log.Error("authorizing kubelet API request", "user", u.name, "path", r.URL.Path, "error", err)
			http.Error(w, "authorization failed", http.StatusInternalServerError)
		case decision != decisionAllow:
			log.Debug("kubelet API request forbidden", "user", u.name, "path", r.URL.Path, "reason", reason)
			http.Error(w, "Forbidden", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// routes is the kubelet API: virtual-kubelet's pod routes (pods,
// runningpods, containerLogs, exec, attach, portForward) backed by Pods,
// /stats/summary and /metrics/resource when Pods is a StatsProvider
// (stats), and 501 for the other stats and metrics paths, which a
// virtual node does not have (cAdvisor's, probes').
func routes(pods Pods, podLister corev1listers.PodLister, stats statsRoutes) http.Handler {
	mux := http.NewServeMux()
	notImplemented := http.HandlerFunc(api.NotImplemented)
	for _, p := range []string{"/stats", "/stats/", "/metrics", "/metrics/"} {
		mux.Handle(p, notImplemented)
	}
	if sp, ok := pods.(StatsProvider); ok {
		stats.stats = sp
		mux.HandleFunc(summaryPath, stats.serveSummary)
		mux.HandleFunc(summaryPath+"/", stats.serveSummary)
		mux.HandleFunc(metricsResourcePath, stats.serveMetricsResource)
		mux.HandleFunc(metricsResourcePath+"/", stats.serveMetricsResource)
	}
	api.AttachPodRoutes(api.PodHandlerConfig{
		RunInContainer:    pods.RunInContainer,
		AttachToContainer: pods.AttachToContainer,
		PortForward:       pods.PortForward,
		GetContainerLogs:  pods.GetContainerLogs,
		GetPods:           pods.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) {
			return podLister.List(labels.Everything())
		},
		// The kubelet's defaults (streamingConnectionIdleTimeout 4h).
		StreamIdleTimeout:     streamIdleTimeout,
		StreamCreationTimeout: streamCreationTimeout,
	}, mux, true)
	return mux
}

// serverTLS is the kubelet API's TLS configuration: TLS 1.2+, the serving
// certificate, and client certificates verified against the client CA
// when one is configured (optional, so bearer tokens still work).
func serverTLS(cert *atomic.Pointer[tls.Certificate], cfg Config) (*tls.Config, error) {
	t := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: nodeutil.DefaultServerCiphers(),
		// The current one: a self-signed certificate follows the node's
		// address (Node.refreshAddress).
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil },
		ClientAuth:     tls.NoClientCert,
		// HTTP/1.1 only: exec, attach and port-forward upgrade the connection.
		NextProtos: []string{"http/1.1"},
	}
	if cfg.ClientCAFile != "" {
		pool, err := clientCAs(cfg.ClientCAFile)
		if err != nil {
			return nil, err
		}
		t.ClientCAs = pool
		t.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return t, nil
}
