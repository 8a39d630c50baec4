package images

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"
)

const (
	// MetricsServerModule is metrics-server's Go module; its command is
	// MetricsServerModule + "/cmd/metrics-server".
	MetricsServerModule = "sigs.k8s.io/metrics-server"
	// MetricsServerVersion is the release BuildMetricsServer builds, from
	// the Go module proxy. v0.9.0 needs Go 1.26.4 or newer.
	MetricsServerVersion = "v0.9.0"
	// MetricsServerName is the short name PushMetricsServer pushes the
	// image as: kip-e2e/metrics-server.
	MetricsServerName = "metrics-server"
	// MetricsServerTag is the tag of the pushed image, upstream's
	// (registry.k8s.io/metrics-server/metrics-server:v0.9.0).
	MetricsServerTag = MetricsServerVersion
)

var metricsServer = proxyCommand{modbuild.Program{Name: MetricsServerName, Module: MetricsServerModule, Version: MetricsServerVersion,
	Pkg: MetricsServerModule + "/cmd/metrics-server", Cold: "about 2 to 4 minutes"}}

// BuildMetricsServer compiles MetricsServerVersion from the Go module
// proxy into <CacheDir>/<version>/bin/metrics-server (CacheDir defaults to
// ~/.cache/kip/metrics-server) and returns that path, as BuildCoreDNS
// does: cached by version and Go toolchain. A cold build took about two
// minutes on two cores with CoreDNS's modules already in the module cache.
func BuildMetricsServer(ctx context.Context, opts BuildOptions) (string, error) {
	return metricsServer.build(ctx, opts)
}

// metricsServerConfig exposes 10250/tcp, the port upstream's manifest
// serves on. The user is the pod's to set (upstream's manifest runs it as
// 1000).
func metricsServerConfig(c *v1.Config) {
	c.ExposedPorts = map[string]struct{}{"10250/tcp": {}}
}

// PushMetricsServer pushes busybox plus the metrics-server binary at path
// (BuildMetricsServer's) as /metrics-server, the entrypoint, to reg as
// kip-e2e/metrics-server:<MetricsServerTag>, built once per process and
// binary path.
func PushMetricsServer(ctx context.Context, reg *registry.Registry, path string) (Image, error) {
	return metricsServer.push(ctx, reg, path, MetricsServerTag, metricsServerConfig)
}
