package images_test

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// needBusybox skips the test when Debian's busybox-static is missing.
func needBusybox(t *testing.T) {
	t.Helper()
	if _, err := images.Busybox(); errors.Is(err, images.ErrNoBusybox) {
		t.Skipf("%v", err)
	}
}

func startRegistry(t *testing.T, opts registry.Options) *registry.Registry {
	t.Helper()
	reg, err := registry.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// pull fetches ref (a Host() reference) from reg with the given options.
func pull(t *testing.T, ref string, opts ...remote.Option) (v1.Image, error) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("parsing %q: %v", ref, err)
	}
	return remote.Image(r, append(opts, remote.WithContext(t.Context()))...)
}

// files lists the entries of layer as name -> symlink target ("" for other
// types), names without a leading slash or trailing slash.
func files(t *testing.T, layer v1.Layer) map[string]string {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading layer: %v", err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h.Linkname
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
	}
}

func TestPushAllPullBack(t *testing.T) {
	needBusybox(t)
	reg := startRegistry(t, registry.Options{})
	set, err := images.PushAll(t.Context(), reg)
	if err != nil {
		t.Fatalf("PushAll: %v", err)
	}
	built, err := images.Build()
	if err != nil {
		t.Fatal(err)
	}

	busyboxCfg := v1.Config{Cmd: []string{"sh"}, Env: []string{images.Path}, WorkingDir: "/"}
	appCfg := v1.Config{Entrypoint: []string{"/app"}, Env: []string{images.Path}, WorkingDir: "/"}
	tests := []struct {
		img    images.Image
		name   string
		layers int
		config v1.Config
	}{
		{set.Busybox, "busybox", 1, busyboxCfg},
		{set.Hello, "hello", 2, appCfg},
		{set.Crash, "crash", 2, appCfg},
		{set.Logger, "logger", 2, appCfg},
		{set.NFSServer, "nfsserver", 2, appCfg},
	}
	if len(set.All()) != len(tests) {
		t.Fatalf("Set.All() has %d images, the test checks %d", len(set.All()), len(tests))
	}
	var busyboxLayer v1.Hash
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if want := reg.Host() + "/kip-e2e/" + tt.name + ":v1"; tt.img.Ref != want || tt.img.Name != tt.name {
				t.Errorf("image = %+v, want name %q and ref %q", tt.img, tt.name, want)
			}
			byDigest, err := pull(t, tt.img.DigestRef())
			if err != nil {
				t.Fatalf("pulling %s: %v", tt.img.DigestRef(), err)
			}
			if d, err := byDigest.Digest(); err != nil || d.String() != tt.img.Digest {
				t.Errorf("%s has digest %s (%v)", tt.img.DigestRef(), d, err)
			}

			img, err := pull(t, tt.img.Ref)
			if err != nil {
				t.Fatalf("pulling %s: %v", tt.img.Ref, err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if d.String() != tt.img.Digest {
				t.Errorf("%s has digest %s, PushAll reported %s", tt.img.Ref, d, tt.img.Digest)
			}
			mt, err := img.MediaType()
			if err != nil || mt != types.OCIManifestSchema1 {
				t.Errorf("media type = %q, %v; want %q", mt, err, types.OCIManifestSchema1)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
				t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
			}
			if diff := cmp.Diff(tt.config, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != tt.layers || len(cf.RootFS.DiffIDs) != tt.layers {
				t.Fatalf("%d layers, %d diff IDs, want %d", len(layers), len(cf.RootFS.DiffIDs), tt.layers)
			}
			first, err := layers[0].Digest()
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "busybox" {
				busyboxLayer = first
			} else if first != busyboxLayer {
				t.Errorf("base layer %s, want the busybox layer %s", first, busyboxLayer)
			}
			// The pulled layers are the built ones (the same digests), so
			// the contents are checked on the built layers, without a slow
			// decompression under -race.
			local, err := built[tt.name].Layers()
			if err != nil || len(local) != len(layers) {
				t.Fatalf("built %s image: %d layers, %v", tt.name, len(local), err)
			}
			for i := range layers {
				remoteD, err1 := layers[i].Digest()
				localD, err2 := local[i].Digest()
				if err := errors.Join(err1, err2); err != nil || remoteD != localD {
					t.Errorf("layer %d: pulled %s, built %s (%v)", i, remoteD, localD, err)
				}
			}
			if tt.layers == 2 {
				if got := files(t, local[1]); !cmp.Equal(got, map[string]string{"app": ""}) {
					t.Errorf("program layer holds %v, want only app", got)
				}
			}
		})
	}
}

