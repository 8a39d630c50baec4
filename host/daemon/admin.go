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
// admin.off), with the readiness checks "api" (the API server answers its
// /readyz) and "plugin" (the returned check, "not started" until set). It
// serves until ctx ends, in a standby as in the leader: Run calls it
// first, right after the API client is made. A listen address in use is
// an error at once.
func startAdmin(ctx context.Context, cfg admin.Config, client kubernetes.Interface, log *slog.Logger) (*observed, error) {
	m := metrics.New()
	m.RegisterClientGo()
	pluginReady := &lateCheck{}
	o := &observed{m: m, pluginReady: pluginReady}
	if cfg.Off {
		return o, nil
	}
	srv := admin.New(m, log)
	o.srv = srv
	srv.AddReadyCheck("api", func(r *http.Request) error {
		rctx, cancel := context.WithTimeout(r.Context(), apiCheckTimeout)
		defer cancel()
		if err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).Error(); err != nil {
			return fmt.Errorf("the API server's /readyz: %w", err)
		}
		return nil
	})
	srv.AddReadyCheck("plugin", pluginReady.run)
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

// observed is what the rest of Run reports through: kip's metrics, the
// plugin's readiness (set once the cell manager runs) and the admin
// server (nil with admin.off) for checks of its own.
type observed struct {
	m           *metrics.Metrics
	pluginReady *lateCheck
	srv         *admin.Server
}

// addHealthCheck adds a /healthz (and /readyz) check, unless admin.off.
func (o *observed) addHealthCheck(name string, check func(*http.Request) error) {
	if o.srv != nil {
		o.srv.AddHealthCheck(name, check)
		o.srv.AddReadyCheck(name, check)
	}
}

// lateCheck is a check whose subject starts later than the server: it
// fails with "not started" until set.
type lateCheck struct {
	check atomic.Pointer[func(context.Context) error]
}

func (l *lateCheck) set(check func(context.Context) error) { l.check.Store(&check) }

func (l *lateCheck) run(r *http.Request) error {
	check := l.check.Load()
	if check == nil {
		return errors.New("not started")
	}
	return (*check)(r.Context())
}
