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

// startAdmin starts the admin server (unless admin.off) on m's registry
// and cells, with the readiness check "api" (the API server answers its
// /readyz); it serves until ctx ends, in a standby as in the leader. A
// listen address in use is an error at once.
func startAdmin(ctx context.Context, cfg admin.Config, m *metrics.Metrics, client kubernetes.Interface, log *slog.Logger) (*admin.Server, error) {
	srv := admin.New(m, log)
	if cfg.Off {
		return srv, nil
	}
	srv.AddReadyCheck("api", func(r *http.Request) error {
		rctx, cancel := context.WithTimeout(r.Context(), apiCheckTimeout)
		defer cancel()
		if err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).Error(); err != nil {
			return fmt.Errorf("the API server's /readyz: %w", err)
		}
		return nil
	})
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
	return srv, nil
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
