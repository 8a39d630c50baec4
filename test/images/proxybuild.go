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
// pinned version, as a cluster add-on's image is.
type proxyCommand struct {
	// name is the binary's name, its cache directory's and, with the
	// version, the stamp's.
	name    string
	module  string
	version string
	// pkg is the command's package: module itself, or a package in it.
	pkg string
	// cold says how long a cold build takes, for the progress line.
	cold string
}

// build compiles c from the Go module proxy (a throwaway module,
// GOWORK=off, CGO_ENABLED=0, -trimpath) into
// <CacheDir>/<version>/bin/<name> and returns that path. When the binary
// is there already, built by the same Go toolchain (a stamp records both),
// it returns at once. The module's go directive must not ask for a newer
// Go than the one installed.
func (c proxyCommand) build(ctx context.Context, opts BuildOptions) (string, error) {
	if opts.CacheDir == "" {
		dir, err := modbuild.CacheDir(c.name)
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
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; %s %s needs it)", err, c.name, c.version)
	}
	dir := filepath.Join(opts.CacheDir, c.version)
	bin := filepath.Join(dir, "bin")
	out := filepath.Join(bin, c.name)
	stamp := fmt.Sprintf("%s=%s go=%s", c.name, c.version, goVersion)
	if modbuild.Current(bin, stamp, c.name) {
		return out, nil
	}

	modVersion := c.module + "@" + c.version
	mod, err := modbuild.GoMod(ctx, modVersion)
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", modVersion, err)
	}
	if err := modbuild.CheckGo(goVersion, c.name+" "+c.version, mod); err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	scratch := fmt.Sprintf("module local/kip-%s-build\n\ngo %s\n\nrequire %s %s\n", c.name, modbuild.GoDirective(mod), c.module, c.version)
	if err := modbuild.ScratchModule(src, []byte(scratch)); err != nil {
		return "", err
	}
	pkgVersion := c.pkg + "@" + c.version
	fmt.Fprintf(opts.Log, "images: resolving %s\n", pkgVersion)
	if err := modbuild.Run(ctx, src, opts.Log, "get", pkgVersion); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", bin, err)
	}
	start := time.Now()
	fmt.Fprintf(opts.Log, "images: building %s %s into %s (cold: %s; cached afterwards)\n", c.name, c.version, bin, c.cold)
	// Built beside the binary and renamed over it, so that a process that
	// finds the stamp of an earlier build never runs half a file.
	tmp := out + ".new"
	if err := modbuild.Run(ctx, src, opts.Log, "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, c.pkg); err != nil {
		return "", fmt.Errorf("building %s %s: %w", c.name, c.version, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing the %s binary: %w", c.name, err)
	}
	fmt.Fprintf(opts.Log, "images: built %s in %s\n", c.name, time.Since(start).Round(time.Second))
	if err := modbuild.WriteStamp(bin, stamp); err != nil {
		return "", err
	}
	return out, nil
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
		return nil, fmt.Errorf("reading %s: %w", c.name, err)
	}
	layer, err := newLayer([]kipimages.File{{Name: c.name, Mode: 0o755, Body: bin}})
	if err != nil {
		return nil, fmt.Errorf("building the %s layer: %w", c.name, err)
	}
	img, err := withEntrypoint(bb, layer, fmt.Sprintf("kip test/images: %s %s from the Go module proxy", c.name, c.version), "/"+c.name, edit)
	if err != nil {
		return nil, fmt.Errorf("building the %s image: %w", c.name, err)
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
	v, _ := builtImages.LoadOrStore(c.name+"\x00"+path, &builtImage{})
	e := v.(*builtImage)
	e.once.Do(func() { e.img, e.err = c.imageFrom(path, edit) })
	if e.err != nil {
		return Image{}, e.err
	}
	return push(ctx, reg, c.name, tag, e.img)
}