func TestBusyboxLayer(t *testing.T) {
	needBusybox(t)
	img, err := images.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("Layers() = %d layers, %v; want 1", len(layers), err)
	}
	got := files(t, layers[0])

	want := []string{"bin/busybox", "etc/passwd", "etc/group", "tmp", "proc", "sys", "dev"}
	for _, f := range want {
		if _, ok := got[f]; !ok {
			t.Errorf("layer has no %s", f)
		}
	}
	for _, a := range []string{"sh", "echo", "sleep", "cat", "ls", "env", "true", "false", "wget", "nc",
		"httpd", "hostname", "ps", "id", "mkdir", "printf", "date", "head", "tail", "yes", "seq", "grep",
		"sed", "awk"} {
		if got["bin/"+a] != "busybox" {
			t.Errorf("bin/%s -> %q, want a symlink to busybox", a, got["bin/"+a])
		}
	}

	// Every linked applet must exist in the binary, or the link would fail
	// at run time with "applet not found".
	out, err := exec.Command(images.DefaultBusyboxPath, "--list").Output()
	if err != nil {
		t.Skipf("cannot list the applets of %s: %v", images.DefaultBusyboxPath, err)
	}
	have := strings.Fields(string(out))
	for _, a := range images.Applets {
		if !slices.Contains(have, a) {
			t.Errorf("applet %q is not in %s", a, images.DefaultBusyboxPath)
		}
	}
}

func TestBuildIsCachedAndReproducible(t *testing.T) {
	needBusybox(t)
	a, err := images.Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := images.Build()
	if err != nil {
		t.Fatal(err)
	}
	for n, img := range a {
		if b[n] != img {
			t.Errorf("second Build returned a different %s image", n)
		}
	}
	// Built again from scratch, busybox has the same digest.
	fresh, err := images.BusyboxFrom(images.DefaultBusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := a["busybox"].Digest()
	d2, _ := fresh.Digest()
	if d1 != d2 {
		t.Errorf("busybox digests differ between builds: %s, %s", d1, d2)
	}
}

func TestBusyboxFromErrors(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		noBB   bool   // wraps ErrNoBusybox
		prefix string // error text starts with
	}{
		{"missing", filepath.Join(dir, "busybox"), true, "busybox-static is not installed: run make deps"},
		{"not ELF", notELF, false, "reading busybox"},
	}
	// A dynamically linked executable (the busybox package's /bin/busybox
	// is one) is rejected too.
	if p, err := exec.LookPath("ls"); err == nil {
		tests = append(tests, struct {
			name   string
			path   string
			noBB   bool
			prefix string
		}{"dynamic", p, true, "busybox-static is not installed: run make deps"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := images.BusyboxFrom(tt.path)
			if err == nil {
				t.Fatal("BusyboxFrom succeeded")
			}
			if errors.Is(err, images.ErrNoBusybox) != tt.noBB || !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q: want prefix %q, ErrNoBusybox %t", err, tt.prefix, tt.noBB)
			}
		})
	}
}

func TestPushAllBasicAuth(t *testing.T) {
	needBusybox(t)
	reg := startRegistry(t, registry.Options{Username: "kip", Password: "pull-secret"})
	set, err := images.PushAll(t.Context(), reg)
	if err != nil {
		t.Fatalf("PushAll with credentials: %v", err)
	}

	tests := []struct {
		name string
		auth authn.Authenticator
		want int // 0: pull succeeds
	}{
		{"anonymous", authn.Anonymous, http.StatusUnauthorized},
		{"wrong password", &authn.Basic{Username: "kip", Password: "guess"}, http.StatusUnauthorized},
		{"credentials", &authn.Basic{Username: "kip", Password: "pull-secret"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := pull(t, set.Hello.Ref, remote.WithAuth(tt.auth))
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("pull: %v", err)
				}
				if d, _ := img.Digest(); d.String() != set.Hello.Digest {
					t.Errorf("digest %s, want %s", d, set.Hello.Digest)
				}
				return
			}
			var terr *transport.Error
			if !errors.As(err, &terr) || terr.StatusCode != tt.want {
				t.Fatalf("pull error = %v, want HTTP %d", err, tt.want)
			}
		})
	}
}
