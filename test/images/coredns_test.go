package images_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// fakeGo puts a go command first on PATH that reports the toolchain in
// $FAKE_GO_VERSION, serves CoreDNS's go.mod (go 1.26.0) for go mod
// download, writes a shell script where go build -o points, and appends
// each call with its workspace, cgo and flags settings to the returned
// log file.
func fakeGo(t *testing.T, version string) (calls string) {
	t.Helper()
	dir := t.TempDir()
	gomod := filepath.Join(dir, "coredns.mod")
	if err := os.WriteFile(gomod, []byte("module github.com/coredns/coredns\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(dir, "calls")
	script := fmt.Sprintf(`#!/bin/sh
echo "$* | GOWORK=$GOWORK CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS" >> %[1]s
case "$1" in
  env) echo "$FAKE_GO_VERSION" ;;
  mod) echo '{"Path":"github.com/coredns/coredns","Version":"v1.15.0","GoMod":"%[2]s"}' ;;
  get) ;;
  build)
    while [ $# -gt 0 ]; do
      if [ "$1" = -o ]; then printf '#!/bin/sh\necho CoreDNS-1.15.0\n' > "$2"; chmod 755 "$2"; fi
      shift
    done ;;
  *) echo "unexpected: go $*" >&2; exit 1 ;;
esac
`, calls, gomod)
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_GO_VERSION", version)
	return calls
}

// builds returns the go build and go get calls the fake go recorded.
func builds(t *testing.T, calls string) []string {
	t.Helper()
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "get ") || strings.HasPrefix(line, "build ") {
			out = append(out, line)
		}
	}
	return out
}

// TestBuildCoreDNSIsCached runs BuildCoreDNS against a fake go command:
// the first call resolves and builds CoreDNS in a throwaway module outside
// the workspace, the second finds the binary and builds nothing, and a new
// toolchain builds again.
func TestBuildCoreDNSIsCached(t *testing.T) {
	calls := fakeGo(t, "go1.26.8")
	cache := t.TempDir()
	ctx := t.Context()

	bin, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{CacheDir: cache})
	if err != nil {
		t.Fatalf("BuildCoreDNS: %v", err)
	}
	if want := filepath.Join(cache, images.CoreDNSVersion, "bin", "coredns"); bin != want {
		t.Errorf("BuildCoreDNS = %s, want %s", bin, want)
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("the built binary: %v, %v; want an executable", st, err)
	}
	outside := " | GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod"
	const plugin = "github.com/coredns/coredns/plugin/"
	get := "get github.com/coredns/coredns/coremain@v1.15.0"
	for _, p := range []string{"cache", "errors", "forward", "health", "hosts", "kubernetes", "loadbalance", "log", "loop", "metrics", "ready", "reload"} {
		get += " " + plugin + p + "@v1.15.0"
	}
	want := []string{
		get + outside,
		"build -trimpath -ldflags -s -w -o " + bin + ".new ./coredns" + outside,
	}
	if diff := cmp.Diff(want, builds(t, calls)); diff != "" {
		t.Errorf("first build's go commands (-want +got):\n%s", diff)
	}
	// The command built is a main of Kip's own, which runs CoreDNS's.
	main, err := os.ReadFile(filepath.Join(cache, images.CoreDNSVersion, "src", "coredns", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(main), "coremain.Run()") || !strings.Contains(string(main), `_ "`+plugin+`kubernetes"`) {
		t.Errorf("coredns/main.go runs no coremain.Run with the kubernetes plugin:\n%s", main)
	}
	mod, err := os.ReadFile(filepath.Join(cache, images.CoreDNSVersion, "src", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "module local/kip-coredns-build\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns v1.15.0\n"; string(mod) != want {
		t.Errorf("scratch go.mod = %q, want %q", mod, want)
	}

	if _, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{CacheDir: cache}); err != nil {
		t.Fatalf("second BuildCoreDNS: %v", err)
	}
	if got := builds(t, calls); len(got) != len(want) {
		t.Errorf("the second call ran go again: %q", got[len(want):])
	}

	t.Setenv("FAKE_GO_VERSION", "go1.26.9")
	if _, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{CacheDir: cache}); err != nil {
		t.Fatalf("BuildCoreDNS with a new Go: %v", err)
	}
	if got := builds(t, calls); len(got) != 2*len(want) {
		t.Errorf("a new Go toolchain did not build again: %q", got)
	}
}

// TestResolveBuildsNothing runs Resolve against a fake go command: it
// resolves CoreDNS and metrics-server in their cache directories and
// compiles neither; BuildCoreDNS afterwards compiles.
func TestResolveBuildsNothing(t *testing.T) {
	calls := fakeGo(t, "go1.26.8")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if err := images.Resolve(t.Context(), nil); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	got := builds(t, calls)
	if len(got) != 2 || !strings.HasPrefix(got[0], "get github.com/coredns/coredns/coremain@v1.15.0 ") ||
		!strings.HasPrefix(got[1], "get "+images.MetricsServerModule) {
		t.Errorf("Resolve ran %q, want a go get of CoreDNS's packages and one of metrics-server's, and no build", got)
	}
	bin := filepath.Join(cache, "kip", "coredns", images.CoreDNSVersion, "bin", "coredns")
	if _, err := os.Stat(bin); err == nil {
		t.Errorf("Resolve left a binary at %s", bin)
	}
	if _, err := os.Stat(filepath.Join(cache, "kip", "coredns", images.CoreDNSVersion, "src", "go.mod")); err != nil {
		t.Errorf("Resolve left no scratch module: %v", err)
	}
	got2, err := images.BuildCoreDNS(t.Context(), images.CoreDNSOptions{})
	if err != nil || got2 != bin {
		t.Fatalf("BuildCoreDNS after Resolve = %s, %v; want %s", got2, err, bin)
	}
	if all := builds(t, calls); len(all) != 4 || !strings.HasPrefix(all[3], "build ") {
		t.Errorf("BuildCoreDNS after Resolve ran %q, want a go get and a go build", all[2:])
	}
}

