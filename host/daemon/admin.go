package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/keptlogs"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/host/node"
)

// apiCheckTimeout bounds the readiness check's request to the API server.
const apiCheckTimeout = 5 * time.Second

// startAdmin makes kip's metrics (client-go's requests among them, from
// the first request on) and starts the admin server on them (unless
// admin.off). Run calls it first, before the node's identity, which the
// TLS bootstrap may take minutes to get: the server answers the
// Deployment's probes meanwhile. Its readiness checks are late checks,
// "not started" until Run sets them: "api" (the API server answers its
// /readyz, once kip has an identity), "plugin" and, with bootstrap,
// "node-certificate"; node-certificate is also a liveness check, which
// passes until set, so that /healthz is fine while kip waits for its
// certificate. /metrics, /cells and /debug/pprof/ answer only callers the
// cluster authorizes (admin.authorization: cluster) once Run has a client
// for the reviews (useClients), or anyone (none). It serves until ctx
// ends, in a standby as in the leader. A listen address in use is an
// error at once.
func startAdmin(ctx context.Context, cfg admin.Config, bootstrap bool, log *slog.Logger) (*observed, error) {
	m := metrics.New()
	m.RegisterClientGo()
	o := &observed{m: m, apiReady: &lateCheck{}, pluginReady: &lateCheck{}, nodeCertificate: &lateCheck{}}
	if cfg.Off {
		return o, nil
	}
	srv := admin.New(m, log)
	if cfg.Profiling {
		srv.EnableProfiling()
		who := "callers allowed to get /debug/pprof/*"
		if cfg.Authorization == admin.AuthorizationNone {
			who = "anyone who reaches it"
		}
		log.Warn("admin server serves runtime profiles (admin.profiling): "+who+" reads kip's memory and stacks", "path", admin.PathPprof)
	}
	if cfg.Authorization == admin.AuthorizationNone {
		srv.AllowAnyone()
		if !loopback(cfg.ListenAddress) {
			log.Warn("admin server serves /metrics and /cells without authorization (admin.authorization none) beyond loopback: anyone who reaches it lists every pod, instance and price",
				"address", cfg.ListenAddress)
		}
	}
	o.srv = srv
	srv.AddReadyCheck("api", o.apiReady.ready)
	srv.AddReadyCheck("plugin", o.pluginReady.ready)
	if bootstrap {
		srv.AddHealthCheck("node-certificate", o.nodeCertificate.live)
		srv.AddReadyCheck("node-certificate", o.nodeCertificate.ready)
	}
	lis, err := admin.Listen(cfg)
	if err != nil {
		return nil, err
	}
	o.adminAddr = lis.Addr().String()
	log.Info("admin server listening", "address", o.adminAddr)
	go func() {
		if err := srv.Serve(ctx, lis); err != nil {
			log.Error("admin server", "error", err)
		}
	}()
	return o, nil
}

