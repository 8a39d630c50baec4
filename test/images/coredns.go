package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

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
type CoreDNSOptions struct {
	// CacheDir holds one directory per CoreDNS version; empty means
	// $XDG_CACHE_HOME/kip/coredns (~/.cache/kip/coredns).
	CacheDir string
	// Log receives progress lines and the go command's output; nil
	// discards them.
	Log io.Writer
}

// BuildCoreDNS compiles CoreDNSVersion from the Go module proxy (a
// throwaway module, GOWORK=off, CGO_ENABLED=0, -trimpath) into
// <CacheDir>/<version>/bin/coredns and returns that path. When the binary
// is there already, built by the same Go toolchain (a stamp records both),
// it returns at once. A cold build took 2 min 20 s on two cores (modules
// downloaded and every package compiled; it fetches about 1.6 GB of
// modules into the module cache), so the tests that need CoreDNS are the
// end-to-end tests, not make test.
func BuildCoreDNS(ctx context.Context, opts CoreDNSOptions) (string, error) {
	if opts.CacheDir == "" {
		dir, err := modbuild.CacheDir("coredns")
		if err != nil {
			return "", err
		}
		opts.CacheDir = dir
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	goVersion, err := modbuild.GoVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; CoreDNS %s needs it)", err, CoreDNSVersion)
	}
	dir := filepath.Join(opts.CacheDir, CoreDNSVersion)
	bin := filepath.Join(dir, "bin")
	out := filepath.Join(bin, "coredns")
	stamp := fmt.Sprintf("coredns=%s go=%s", CoreDNSVersion, goVersion)
	if modbuild.Current(bin, stamp, "coredns") {
		return out, nil
	}

	modVersion := CoreDNSModule + "@" + CoreDNSVersion
	mod, err := modbuild.GoMod(ctx, modVersion)
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", modVersion, err)
	}
	if err := modbuild.CheckGo(goVersion, "coredns "+CoreDNSVersion, mod); err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	scratch := fmt.Sprintf("module local/kip-coredns-build\n\ngo %s\n\nrequire %s %s\n", modbuild.GoDirective(mod), CoreDNSModule, CoreDNSVersion)
	if err := modbuild.ScratchModule(src, []byte(scratch)); err != nil {
		return "", err
	}
	fmt.Fprintf(opts.Log, "images: resolving %s\n", modVersion)
	if err := modbuild.Run(ctx, src, opts.Log, "get", modVersion); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", bin, err)
	}
	start := time.Now()
	fmt.Fprintf(opts.Log, "images: building CoreDNS %s into %s (cold: about 2 to 3 minutes; cached afterwards)\n", CoreDNSVersion, bin)
	// Built beside the binary and renamed over it, so that a process that
	// finds the stamp of an earlier build never runs half a file.
	tmp := out + ".new"
	if err := modbuild.Run(ctx, src, opts.Log, "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, CoreDNSModule); err != nil {
		return "", fmt.Errorf("building CoreDNS %s: %w", CoreDNSVersion, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing the CoreDNS binary: %w", err)
	}
	fmt.Fprintf(opts.Log, "images: built CoreDNS in %s\n", time.Since(start).Round(time.Second))
	if err := modbuild.WriteStamp(bin, stamp); err != nil {
		return "", err
	}
	return out, nil
}

// CoreDNSFrom returns the CoreDNS image: Busybox plus one layer holding
// the coredns binary at path as /coredns, with Entrypoint ["/coredns"] and
// no Cmd, exposing 53/udp and 53/tcp, as upstream's image does (a pod
// passes -conf). The busybox below it gives the pod a shell for kubectl
// exec. It is not cached.
func CoreDNSFrom(path string) (v1.Image, error) {
	bb, err := Busybox()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path) //nolint:gosec // G703: path is the CoreDNS binary BuildCoreDNS returned; reading it is the point
	if err != nil {
		return nil, fmt.Errorf("reading CoreDNS: %w", err)
	}
	layer, err := newLayer([]file{{name: "coredns", mode: 0o755, body: bin}})
	if err != nil {
		return nil, fmt.Errorf("building the CoreDNS layer: %w", err)
	}
	img, err := withEntrypoint(bb, layer, "kip test/images: coredns "+CoreDNSVersion+" from the Go module proxy", "/coredns",
		func(c *v1.Config) {
			c.ExposedPorts = map[string]struct{}{"53/tcp": {}, "53/udp": {}}
		})
	if err != nil {
		return nil, fmt.Errorf("building the CoreDNS image: %w", err)
	}
	return img, nil
}

type corednsEntry struct {
	once sync.Once
	img  v1.Image
	err  error
}

var corednsCache sync.Map // binary path -> *corednsEntry

// PushCoreDNS pushes the image of the CoreDNS binary at path (BuildCoreDNS's)
// to reg as kip-e2e/coredns:<CoreDNSTag>, as PushAll pushes the others. The
// image is built once per process and binary path: its layer is about 30
// MB compressed.
func PushCoreDNS(ctx context.Context, reg *registry.Registry, path string) (Image, error) {
	v, _ := corednsCache.LoadOrStore(path, &corednsEntry{})
	e := v.(*corednsEntry)
	e.once.Do(func() { e.img, e.err = CoreDNSFrom(path) })
	if e.err != nil {
		return Image{}, e.err
	}
	return push(ctx, reg, CoreDNSName, CoreDNSTag, e.img)
}
