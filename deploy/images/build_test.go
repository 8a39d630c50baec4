package images_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kipcell/kip/deploy/images"
	"github.com/kipcell/kip/test/registry"
)

var commitTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// standIn compiles nothing: each binary is a line naming it and its
// platform, so the layout of every image can be checked for both
// platforms in a second (the real binaries are TestKipImagesCommand's).
func standIn(_ context.Context, b images.Binary, p v1.Platform) ([]byte, error) {
	return []byte(standInBody(b.Name, p.String())), nil
}

func standInBody(binary, platform string) string {
	return "stand-in " + binary + " for " + platform + "\n"
}

func testOptions() images.Options {
	return images.Options{
		Platforms: []string{"linux/amd64", "linux/arm64"},
		Version:   "v9.8.7",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Created:   commitTime,
		Source:    "https://github.com/kipcell/kip",
		Compile:   standIn,
		Compress:  images.GzipFast,
	}
}

func startRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	reg, err := registry.Start(t.Context(), registry.Options{})
	if err != nil {
		t.Fatalf("starting registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

func buildAndPush(t *testing.T, opts images.Options, reg *registry.Registry, tag string) map[string]images.Pushed {
	t.Helper()
	built, err := images.Build(t.Context(), opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	pushed, err := images.Push(t.Context(), built, images.PushOptions{Registry: reg.LocalHost() + "/kip", Tag: tag})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	out := map[string]images.Pushed{}
	for _, p := range pushed {
		out[p.Name] = p
	}
	return out
}

// TestBuildLayout pushes every image, for both platforms, to the loopback
// registry and reads each back: the platforms, the config (user 65532,
// entrypoint, arguments, labels, times) and the files.
func TestBuildLayout(t *testing.T) {
	reg := startRegistry(t)
	pushed := buildAndPush(t, testOptions(), reg, "t1")
	ca, err := os.ReadFile(images.DefaultCACertificates)
	if err != nil {
		t.Fatalf("the build machine's CA bundle: %v (make deps installs ca-certificates)", err)
	}

	type want struct {
		entrypoint string
		cmd        []string
		binaries   []string // absolute paths of the binaries the image adds
	}
	plugins := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, "/usr/local/lib/kip/plugins/kip-plugin-"+n)
		}
		return out
	}
	wants := map[string]want{
		"kip": {"/usr/local/bin/kip", []string{"run", "--config", "/etc/kip/kip.yaml"},
			append([]string{"/usr/local/bin/kip", "/usr/local/bin/kip-cell"}, plugins("local", "aws", "gce", "azure")...)},
		"kip-cell":         {"/usr/local/bin/kip-cell", nil, []string{"/usr/local/bin/kip-cell"}},
		"kip-plugin-local": {plugins("local")[0], nil, plugins("local")},
		"kip-plugin-aws":   {plugins("aws")[0], nil, plugins("aws")},
		"kip-plugin-gce":   {plugins("gce")[0], nil, plugins("gce")},
		"kip-plugin-azure": {plugins("azure")[0], nil, plugins("azure")},
	}
	if len(pushed) != len(wants) {
		t.Errorf("pushed %d images, want %d", len(pushed), len(wants))
	}
	// layerOf[path@platform] is the digest of the layer holding a binary,
	// which the kip image and a plugin's own image share.
	layerOf := map[string]v1.Hash{}
	for n, w := range wants {
		t.Run(n, func(t *testing.T) {
			p, ok := pushed[n]
			if !ok {
				t.Fatalf("image %s not pushed", n)
			}
			if want := reg.LocalHost() + "/kip/" + n + ":t1"; p.Ref != want {
				t.Errorf("Ref = %s, want %s", p.Ref, want)
			}
			ref, err := name.ParseReference(p.DigestRef())
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(ref, remote.WithContext(t.Context()))
			if err != nil {
				t.Fatalf("reading the index back: %v", err)
			}
			im, _ := idx.IndexManifest()
			var platforms []string
			for _, m := range im.Manifests {
				platforms = append(platforms, m.Platform.String())
			}
			if d := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); d != "" {
				t.Errorf("index platforms (-want +got):\n%s", d)
			}
			if got := im.Annotations["org.opencontainers.image.revision"]; got != testOptions().Revision {
				t.Errorf("index revision annotation %q", got)
			}
			for _, m := range im.Manifests {
				img, err := idx.Image(m.Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, img, *m.Platform, n, w.entrypoint, w.cmd, w.binaries, ca)
				layers, _ := img.Layers()
				for i, path := range w.binaries {
					d, _ := layers[i+1].Digest()
					k := path + "@" + m.Platform.String()
					if prev, ok := layerOf[k]; ok && prev != d {
						t.Errorf("%s's layer is %s here and %s in another image: not shared", k, d, prev)
					}
					layerOf[k] = d
				}
			}
		})
	}
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform, n, entrypoint string, cmd, binaries []string, ca []byte) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config platform %s/%s", p, cf.OS, cf.Architecture)
	}
	if !cf.Created.Equal(commitTime) {
		t.Errorf("%s: created %v, want the commit time %v", p, cf.Created.Time, commitTime)
	}
	wantCfg := v1.Config{
		User:       "65532:65532",
		Entrypoint: []string{entrypoint},
		Cmd:        cmd,
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    n,
			"org.opencontainers.image.source":   "https://github.com/kipcell/kip",
			"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
			"org.opencontainers.image.version":  "v9.8.7",
			"org.opencontainers.image.created":  "2026-03-04T05:06:07Z",
		},
	}
	if d := cmp.Diff(wantCfg, cf.Config); d != "" {
		t.Errorf("%s: config (-want +got):\n%s", p, d)
	}
	for _, h := range cf.History {
		if !h.Created.Equal(commitTime) {
			t.Errorf("%s: history %q created %v", p, h.CreatedBy, h.Created.Time)
		}
	}

	files := imageFiles(t, img)
	for path, f := range files {
		if !f.modTime.Equal(commitTime) {
			t.Errorf("%s: %s modified %v, want the commit time", p, path, f.modTime)
		}
	}
	wantFiles := map[string]file{
		"/etc/passwd":                        {tar.TypeReg, 0o644, 0, 0, "root:x:0:0:root:/root:/sbin/nologin\nkip:x:65532:65532:kip:/home/kip:/sbin/nologin\n", commitTime},
		"/etc/group":                         {tar.TypeReg, 0o644, 0, 0, "root:x:0:\nkip:x:65532:\n", commitTime},
		"/etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0, string(ca), commitTime},
		"/tmp":                               {tar.TypeDir, 0o1777, 0, 0, "", commitTime},
		"/home/kip":                          {tar.TypeDir, 0o700, 65532, 65532, "", commitTime},
		"/root":                              {tar.TypeDir, 0o700, 0, 0, "", commitTime},
		"/usr/local/lib/kip/plugins":         {tar.TypeDir, 0o755, 0, 0, "", commitTime},
	}
	for _, b := range binaries {
		wantFiles[b] = file{tar.TypeReg, 0o755, 0, 0, standInBody(b[strings.LastIndexByte(b, '/')+1:], p.String()), commitTime}
	}
	for path, w := range wantFiles {
		if got, ok := files[path]; !ok {
			t.Errorf("%s: no %s", p, path)
		} else if got != w {
			t.Errorf("%s: %s is %+v, want %+v", p, path, got, w)
		}
	}
	if ns := files["/etc/nsswitch.conf"].body; !strings.Contains(ns, "hosts: files dns\n") {
		t.Errorf("%s: /etc/nsswitch.conf = %q, want hosts: files dns", p, ns)
	}
	// Only the binaries the image adds: no plugin of another image.
	for path := range files {
		if strings.HasPrefix(path, "/usr/local/lib/kip/plugins/") || strings.HasPrefix(path, "/usr/local/bin/") {
			if _, ok := wantFiles[path]; !ok {
				t.Errorf("%s: unexpected %s", p, path)
			}
		}
	}
}

