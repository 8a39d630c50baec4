package images

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"
)

const (
	// CoreDNSModule is CoreDNS's Go module. BuildCoreDNS builds the
	// coredns command from its packages with the plugins of coreDNSMain
	// compiled in, not its root package's every plugin of plugin.cfg.
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

// coreDNSMain is the coredns command as upstream's coredns.go is
// (coremain.Run), with the plugins of the Corefile kubeadm writes
// (deploy/coredns: errors, health, ready, kubernetes, prometheus, forward,
// cache, loop, reload, loadbalance) and hosts and log, which a test's
// Corefile uses or a reader adds. Upstream's root package compiles in
// every plugin of plugin.cfg: the cloud DNS ones (route53, azure,
// clouddns), etcd, dnstap and the like are 1.3 GB of its 1.6 GB of
// modules and half its build. A plugin a Corefile names that is not here
// fails CoreDNS's start ("unknown directive"). Its order does not matter:
// the directives run in plugin.cfg's order (dnsserver.Directives).
const coreDNSMain = `package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
`

// CoreDNSOptions configure BuildCoreDNS.
type CoreDNSOptions = BuildOptions

var coreDNS = proxyCommand{modbuild.Program{Name: CoreDNSName, Module: CoreDNSModule, Version: CoreDNSVersion, Main: coreDNSMain,
	Cold: "about 3 minutes"}}

// BuildCoreDNS compiles coreDNSMain against CoreDNSVersion from the Go
// module proxy (a throwaway module, GOWORK=off, CGO_ENABLED=0, -trimpath)
// into <CacheDir>/<version>/bin/coredns and returns that path. When the
// binary is there already, built by the same Go toolchain from the same
// main (a stamp records them), it returns at once. A cold build took 2 min
// 50 s on two cores (256 MB of modules fetched in 30 s, every package
// compiled in 2 min 20 s), so the tests that need CoreDNS are the
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
