package images

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"
)

const (
	// CoreDNSModule is CoreDNS's Go module. Its root package is the
	// coredns command with every plugin of its plugin.cfg compiled in
	// (kubernetes, forward, cache, errors, health, ready, loop, reload,
	// loadbalance, hosts, file, ...), as in upstream's image.
	CoreDNSModule = "github.com/coredns/coredns"
	// CoreDNSVersion is the CoreDNS release BuildCoreDNS builds, from the
	// Go module proxy. v1.15.0 needs Go 1.26.0 or newer.
	CoreDNSVersion = "v1.15.0"
	// CoreDNSName is the short name PushCoreDNS pushes the image as:
	// kip-e2e/coredns.
	CoreDNSName = "coredns"
	// CoreDNSTag is the tag of the pushed image: the version without its
	// v, as upstream tags coredns/coredns.
	CoreDNSTag = "1.15.0"
)

// CoreDNSOptions configure BuildCoreDNS.
type CoreDNSOptions = BuildOptions

var coreDNS = proxyCommand{modbuild.Program{Name: CoreDNSName, Module: CoreDNSModule, Version: CoreDNSVersion, Pkg: CoreDNSModule,
	Cold: "about 2 to 3 minutes"}}

// BuildCoreDNS compiles CoreDNSVersion from the Go module proxy (a
// throwaway module, GOWORK=off, CGO_ENABLED=0, -trimpath) into
// <CacheDir>/<version>/bin/coredns and returns that path. When the binary
// is there already, built by the same Go toolchain (a stamp records both),
// it returns at once. A cold build took 2 min 20 s on two cores (modules
// downloaded and every package compiled; it fetches about 1.6 GB of
// modules into the module cache), so the tests that need CoreDNS are the
// end-to-end tests, not make test.
func BuildCoreDNS(ctx context.Context, opts CoreDNSOptions) (string, error) {
	return coreDNS.build(ctx, opts)
}

// coreDNSConfig exposes 53/udp and 53/tcp, as upstream's image does.
func coreDNSConfig(c *v1.Config) {
	c.ExposedPorts = map[string]struct{}{"53/tcp": {}, "53/udp": {}}
}

// CoreDNSFrom returns the CoreDNS image: Busybox plus one layer holding
// the coredns binary at path as /coredns, with Entrypoint ["/coredns"] and
// no Cmd, exposing 53/udp and 53/tcp, as upstream's image does (a pod
// passes -conf). The busybox below it gives the pod a shell for kubectl
// exec. It is not cached.
func CoreDNSFrom(path string) (v1.Image, error) {
	return coreDNS.imageFrom(path, coreDNSConfig)
}

// PushCoreDNS pushes the image of the CoreDNS binary at path (BuildCoreDNS's)
// to reg as kip-e2e/coredns:<CoreDNSTag>, as PushAll pushes the others. The
// image is built once per process and binary path: its layer is about 30
// MB compressed.
func PushCoreDNS(ctx context.Context, reg *registry.Registry, path string) (Image, error) {
	return coreDNS.push(ctx, reg, path, CoreDNSTag, coreDNSConfig)
}
