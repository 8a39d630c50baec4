package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Binary is one of Kip's programs, as make dist builds it.
type Binary struct {
	// Name is the executable's name: kip, kip-cell, kip-plugin-<name>.
	Name string
	// Module is the directory of its Go module, relative to the
	// repository: "." or "plugins/gce".
	Module string
	// Package is its main package, relative to Module: "./cmd/kip".
	Package string
	// VersionVar is the variable that -X sets to the version (make dist's
	// LDFLAGS_*).
	VersionVar string
	// GoWorkOff builds it with GOWORK=off, as the Makefile builds a module
	// outside go.work (plugins/gce).
	GoWorkOff bool
}

// Path is where the image holds b, without a leading slash: a plugin in
// the plugin directory, anything else in usr/local/bin.
func (b Binary) Path() string {
	if strings.HasPrefix(b.Name, "kip-plugin-") {
		return pluginsDir + "/" + b.Name
	}
	return binDir + "/" + b.Name
}

// Plugins are the plugins kip ships, in the order the kip image lists them.
var Plugins = []string{"local", "aws", "gce", "azure"}

// Binaries are the programs the images hold, with make dist's flags.
var Binaries = []Binary{
	{Name: "kip", Module: ".", Package: "./cmd/kip", VersionVar: "github.com/kipcell/kip/host/cli.Version"},
	{Name: "kip-cell", Module: ".", Package: "./cmd/kip-cell", VersionVar: "main.version"},
	{Name: "kip-plugin-local", Module: ".", Package: "./plugins/local/cmd/kip-plugin-local", VersionVar: "github.com/kipcell/kip/plugins/local.Version"},
	{Name: "kip-plugin-aws", Module: ".", Package: "./plugins/aws/cmd/kip-plugin-aws", VersionVar: "github.com/kipcell/kip/plugins/aws.Version"},
	{Name: "kip-plugin-gce", Module: "plugins/gce", Package: "./cmd/kip-plugin-gce", VersionVar: "github.com/kipcell/kip/plugins/gce.Version", GoWorkOff: true},
	{Name: "kip-plugin-azure", Module: ".", Package: "./plugins/azure/cmd/kip-plugin-azure", VersionVar: "github.com/kipcell/kip/plugins/azure.Version"},
}

// Image is one image: the binaries it adds to the base, the first being
// its entrypoint, and its default arguments.
type Image struct {
	Name     string
	Binaries []string
	Cmd      []string
}

// Images returns every image make images builds: kip with the plugins it
// ships and kip-cell (the local plugin's cells run it beside kip), kip-cell
// alone, and kip-plugin-<name> for each plugin alone.
func Images() []Image {
	kip := Image{Name: "kip", Binaries: []string{"kip", "kip-cell"}, Cmd: []string{"run", "--config", "/etc/kip/kip.yaml"}}
	imgs := []Image{kip, {Name: "kip-cell", Binaries: []string{"kip-cell"}}}
	for _, p := range Plugins {
		imgs[0].Binaries = append(imgs[0].Binaries, "kip-plugin-"+p)
		imgs = append(imgs, Image{Name: "kip-plugin-" + p, Binaries: []string{"kip-plugin-" + p}})
	}
	return imgs
}

// Compiler builds b for platform and returns the executable.
type Compiler func(ctx context.Context, b Binary, platform v1.Platform) ([]byte, error)

// Options configures Build.
type Options struct {
	// Images are the names of the images to build, of Images(); empty
	// means all.
	Images []string
	// Plugins are the plugins the kip image holds, of Plugins; empty
	// means all of them. A kip started from an image without a plugin
	// cannot load it (plugins list does not show it). The
	// kip-plugin-<name> images are chosen by Images, not by this.
	Plugins []string
	// Platforms are "os/arch" pairs: linux/amd64, linux/arm64. The index
	// lists them sorted, whatever the order here.
	Platforms []string
	// Version is the version stamped in the binaries and the labels.
	Version string
	// Revision is the commit the images are built from.
	Revision string
	// Created is the commit's time (SOURCE_DATE_EPOCH): every file's
	// modification time, the images' creation time and the created label.
	Created time.Time
	// Source is the repository's URL, the source label.
	Source string
	// CACertificates is the CA bundle copied into the base;
	// DefaultCACertificates when empty.
	CACertificates string
	// Compile builds a binary; GoBuild in RepoDir when nil.
	Compile Compiler
	// RepoDir is the repository's root, for GoBuild.
	RepoDir string
	// Compress gzips each layer; Gzip when nil.
	Compress Compressor
	// Log reports each binary built; slog.Default() when nil.
	Log *slog.Logger
}

