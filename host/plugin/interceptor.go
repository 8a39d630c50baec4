package plugin

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/kipcell/kip/pluginapi"
)

// CallObserver is told of every unary call kip makes to the plugin process:
// the RPC's method name (Launch, Describe, ...), its outcome (Outcome) and
// how long it took. host/metrics' Metrics is one (kip_plugin_calls_total,
// kip_plugin_call_seconds).
type CallObserver interface {
	PluginCall(method, outcome string, d time.Duration)
}

// UnaryInterceptor is a gRPC client interceptor that tells obs of every
// call on the connection to the plugin. Each gRPC call is one: a call the
// Supervisor sends again to a restarted process counts twice. The event
// stream (WatchEvents) is no call and is not counted.
func UnaryInterceptor(obs CallObserver) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		obs.PluginCall(methodName(method), Outcome(pluginapi.ErrorFromStatus(err)), time.Since(start))
		return err
	}
}

// methodName is the RPC's name in a full gRPC method
// ("/kip.plugin.v1.Provider/Launch": "Launch").
func methodName(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}

// Outcome names a plugin call's result by its pluginapi error kind: "ok",
// "not_found", "insufficient_capacity", "quota_exceeded", "throttled",
// "invalid_config", "unsupported", "not_configured", "unreachable" (the
// plugin process did not answer), "transient", "canceled",
// "deadline_exceeded", or "other" (a PluginError, a kind this version does
// not know).
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case pluginapi.IsNotFound(err):
		return "not_found"
	case pluginapi.IsInsufficientCapacity(err):
		return "insufficient_capacity"
	case pluginapi.IsQuotaExceeded(err):
		return "quota_exceeded"
	case pluginapi.IsThrottled(err):
		return "throttled"
	case pluginapi.IsInvalidConfig(err):
		return "invalid_config"
	case pluginapi.IsUnsupported(err):
		return "unsupported"
	case pluginapi.IsNotConfigured(err):
		return "not_configured"
	case pluginapi.IsUnreachable(err):
		return "unreachable"
	case pluginapi.IsTransient(err):
		return "transient"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	default:
		return "other"
	}
}
