package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kipcell/kip/test/modbuild"
)

// DefaultKubeVersion is the Kubernetes release built when none is asked for.
const DefaultKubeVersion = "v1.36.3"

// KubeVersionEnv overrides DefaultKubeVersion.
const KubeVersionEnv = "KIP_KUBE_VERSION"

// Binaries are the programs Build puts in the binary directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"}

// BuildOptions says what to build and where.
type BuildOptions struct {
	// KubeVersion is a k8s.io/kubernetes tag such as v1.36.3; empty means
	// $KIP_KUBE_VERSION, else DefaultKubeVersion.
	KubeVersion string
	// CacheDir holds one directory per version; empty means
	// $XDG_CACHE_HOME/kip/controlplane (~/.cache/kip/controlplane).
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (o *BuildOptions) defaults() error {
	if o.KubeVersion == "" {
		o.KubeVersion = os.Getenv(KubeVersionEnv)
	}
	if o.KubeVersion == "" {
		o.KubeVersion = DefaultKubeVersion
	}
	if !kubeVersionRE.MatchString(o.KubeVersion) {
		return fmt.Errorf("kubernetes version %q: want a release tag like %s", o.KubeVersion, DefaultKubeVersion)
	}
	if o.CacheDir == "" {
		dir, err := modbuild.CacheDir("controlplane")
		if err != nil {
			return err
		}
		o.CacheDir = dir
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

var kubeVersionRE = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

// BinDir returns the directory Build fills for opts, without building.
func BinDir(opts BuildOptions) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	return filepath.Join(opts.CacheDir, opts.KubeVersion, "bin"), nil
}

// Build compiles the control-plane binaries of opts.KubeVersion (and the
// etcd release it pins) from the Go module proxy into BinDir(opts), and
// returns that directory. When the binaries are there already (a stamp
// records what was built with which Go), it returns at once; a cold build
// takes about seven minutes on two cores and needs about 2 GB of memory.
func Build(ctx context.Context, opts BuildOptions) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	return build(ctx, opts, controlPlaneSpec(opts))
}

// controlPlaneSpec is Build's build; opts has its defaults.
func controlPlaneSpec(opts BuildOptions) buildSpec {
	bin, _ := BinDir(opts)
	return buildSpec{
		what: "kubernetes", dir: filepath.Join(opts.CacheDir, opts.KubeVersion), bin: bin, binaries: Binaries,
		pkgs: []string{
			"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler",
			"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl",
		},
		// Issue 32 measured 6 min 48 s on a fresh root with two cores
		// (main 138c319); docs/demo.md's older runs took nine to eleven.
		etcd: true, title: "the control plane", cold: "about 7 minutes",
	}
}

// NodeBinaries are the programs BuildNode puts in NodeBinDir: a real
// node's agents (test/kubeletnode runs them).
var NodeBinaries = []string{"kubelet", "kube-proxy"}

// NodeBinDir returns the directory BuildNode fills for opts, without
// building: node/bin beside BinDir's.
func NodeBinDir(opts BuildOptions) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	return filepath.Join(opts.CacheDir, opts.KubeVersion, "node", "bin"), nil
}

// BuildNode compiles the kubelet and kube-proxy of opts.KubeVersion as
// Build compiles the control plane, cached the same way (a stamp per
// version and Go toolchain), into NodeBinDir(opts), and returns that
// directory. It has a scratch module and a stamp of its own, so that a
// checkout that builds only the control plane and one that builds both
// never invalidate each other's cache. Cold it takes about seven minutes on
// two cores (less after Build: they share most packages), warm seconds.
func BuildNode(ctx context.Context, opts BuildOptions) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	return build(ctx, opts, nodeSpec(opts))
}

// nodeSpec is BuildNode's build; opts has its defaults.
func nodeSpec(opts BuildOptions) buildSpec {
	bin, _ := NodeBinDir(opts)
	return buildSpec{
		what: "kubelet", dir: filepath.Dir(bin), bin: bin, binaries: NodeBinaries,
		pkgs: []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"},
		// docs/demo.md: under a minute after Build's build on two cores (they
		// share most packages), as make demo runs them; alone, about seven.
		title: "the kubelet and kube-proxy", cold: "about a minute (7 without the control plane's build first)",
	}
}

// Resolve downloads and resolves the modules of Build's and BuildNode's
// builds, as they do before they compile, and returns: make check runs it
// ahead (kip-prefetch), while it compiles Kip, so that the download waits
// on the network beside the CPU's work. A build that is current is left
// alone.
func Resolve(ctx context.Context, opts BuildOptions) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	for _, spec := range []func(BuildOptions) buildSpec{controlPlaneSpec, nodeSpec} {
		if err := resolve(ctx, opts, spec(opts)); err != nil {
			return err
		}
	}
	return nil
}

// ResolveNode is Resolve for BuildNode's build alone: make demo runs it
// (kip-demo --resolve) beside kip-cluster up, which holds Build's lock for
// the whole of the control plane's build.
func ResolveNode(ctx context.Context, opts BuildOptions) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	return resolve(ctx, opts, nodeSpec(opts))
}

// resolve downloads and resolves b's modules without compiling.
func resolve(ctx context.Context, opts BuildOptions, b buildSpec) error {
	b.resolveOnly = true
	_, err := build(ctx, opts, b)
	return err
}

