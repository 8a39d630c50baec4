package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// klog is the process's, and every goroutine that logs through it reads
// its logger without a lock: client-go's, and gRPC's (k8s.io/apiserver's
// etcd3 package makes klog gRPC's logger), of an earlier Run too, whose
// connections may still be closing. Setting klog's logger at each Run
// raced with them (seen in host/cli's tests). So klog gets one logger,
// once, at start-up, which forwards each record to klogTarget, and a Run
// only swaps klogTarget (bridgeKlog).
var klogTarget atomic.Pointer[slog.Logger]

func init() {
	klog.SetSlogLogger(slog.New(forwardHandler{}))
}

// bridgeKlog sends klog's output (client-go's leader election,
// certificate manager and informers log through it) to log, as
// structured records with component client-go, instead of klog's own
// lines on stderr. klog is the process's: the last call wins.
func bridgeKlog(log *slog.Logger) {
	klogTarget.Store(log.With("component", "client-go"))
}

// forwardHandler hands each record to the handler of klogTarget's logger
// (slog's default before any Run) at the time it is logged, with the
// attributes and groups that were added to it on the way.
type forwardHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (h forwardHandler) target() slog.Handler {
	log := klogTarget.Load()
	if log == nil {
		log = slog.Default()
	}
	t := log.Handler()
	for _, w := range h.with {
		t = w(t)
	}
	return t
}

func (h forwardHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.target().Enabled(ctx, l)
}

func (h forwardHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h forwardHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return forwardHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })}
}

func (h forwardHandler) WithGroup(name string) slog.Handler {
	return forwardHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithGroup(name) })}
}