// TestBuildCoreDNSRefusesOldGo checks BuildCoreDNS names both versions
// instead of failing in the middle of the build.
func TestBuildCoreDNSRefusesOldGo(t *testing.T) {
	calls := fakeGo(t, "go1.25.4")
	_, err := images.BuildCoreDNS(t.Context(), images.CoreDNSOptions{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "coredns v1.15.0 needs Go 1.26.0 or newer") || !strings.Contains(err.Error(), "go1.25.4") {
		t.Errorf("BuildCoreDNS with Go 1.25 = %v, want an error naming both versions", err)
	}
	if got := builds(t, calls); len(got) != 0 {
		t.Errorf("BuildCoreDNS ran %q with a Go that is too old", got)
	}
}

func TestCoreDNSTagIsItsVersion(t *testing.T) {
	if want := strings.TrimPrefix(images.CoreDNSVersion, "v"); images.CoreDNSTag != want {
		t.Errorf("CoreDNSTag = %q, want %q (CoreDNSVersion without its v)", images.CoreDNSTag, want)
	}
}

// TestPushProxyImages builds the CoreDNS and metrics-server images around
// stand-in binaries, pushes them and pulls them back: busybox's layer,
// then the binary, with the entrypoint and ports of upstream's image.
func TestPushProxyImages(t *testing.T) {
	needBusybox(t)
	reg := startRegistry(t, registry.Options{Username: "kip", Password: "pull-secret"})
	for _, tc := range []struct {
		name, ref string
		push      func(ctx context.Context, reg *registry.Registry, path string) (images.Image, error)
		ports     map[string]struct{}
	}{
		{"coredns", "kip-e2e/coredns:1.15.0", images.PushCoreDNS, map[string]struct{}{"53/tcp": {}, "53/udp": {}}},
		{"metrics-server", "kip-e2e/metrics-server:v0.9.0", images.PushMetricsServer, map[string]struct{}{"10250/tcp": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stand := filepath.Join(t.TempDir(), tc.name)
			body := "#!/bin/sh\necho " + tc.name + "\n"
			if err := os.WriteFile(stand, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			img, err := tc.push(t.Context(), reg, stand)
			if err != nil {
				t.Fatalf("pushing: %v", err)
			}
			if want := reg.Host() + "/" + tc.ref; img.Ref != want || img.Name != tc.name {
				t.Errorf("image = %+v, want name %s and ref %s", img, tc.name, want)
			}
			u, p := reg.Credentials()
			auth := remote.WithAuth(&authn.Basic{Username: u, Password: p})
			for _, ref := range []string{img.Ref, img.DigestRef()} {
				pulled, err := pull(t, ref, auth)
				if err != nil {
					t.Fatalf("pulling %s: %v", ref, err)
				}
				if d, err := pulled.Digest(); err != nil || d.String() != img.Digest {
					t.Errorf("%s has digest %s (%v), the push reported %s", ref, d, err, img.Digest)
				}
			}
			pulled, err := pull(t, img.Ref, auth)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := pulled.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			want := v1.Config{Entrypoint: []string{"/" + tc.name}, Env: []string{images.Path}, WorkingDir: "/", ExposedPorts: tc.ports}
			if diff := cmp.Diff(want, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			layers, err := pulled.Layers()
			if err != nil || len(layers) != 2 {
				t.Fatalf("layers: %d, %v; want busybox and %s", len(layers), err, tc.name)
			}
			bb, err := images.Busybox()
			if err != nil {
				t.Fatal(err)
			}
			bbLayers, err := bb.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := digestOf(t, layers[0]), digestOf(t, bbLayers[0]); got != want {
				t.Errorf("first layer %s, want busybox's %s", got, want)
			}
			if got := layerFile(t, layers[1], tc.name); got != body {
				t.Errorf("/%s = %q, want the binary %q", tc.name, got, body)
			}
		})
	}
}

func digestOf(t *testing.T, l v1.Layer) v1.Hash {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// layerFile returns the body of the regular file name in layer, checking
// it is executable by everyone.
func layerFile(t *testing.T, layer v1.Layer, name string) string {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer: %v", name, err)
		}
		if h.Name != name {
			continue
		}
		if h.Mode != 0o755 {
			t.Errorf("%s has mode %o, want 755", name, h.Mode)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
}

func TestDigestRef(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"10.213.5.1:5000/kip-e2e/hello:v1", "10.213.5.1:5000/kip-e2e/hello@sha256:ab"},
		{"10.213.5.1:5000/kip-e2e/coredns:1.15.0", "10.213.5.1:5000/kip-e2e/coredns@sha256:ab"},
		{"10.213.5.1:5000/kip-e2e/coredns", "10.213.5.1:5000/kip-e2e/coredns@sha256:ab"},
	}
	for _, tt := range tests {
		if got := (images.Image{Ref: tt.ref, Digest: "sha256:ab"}).DigestRef(); got != tt.want {
			t.Errorf("DigestRef of %s = %s, want %s", tt.ref, got, tt.want)
		}
	}
}