// buildSpec is one cached build of Kubernetes commands.
type buildSpec struct {
	resolveOnly bool     // stop before compiling (Resolve)
	what        string   // for messages
	title       string   // for the progress line: "the control plane"
	dir         string   // holds src/, the scratch module
	bin         string   // where the binaries go
	binaries    []string // what the stamp vouches for
	pkgs        []string // the k8s.io/kubernetes commands
	etcd        bool     // also the etcd release Kubernetes pins
	cold        string   // how long a cold build takes, for the log
}

func build(ctx context.Context, opts BuildOptions, b buildSpec) (string, error) {
	goVersion, err := modbuild.GoVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; Kubernetes %s needs it)", err, opts.KubeVersion)
	}
	stamp := fmt.Sprintf("kube=%s bins=%s go=%s", opts.KubeVersion, strings.Join(b.binaries, ","), goVersion)
	if modbuild.Current(b.bin, stamp, b.binaries...) {
		return b.bin, nil
	}
	unlock, err := modbuild.Lock(ctx, b.dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if modbuild.Current(b.bin, stamp, b.binaries...) { // built by the process that held the lock
		return b.bin, nil
	}

	src := filepath.Join(b.dir, "src")
	kubeMod, err := modbuild.GoMod(ctx, "k8s.io/kubernetes@"+opts.KubeVersion)
	if err != nil {
		return "", fmt.Errorf("downloading k8s.io/kubernetes@%s: %w", opts.KubeVersion, err)
	}
	if err := modbuild.CheckGo(goVersion, "kubernetes "+opts.KubeVersion, kubeMod); err != nil {
		return "", err
	}
	if err := modbuild.ScratchModule(src, scratchGoMod(kubeMod, opts.KubeVersion)); err != nil {
		return "", err
	}

	m := kubeVersionRE.FindStringSubmatch(opts.KubeVersion)
	fmt.Fprint(opts.Log, resolvingLine(b, opts.KubeVersion))
	get := []string{"get"}
	for _, p := range b.pkgs {
		get = append(get, p+"@"+opts.KubeVersion)
	}
	if err := modbuild.Run(ctx, src, opts.Log, get...); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	etcdVersion := ""
	if b.etcd {
		if etcdVersion, err = modbuild.Output(ctx, src, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3"); err != nil {
			return "", fmt.Errorf("finding the etcd version kubernetes pins: %w", err)
		}
		if err := modbuild.Run(ctx, src, opts.Log, "get", "go.etcd.io/etcd/server/v3@"+etcdVersion); err != nil {
			return "", fmt.Errorf("resolving etcd %s: %w", etcdVersion, err)
		}
	}

	if b.resolveOnly {
		return b.bin, nil
	}
	ldflags := "-s -w"
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags += fmt.Sprintf(" -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			p, opts.KubeVersion, p, p, m[1], p)
	}
	if err := os.MkdirAll(b.bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", b.bin, err)
	}
	start := time.Now()
	fmt.Fprint(opts.Log, buildingLine(b, opts.KubeVersion))
	if err := modbuild.Run(ctx, src, opts.Log, append([]string{"build", "-trimpath", "-ldflags", ldflags, "-o", b.bin + "/"}, b.pkgs...)...); err != nil {
		return "", fmt.Errorf("building %s %s: %w", b.what, opts.KubeVersion, err)
	}
	if b.etcd {
		if err := modbuild.Run(ctx, src, opts.Log, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.bin, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
			return "", fmt.Errorf("building etcd %s: %w", etcdVersion, err)
		}
	}
	fmt.Fprintf(opts.Log, "controlplane: built in %s\n", time.Since(start).Round(time.Second))
	if err := modbuild.WriteStamp(b.bin, stamp); err != nil {
		return "", err
	}
	return b.bin, nil
}

// resolvingLine is the log line that starts the download and resolution
// of b's modules, which Progress announces on the screen.
func resolvingLine(b buildSpec, kubeVersion string) string {
	return fmt.Sprintf("controlplane: resolving k8s.io/kubernetes@%s for %s\n", kubeVersion, b.title)
}

// buildingLine is the log line that starts b's cold build, which Progress
// announces on the screen.
func buildingLine(b buildSpec, kubeVersion string) string {
	return fmt.Sprintf("controlplane: building %s (Kubernetes %s) into %s (cold: %s; cached afterwards): %s\n",
		b.title, kubeVersion, b.bin, b.cold, strings.Join(b.binaries, ", "))
}

// scratchGoMod maps every k8s.io staging module, which k8s.io/kubernetes
// replaces with ./staging/... (absent from its module zip), to its
// published v0.X.Y tag.
func scratchGoMod(kubeMod []byte, kubeVersion string) []byte {
	m := kubeVersionRE.FindStringSubmatch(kubeVersion)
	staging := "v0." + m[1] + "." + m[2]
	var b bytes.Buffer
	fmt.Fprintf(&b, "module local/kip-controlplane-build\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", modbuild.GoDirective(kubeMod), kubeVersion)
	sc := bufio.NewScanner(bytes.NewReader(kubeMod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && strings.HasPrefix(f[0], "k8s.io/") && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			fmt.Fprintf(&b, "\t%s => %s %s\n", f[0], f[0], staging)
		}
	}
	b.WriteString(")\n")
	return b.Bytes()
}