// loopback: listenAddress's host is a loopback address or localhost.
func loopback(listenAddress string) bool {
	host, _, err := net.SplitHostPort(listenAddress)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Rate limits of the admin server's clients, each its own (clients).
const (
	// probeQPS and probeBurst: the readiness probe asks every few
	// seconds; more callers of /readyz wait or time out instead of
	// reaching the API server.
	probeQPS, probeBurst = 2, 5
	// reviewsQPS and reviewsBurst: Prometheus servers and kip cells are
	// reviewed once per cache lifetime (admin.ClusterAccess); unknown
	// tokens, each a TokenReview, are held to this rate.
	reviewsQPS, reviewsBurst = 10, 20
)

// clients are kip's Kubernetes clients, made from the node's identity,
// each with a rate limiter of its own: status (pods' status, the Node and
// its Lease, informers), events (node.EventClientConfig), probe (the
// readiness check "api") and reviews (the admin server's TokenReviews and
// SubjectAccessReviews). Nothing a caller of the admin port does spends
// the requests of status.
type clients struct {
	status, events, probe, reviews kubernetes.Interface
}

func newClients(base *rest.Config) (clients, error) {
	var c clients
	var err error
	if c.status, err = kubernetes.NewForConfig(node.ClientConfig(base)); err != nil {
		return clients{}, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	// Events go through a client of their own, as the kubelet's do
	// (node.EventClientConfig): a burst's events do not take pod status
	// writes' share of the rate limit.
	if c.events, err = kubernetes.NewForConfig(node.EventClientConfig(base)); err != nil {
		return clients{}, fmt.Errorf("creating the events' Kubernetes client: %w", err)
	}
	if c.probe, err = kubernetes.NewForConfig(ownLimits(base, "kip-readyz", probeQPS, probeBurst)); err != nil {
		return clients{}, fmt.Errorf("creating the readiness check's Kubernetes client: %w", err)
	}
	if c.reviews, err = kubernetes.NewForConfig(ownLimits(base, "kip-admin-auth", reviewsQPS, reviewsBurst)); err != nil {
		return clients{}, fmt.Errorf("creating the admin server's Kubernetes client: %w", err)
	}
	return c, nil
}

// ownLimits is a copy of base with a rate limiter of its own at qps and
// burst, named agent.
func ownLimits(base *rest.Config, agent string, qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(base)
	c.QPS, c.Burst, c.RateLimiter, c.UserAgent = qps, burst, nil, agent
	return c
}

// apiCheck is the readiness check "api": the API server answers its
// /readyz to client (clients.probe).
func apiCheck(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, apiCheckTimeout)
		defer cancel()
		if err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("the API server's /readyz: %w", err)
		}
		return nil
	}
}

// observed is what the rest of Run reports through: kip's metrics, the
// checks set once their subjects run (the API client's, made once kip has
// the node's identity; the plugin's, once the cell manager runs; the node
// certificate's, once the bootstrap got one) and the admin server (nil
// with admin.off) for checks of its own.
type observed struct {
	m               *metrics.Metrics
	apiReady        *lateCheck
	pluginReady     *lateCheck
	nodeCertificate *lateCheck
	srv             *admin.Server
	// adminAddr is where srv listens (its port, when admin.listenAddress
	// says 0).
	adminAddr string
	// keptLogsChanged wakes the /keptlogs long polls (serveKeptLogs);
	// nil without an admin server.
	keptLogsChanged *keptlogs.Changes
}

// useClients sets the checks and the reviews that need the API server,
// each on its own client: the readiness check "api" on cs.probe, and the
// admin server's TokenReviews and SubjectAccessReviews on cs.reviews
// (unless admin.off).
func (o *observed) useClients(cs clients) {
	o.apiReady.set(apiCheck(cs.probe))
	if o.srv != nil {
		o.srv.SetAccess(admin.ClusterAccess(cs.reviews))
	}
}

// addHealthCheck adds a /healthz (and /readyz) check, unless admin.off.
func (o *observed) addHealthCheck(name string, check func(*http.Request) error) {
	if o.srv != nil {
		o.srv.AddHealthCheck(name, check)
		o.srv.AddReadyCheck(name, check)
	}
}

// addReadyCheck adds a /readyz check, unless admin.off.
func (o *observed) addReadyCheck(name string, check func(*http.Request) error) {
	if o.srv != nil {
		o.srv.AddReadyCheck(name, check)
	}
}

// lateCheck is a check whose subject starts later than the server: as a
// readiness check (ready) it fails with "not started" until set; as a
// liveness check (live) it passes until set, since waiting for a subject
// is no reason to restart kip.
type lateCheck struct {
	check atomic.Pointer[func(context.Context) error]
}

func (l *lateCheck) set(check func(context.Context) error) { l.check.Store(&check) }

func (l *lateCheck) ready(r *http.Request) error {
	check := l.check.Load()
	if check == nil {
		return errors.New("not started")
	}
	return (*check)(r.Context())
}

func (l *lateCheck) live(r *http.Request) error {
	if l.check.Load() == nil {
		return nil
	}
	return l.ready(r)
}
