package images_test

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kipcell/kip/deploy/images"
	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/registry"
)

// TestKipImagesCommand runs the command make images runs, on the real
// binaries, for this machine's platform, with two of the images (kip-cell
// and kip-plugin-local: the kip image holds 250 MB of binaries, too slow
// for make test; TestBuildLayout checks its layout), twice: the digests
// must be equal. Where containerd can run (root, containerd, runc), the
// images then run as they would in a pod with a read-only root: kip-cell
// --version, and the plugin's install into a volume, as kip's init
// container does, as UID 65532.
func TestKipImagesCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building the real binaries")
	}
	reg := startRegistry(t)
	bin := filepath.Join(t.TempDir(), "kip-images")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kip-images")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kip-images: %v\n%s", err, out)
	}
	platform := "linux/" + runtime.GOARCH
	envFile := filepath.Join(t.TempDir(), "images.env")
	push := func(tag string) map[string]string {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(t.Context(), bin, "--registry", reg.LocalHost()+"/kip", "--platforms", platform,
			"--images", "kip-cell,kip-plugin-local", "--version", "test-1", "--tag", tag, "--repo", "../..", "--images-env", envFile)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kip-images: %v\n%s", err, stderr.String())
		}
		refs := map[string]string{}
		for line := range strings.Lines(stdout.String()) {
			ref, digest, ok := strings.Cut(strings.TrimSpace(line), "@")
			n := strings.TrimSuffix(ref[strings.LastIndexByte(ref, '/')+1:], ":"+tag)
			if want := reg.LocalHost() + "/kip/" + n + ":" + tag; !ok || ref != want || !strings.HasPrefix(digest, "sha256:") {
				t.Errorf("kip-images printed %q, want %s@sha256:…", line, want)
			}
			refs[n] = strings.TrimSpace(line)
		}
		if len(refs) != 2 || refs["kip-cell"] == "" || refs["kip-plugin-local"] == "" {
			t.Fatalf("kip-images printed %q, want kip-cell's and kip-plugin-local's references", stdout.String())
		}
		return refs
	}
	first := push("one")
	second := push("two")
	// --images-env holds what the second push printed, as kustomize's
	// name=value lines (deploy/kustomize/base reads kip's).
	env, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kip-cell=" + second["kip-cell"] + "\nkip-plugin-local=" + second["kip-plugin-local"] + "\n"; string(env) != want {
		t.Errorf("--images-env wrote %q, want %q", env, want)
	}
	for n, ref := range first {
		if d1, d2 := ref[strings.IndexByte(ref, '@'):], second[n][strings.IndexByte(second[n], '@'):]; d1 != d2 {
			t.Errorf("%s: two builds of the same commit give %s and %s", n, d1, d2)
		}
	}

	// The binaries are static executables for the platform.
	sums := map[string]string{}
	for n, path := range map[string]string{"kip-cell": "usr/local/bin/kip-cell", "kip-plugin-local": "usr/local/lib/kip/plugins/kip-plugin-local"} {
		body := fileIn(t, first[n], path)
		f, err := elf.NewFile(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s /%s is not ELF: %v", n, path, err)
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]; f.Machine != want {
			t.Errorf("%s /%s is for %v, want %v", n, path, f.Machine, want)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s /%s is dynamically linked", n, path)
			}
		}
		sum := sha256.Sum256(body)
		sums[n] = hex.EncodeToString(sum[:])
	}

	t.Run("containerd", func(t *testing.T) {
		containerdtest.Require(t)
		runImages(t, reg, first, sums["kip-plugin-local"])
	})
}

// fileIn returns the file at path (no leading slash) in the image of the
// single-platform index ref.
func fileIn(t *testing.T, ref, path string) []byte {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Platform.String() != "linux/"+runtime.GOARCH {
		t.Fatalf("%s lists %d manifests, want one for linux/%s", ref, len(im.Manifests), runtime.GOARCH)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := imageFiles(t, img)["/"+path]
	if !ok {
		t.Fatalf("no /%s in %s", path, ref)
	}
	return []byte(f.body)
}

// runImages runs kip-cell --version and the plugin's install with
// containerd, as a pod would: the image's user, a read-only root, a
// volume for the plugin directory.
func runImages(t *testing.T, reg *registry.Registry, refs map[string]string, pluginSum string) {
	const pluginPath = "/usr/local/lib/kip/plugins/kip-plugin-local"
	d := containerdtest.StartDaemon(t)
	c := d.Client
	ns := "kip-release-images-" + containerdtest.Random(8)
	ctx := namespaces.WithNamespace(t.Context(), ns)
	t.Cleanup(func() { containerdtest.CleanupNamespace(t, c, ns) })
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(
		docker.WithPlainHTTP(docker.MatchLocalhost))})

	// run runs ref's image, entrypoint plus args, with a read-only root
	// and opts, and returns its exit status and output.
	run := func(id, ref string, args []string, opts ...oci.SpecOpts) (uint32, string) {
		t.Helper()
		opts = append([]oci.SpecOpts{oci.WithProcessArgs(args...), oci.WithRootFSReadonly()}, opts...)
		ctr := d.RunImage(ctx, t, resolver, ref, id, opts...)
		select {
		case st := <-ctr.Exit:
			ctr.Task.IO().Wait()
			return st.ExitCode(), ctr.Output.String()
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit in 30s; output:\n%s", id, ctr.Output.String())
			return 0, ""
		}
	}

	code, out := run("kip-cell-version", refs["kip-cell"], []string{"/usr/local/bin/kip-cell", "--version"})
	if want := "kip-cell test-1 ("; code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("kip-cell --version exited %d, printed %q; want 0 and %q…", code, out, want)
	}

	// The plugin directory, an emptyDir in a pod: the volume belongs to
	// the pod's fsGroup, here kip's own user.
	dir := t.TempDir()
	if err := os.Chown(dir, images.UID, images.GID); err != nil {
		t.Fatal(err)
	}
	volume := oci.WithMounts([]specs.Mount{{Destination: "/var/lib/kip/plugins", Type: "bind", Source: dir, Options: []string{"rbind", "rw"}}})
	code, out = run("plugin-install", refs["kip-plugin-local"], []string{pluginPath, "install", "/var/lib/kip/plugins"}, volume)
	dst := filepath.Join(dir, "kip-plugin-local")
	want := fmt.Sprintf("installed /var/lib/kip/plugins/kip-plugin-local: kip-plugin-local test-1, sha256 %s\n", pluginSum)
	if code != 0 || out != want {
		t.Fatalf("install exited %d, printed %q; want 0 and %q", code, out, want)
	}
	body, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != pluginSum {
		t.Errorf("%s is not the image's binary", dst)
	}
	st, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	if uid, gid := int(owner.Uid), int(owner.Gid); uid != images.UID || gid != images.GID || st.Mode().Perm() != 0o755 {
		t.Errorf("%s is owned by %d:%d with mode %v, want 65532:65532 (the image's user) and 0755", dst, uid, gid, st.Mode().Perm())
	}

	// The root is read-only: the same install into the image's /tmp fails.
	code, out = run("plugin-install-readonly", refs["kip-plugin-local"], []string{pluginPath, "install", "/tmp"})
	if code == 0 || !strings.Contains(out, "read-only file system") {
		t.Errorf("install into the read-only root exited %d, printed %q; want a failure naming the read-only file system", code, out)
	}
}
