package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/metrics"
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
// certificate. It serves until ctx ends, in a standby as in the leader. A
// listen address in use is an error at once.
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
		log.Warn("admin server serves runtime profiles (admin.profiling): anyone who reaches it reads kip's memory and stacks", "path", admin.PathPprof)
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
	log.Info("admin server listening", "address", lis.Addr().String())
	go func() {
		if err := srv.Serve(ctx, lis); err != nil {
			log.Error("admin server", "error", err)
		}
	}()
	return o, nil
}

// apiCheck is the readiness check "api": the API server answers its
// /readyz to client.
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
}

// addHealthCheck adds a /healthz (and /readyz) check, unless admin.off.
func (o *observed) addHealthCheck(name string, check func(*http.Request) error) {
	if o.srv != nil {
		o.srv.AddHealthCheck(name, check)
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
