package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kipcell/kip/test/registry"

	kipimages "github.com/kipcell/kip/deploy/images"
)

// IPTablesTag is the tag PushIPTables pushes.
const IPTablesTag = "v1"

var iptablesImage builtImage

// IPTables returns Busybox plus a layer holding this machine's iptables
// (the binary `iptables` resolves to, with iptables, iptables-save and
// iptables-restore linked to it under /usr/sbin), all its extensions (a
// listing, iptables -S, needs those of every rule in the table, the agent's
// too) and the shared libraries ldd lists for them, at the paths they
// have here: the
// image a service mesh's init container is, for a test of a pod that
// rewrites its own network. It is built once per process. The machine's
// iptables is a package that make deps installs (the cell agent needs it).
func IPTables() (v1.Image, error) {
	iptablesImage.once.Do(func() { iptablesImage.img, iptablesImage.err = iptablesFromMachine() })
	return iptablesImage.img, iptablesImage.err
}

// PushIPTables pushes IPTables to reg as kip-e2e/iptables:<IPTablesTag>.
func PushIPTables(ctx context.Context, reg *registry.Registry) (Image, error) {
	img, err := IPTables()
	if err != nil {
		return Image{}, err
	}
	return push(ctx, reg, "iptables", IPTablesTag, img)
}

func iptablesFromMachine() (v1.Image, error) {
	path, err := exec.LookPath("iptables")
	if err != nil {
		return nil, fmt.Errorf("building the iptables image: %w (make deps installs it)", err)
	}
	bin, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("building the iptables image: %w", err)
	}
	paths := []string{bin}
	libdir := ""
	for _, dir := range []string{"/usr/lib/" + multiarch() + "/xtables", "/usr/lib64/xtables", "/usr/lib/xtables"} {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			libdir = dir
			break
		}
	}
	if libdir == "" {
		return nil, fmt.Errorf("building the iptables image: no xtables library directory found beside %s", bin)
	}
	exts, err := filepath.Glob(filepath.Join(libdir, "*.so"))
	if err != nil {
		return nil, fmt.Errorf("building the iptables image: %w", err)
	}
	if len(exts) == 0 {
		return nil, fmt.Errorf("building the iptables image: no extensions in %s", libdir)
	}
	paths = append(paths, exts...)
	seen := map[string]bool{}
	var files []kipimages.File
	dirs := map[string]bool{}
	add := func(name string) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		body, err := os.ReadFile(name) //nolint:gosec // the machine's iptables and what ldd says it loads
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(name, "/")
		for d := filepath.Dir(rel); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		files = append(files, kipimages.File{Name: rel, Mode: 0o755, Body: body})
		return nil
	}
	for _, p := range paths {
		libs, err := ldd(p)
		if err != nil {
			return nil, fmt.Errorf("building the iptables image: %w", err)
		}
		for _, f := range append([]string{p}, libs...) {
			if err := add(f); err != nil {
				return nil, fmt.Errorf("building the iptables image: %w", err)
			}
		}
	}
	for d := range dirs {
		files = append(files, kipimages.File{Name: d, Mode: 0o755, Dir: true})
	}
	for _, name := range []string{"iptables", "iptables-save", "iptables-restore"} {
		files = append(files, kipimages.File{Name: "usr/sbin/" + name, Mode: 0o777, Link: bin})
	}
	slices.SortFunc(files, func(a, b kipimages.File) int { return strings.Compare(a.Name, b.Name) })
	layer, err := newLayer(files)
	if err != nil {
		return nil, fmt.Errorf("building the iptables layer: %w", err)
	}
	bb, err := Busybox()
	if err != nil {
		return nil, err
	}
	return withEntrypoint(bb, layer, "kip test/images: this machine's iptables ("+bin+")", "/usr/sbin/iptables", func(c *v1.Config) {
		c.Env = []string{Path, "XTABLES_LIBDIR=" + libdir}
	})
}

// ldd returns the files of the shared libraries and the loader that path
// loads, as ldd lists them.
func ldd(path string) ([]string, error) {
	out, err := exec.Command("ldd", path).Output() //nolint:gosec // the machine's iptables files
	if err != nil {
		return nil, fmt.Errorf("running ldd %s: %w", path, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// multiarch is Debian's multiarch tuple of this machine's architecture,
// where its libraries and iptables' extensions live.
func multiarch() string {
	return map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
}
