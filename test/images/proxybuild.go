package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kipcell/kip/test/modbuild"
	"github.com/kipcell/kip/test/registry"

	kipimages "github.com/kipcell/kip/deploy/images"
)

// BuildOptions configure BuildCoreDNS and BuildMetricsServer.
type BuildOptions struct {
	// CacheDir holds one directory per version; empty means
	// $XDG_CACHE_HOME/kip/<name> (~/.cache/kip/coredns, ...).
	CacheDir string
	// Log receives progress lines and the go command's output; nil
	// discards them.
	Log io.Writer
}

// proxyCommand is a Go command built from the Go module proxy at a
// pinned version (modbuild.Program), as a cluster add-on's image is.
type proxyCommand struct{ modbuild.Program }

// build compiles c from the Go module proxy into
// <CacheDir>/<version>/bin/<name> and returns that path (modbuild's
// Program.Build: cached by version and Go toolchain).
func (c proxyCommand) build(ctx context.Context, opts BuildOptions) (string, error) {
	return c.Build(ctx, opts.CacheDir, opts.Log)
}

// imageFrom returns Busybox plus one layer holding the binary at path as
// /<name>, with Entrypoint ["/<name>"] and no Cmd, edited by edit (nil:
// not). The busybox below it gives the pod a shell for kubectl exec.
func (c proxyCommand) imageFrom(path string, edit func(*v1.Config)) (v1.Image, error) {
	bb, err := Busybox()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path) //nolint:gosec // G703: path is the binary build returned; reading it is the point
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.Name, err)
	}
	layer, err := newLayer([]kipimages.File{{Name: c.Name, Mode: 0o755, Body: bin}})
	if err != nil {
		return nil, fmt.Errorf("building the %s layer: %w", c.Name, err)
	}
	img, err := withEntrypoint(bb, layer, fmt.Sprintf("kip test/images: %s %s from the Go module proxy", c.Name, c.Version), "/"+c.Name, edit)
	if err != nil {
		return nil, fmt.Errorf("building the %s image: %w", c.Name, err)
	}
	return img, nil
}

type builtImage struct {
	once sync.Once
	img  v1.Image
	err  error
}

var builtImages sync.Map // name + "\x00" + binary path -> *builtImage

// push pushes the image of the binary at path (imageFrom's) to reg as
// kip-e2e/<name>:<tag>, as PushAll pushes the others. The image is built
// once per process and binary path: such layers are tens of MB.
func (c proxyCommand) push(ctx context.Context, reg *registry.Registry, path, tag string, edit func(*v1.Config)) (Image, error) {
	v, _ := builtImages.LoadOrStore(c.Name+"\x00"+path, &builtImage{})
	e := v.(*builtImage)
	e.once.Do(func() { e.img, e.err = c.imageFrom(path, edit) })
	if e.err != nil {
		return Image{}, e.err
	}
	return push(ctx, reg, c.Name, tag, e.img)
}

// Resolve downloads and resolves the modules of CoreDNS's and
// metrics-server's builds in their default cache directories without
// compiling them (modbuild's Program.Resolve): make check runs it ahead,
// while it compiles Kip (kip-prefetch). A build that is current is left
// alone. Progress lines go to log (nil: discarded).
func Resolve(ctx context.Context, log io.Writer) error {
	for _, c := range []proxyCommand{coreDNS, metricsServer} {
		if err := c.Resolve(ctx, "", log); err != nil {
			return fmt.Errorf("resolving %s's modules: %w", c.Name, err)
		}
	}
	return nil
}