// TestBuildIsReproducible builds every image twice, from scratch, once
// with the platforms in the other order, and compares the digests; a
// build of another commit time differs.
func TestBuildIsReproducible(t *testing.T) {
	digests := func(opts images.Options) map[string]string {
		built, err := images.Build(t.Context(), opts)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		out := map[string]string{}
		for _, b := range built {
			d, err := b.Index.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out[b.Name] = d.String()
		}
		return out
	}
	first := digests(testOptions())
	again := testOptions()
	again.Platforms = []string{"linux/arm64", "linux/amd64"}
	if d := cmp.Diff(first, digests(again)); d != "" {
		t.Errorf("a second build gives other digests (-first +second):\n%s", d)
	}
	later := testOptions()
	later.Created = commitTime.Add(time.Second)
	for n, d := range digests(later) {
		if first[n] == d {
			t.Errorf("%s: a build of another commit time has the same digest %s", n, d)
		}
	}
}

func TestBuildOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*images.Options)
		want string
	}{
		{"an unknown image", func(o *images.Options) { o.Images = []string{"kip", "kip-plugin-nope"} }, `no image "kip-plugin-nope" (the images: kip, kip-cell, kip-plugin-local`},
		{"an unknown plugin", func(o *images.Options) { o.Plugins = []string{"local", "openstack"} }, `no plugin "openstack" (the plugins: local, aws, gce, azure)`},
		{"no platform", func(o *images.Options) { o.Platforms = nil }, "no platform"},
		{"a platform with no arch", func(o *images.Options) { o.Platforms = []string{"linux"} }, `platform "linux" is not os/arch`},
		{"a missing CA bundle", func(o *images.Options) { o.CACertificates = "/nonexistent/ca.crt" }, "reading the CA bundle (Debian's ca-certificates, installed by make deps)"},
		{"a failing build", func(o *images.Options) {
			o.Compile = func(context.Context, images.Binary, v1.Platform) ([]byte, error) { return nil, fmt.Errorf("no go") }
		}, "building kip for linux/amd64: no go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			tt.edit(&opts)
			_, err := images.Build(t.Context(), opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestBuildWithSomePlugins builds the kip image with the local plugin
// only: it holds kip, kip-cell and kip-plugin-local, and no other plugin
// is compiled.
func TestBuildWithSomePlugins(t *testing.T) {
	opts := testOptions()
	opts.Images, opts.Plugins, opts.Platforms = []string{"kip"}, []string{"local"}, []string{"linux/amd64"}
	var compiled []string
	opts.Compile = func(ctx context.Context, b images.Binary, p v1.Platform) ([]byte, error) {
		compiled = append(compiled, b.Name)
		return standIn(ctx, b, p)
	}
	built, err := images.Build(t.Context(), opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	want := []string{"kip", "kip-cell", "kip-plugin-local"}
	if diff := cmp.Diff(want, compiled); diff != "" {
		t.Errorf("binaries compiled (-want +got):\n%s", diff)
	}
	if len(built) != 1 || built[0].Name != "kip" {
		t.Fatalf("Build returned %d images, want the kip image alone", len(built))
	}
	var files []string
	for path := range built[0].Files["linux/amd64"] {
		files = append(files, path)
	}
	slices.Sort(files)
	wantFiles := []string{"/usr/local/bin/kip", "/usr/local/bin/kip-cell", "/usr/local/lib/kip/plugins/kip-plugin-local"}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("the kip image's binaries (-want +got):\n%s", diff)
	}
}

// TestBinariesMatchMakeDist keeps the table of Binaries equal to make
// dist's: the same main packages and version variables.
func TestBinariesMatchMakeDist(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range images.Binaries {
		if !strings.Contains(string(mk), "-X "+b.VersionVar+"=$(VERSION)") {
			t.Errorf("%s: the Makefile sets no -X %s=$(VERSION)", b.Name, b.VersionVar)
		}
		if !strings.Contains(string(mk), b.Name+" ") || !strings.Contains(string(mk), b.Package) {
			t.Errorf("%s: make dist builds no %s", b.Name, b.Package)
		}
	}
}

// file is an entry of an image's file system, as a test reads it.
type file struct {
	typ      byte
	mode     int64
	uid, gid int
	body     string
	modTime  time.Time
}

// imageFiles returns the files of img's flattened file system by absolute
// path.
func imageFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	files := map[string]file{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = file{h.Typeflag, h.Mode, h.Uid, h.Gid, string(body), h.ModTime.UTC()}
	}
}