// Built is one image built for every platform.
type Built struct {
	Name  string
	Index v1.ImageIndex
	// Files are the SHA-256 of each binary the image adds, by platform
	// and then by path in the image ("/usr/local/lib/kip/plugins/kip-plugin-aws"):
	// what plugin.sha256 pins.
	Files map[string]map[string]string
}

// Build builds the images of opts.Images for every platform of
// opts.Platforms, as OCI image indexes, in the order of Images(). Each
// binary is compiled and compressed once, and the layer that holds it is
// shared by every image that has it (a plugin's layer is the same in the
// kip image and in its own). Nothing depends on the machine, the time or
// the order of the options: the same commit and toolchain give the same
// digests.
func Build(ctx context.Context, opts Options) ([]Built, error) {
	if opts.Compress == nil {
		opts.Compress = Gzip
	}
	if opts.Compile == nil {
		opts.Compile = GoBuild(opts.RepoDir, opts.Version)
	}
	if opts.CACertificates == "" {
		opts.CACertificates = DefaultCACertificates
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	want, err := selectImages(opts.Images)
	if err != nil {
		return nil, err
	}
	if want, err = withPlugins(want, opts.Plugins); err != nil {
		return nil, err
	}
	platforms, err := parsePlatforms(opts.Platforms)
	if err != nil {
		return nil, err
	}
	base, err := baseLayer(opts.CACertificates, opts.Created, opts.Compress)
	if err != nil {
		return nil, err
	}
	layers, err := binaryLayers(ctx, opts, want, platforms)
	if err != nil {
		return nil, err
	}

	var out []Built
	for _, im := range want {
		b := Built{Name: im.Name, Files: map[string]map[string]string{}}
		var adds []mutate.IndexAddendum
		for _, p := range platforms {
			img, files, err := platformImage(im, p, base, layers, opts)
			if err != nil {
				return nil, fmt.Errorf("building image %s for %s: %w", im.Name, p, err)
			}
			b.Files[p.String()] = files
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		idx = mutate.AppendManifests(idx, adds...)
		b.Index = mutate.Annotations(idx, labels(im.Name, opts)).(v1.ImageIndex)
		out = append(out, b)
	}
	return out, nil
}

// selectImages returns the images of Images() named in names, all when
// names is empty; an unknown name is an error that lists the known ones.
func selectImages(names []string) ([]Image, error) {
	all := Images()
	if len(names) == 0 {
		return all, nil
	}
	var out []Image
	for _, im := range all {
		if slices.Contains(names, im.Name) {
			out = append(out, im)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(im Image) bool { return im.Name == n }) {
			var known []string
			for _, im := range all {
				known = append(known, im.Name)
			}
			return nil, fmt.Errorf("no image %q (the images: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// withPlugins returns imgs with the kip image holding only the plugins
// named in plugins (all when plugins is empty); an unknown name is an
// error that lists the known ones.
func withPlugins(imgs []Image, plugins []string) ([]Image, error) {
	if len(plugins) == 0 {
		return imgs, nil
	}
	for _, p := range plugins {
		if !slices.Contains(Plugins, p) {
			return nil, fmt.Errorf("no plugin %q (the plugins: %s)", p, strings.Join(Plugins, ", "))
		}
	}
	out := slices.Clone(imgs)
	for i, im := range out {
		if im.Name != "kip" {
			continue
		}
		im.Binaries = slices.DeleteFunc(slices.Clone(im.Binaries), func(b string) bool {
			name, ok := strings.CutPrefix(b, "kip-plugin-")
			return ok && !slices.Contains(plugins, name)
		})
		out[i] = im
	}
	return out, nil
}

// parsePlatforms parses "os/arch" pairs and sorts them, without duplicates.
func parsePlatforms(ss []string) ([]v1.Platform, error) {
	if len(ss) == 0 {
		return nil, errors.New("no platform")
	}
	var out []v1.Platform
	for _, s := range ss {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil || p.OS == "" || p.Architecture == "" || p.Variant != "" {
			return nil, fmt.Errorf("platform %q is not os/arch (linux/amd64, linux/arm64)", s)
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b v1.Platform) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(out, func(a, b v1.Platform) bool { return a.String() == b.String() }), nil
}

// layerKey names a binary built for a platform.
type layerKey struct{ binary, platform string }

// binaryLayer is one binary's layer and the SHA-256 of the binary.
type binaryLayer struct {
	layer  v1.Layer
	sha256 string
}

// binaryLayers compiles every binary the images need for every platform,
// one at a time (go build uses every core), and compresses each into its
// layer while the next compiles.
func binaryLayers(ctx context.Context, opts Options, imgs []Image, platforms []v1.Platform) (map[layerKey]binaryLayer, error) {
	var need []Binary
	for _, b := range Binaries {
		if slices.ContainsFunc(imgs, func(im Image) bool { return slices.Contains(im.Binaries, b.Name) }) {
			need = append(need, b)
		}
	}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		layers = map[layerKey]binaryLayer{}
		errs   []error
	)
	defer wg.Wait()
	for _, p := range platforms {
		for _, b := range need {
			bin, err := opts.Compile(ctx, b, p)
			if err != nil {
				return nil, fmt.Errorf("building %s for %s: %w", b.Name, p, err)
			}
			sum := sha256.Sum256(bin)
			opts.Log.Info("built", "binary", b.Name, "platform", p.String(), "bytes", len(bin), "sha256", hex.EncodeToString(sum[:]))
			wg.Go(func() {
				l, err := NewLayer([]File{{Name: b.Path(), Mode: 0o755, Body: bin}}, opts.Created, opts.Compress)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("building the layer of %s for %s: %w", b.Name, p, err))
					return
				}
				layers[layerKey{b.Name, p.String()}] = binaryLayer{l, hex.EncodeToString(sum[:])}
			})
		}
	}
	wg.Wait()
	return layers, errors.Join(errs...)
}

// platformImage assembles im for p: the base, then one layer per binary.
// It returns the image and the SHA-256 of each binary by absolute path.
func platformImage(im Image, p v1.Platform, base v1.Layer, layers map[layerKey]binaryLayer, opts Options) (v1.Image, map[string]string, error) {
	history := func(by string) v1.History {
		return v1.History{Created: v1.Time{Time: opts.Created}, CreatedBy: by}
	}
	adds := []mutate.Addendum{{
		Layer:   base,
		History: history("kip deploy/images: base (root and kip 65532, CA bundle from Debian's ca-certificates, nsswitch.conf, /tmp)"),
	}}
	files := map[string]string{}
	for _, name := range im.Binaries {
		b := binaryByName(name)
		l := layers[layerKey{name, p.String()}]
		files["/"+b.Path()] = l.sha256
		adds = append(adds, mutate.Addendum{
			Layer:   l.layer,
			History: history("kip deploy/images: go build " + b.Package + " (" + b.Module + ") as /" + b.Path()),
		})
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = v1.Time{Time: opts.Created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{"/" + binaryByName(im.Binaries[0]).Path()},
		Cmd:        im.Cmd,
		Env:        []string{Path},
		WorkingDir: "/",
		Labels:     labels(im.Name, opts),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, files, nil
}

// labels are the OCI labels (and index annotations) of image name.
func labels(name string, opts Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    name,
		"org.opencontainers.image.source":   opts.Source,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.created":  opts.Created.UTC().Format(time.RFC3339),
	}
}

func binaryByName(name string) Binary {
	i := slices.IndexFunc(Binaries, func(b Binary) bool { return b.Name == name })
	return Binaries[i]
}

// GoBuild returns the Compiler of release images: go build in repoDir's
// module of the binary, as make dist does (CGO_ENABLED=0, -trimpath, -X
// VersionVar=version, GOWORK=off where the Makefile has it), plus
// -buildid= so that the executable holds no build ID.
func GoBuild(repoDir, version string) Compiler {
	return func(ctx context.Context, b Binary, p v1.Platform) ([]byte, error) {
		tmp, err := os.MkdirTemp("", "kip-images-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		out := filepath.Join(tmp, b.Name)
		ldflags := "-X " + b.VersionVar + "=" + version + " -buildid="
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, b.Package) //nolint:gosec // G204: go build of a package of the fixed table
		cmd.Dir = filepath.Join(repoDir, b.Module)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		if b.GoWorkOff {
			cmd.Env = append(cmd.Env, "GOWORK=off")
		}
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build %s in %s: %w: %s", b.Package, cmd.Dir, err, strings.TrimSpace(stderr.String()))
		}
		bin, err := os.ReadFile(out) //nolint:gosec // G304: the file go build just wrote
		if err != nil {
			return nil, fmt.Errorf("reading the binary of %s: %w", b.Name, err)
		}
		return bin, nil
	}
}
