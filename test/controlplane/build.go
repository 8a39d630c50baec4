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
// takes about nine minutes on two cores and needs about 2 GB of memory.
func Build(ctx context.Context, opts BuildOptions) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	bin, _ := BinDir(opts)
	goVersion, err := modbuild.GoVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; Kubernetes %s needs it)", err, opts.KubeVersion)
	}
	stamp := fmt.Sprintf("kube=%s bins=%s go=%s", opts.KubeVersion, strings.Join(Binaries, ","), goVersion)
	if modbuild.Current(bin, stamp, Binaries...) {
		return bin, nil
	}

	src := filepath.Join(opts.CacheDir, opts.KubeVersion, "src")
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
	pkgs := []string{
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl",
	}
	fmt.Fprintf(opts.Log, "controlplane: resolving k8s.io/kubernetes@%s\n", opts.KubeVersion)
	get := []string{"get"}
	for _, p := range pkgs {
		get = append(get, p+"@"+opts.KubeVersion)
	}
	if err := modbuild.Run(ctx, src, opts.Log, get...); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	etcdVersion, err := modbuild.Output(ctx, src, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", fmt.Errorf("finding the etcd version kubernetes pins: %w", err)
	}
	if err := modbuild.Run(ctx, src, opts.Log, "get", "go.etcd.io/etcd/server/v3@"+etcdVersion); err != nil {
		return "", fmt.Errorf("resolving etcd %s: %w", etcdVersion, err)
	}

	ldflags := "-s -w"
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags += fmt.Sprintf(" -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			p, opts.KubeVersion, p, p, m[1], p)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", bin, err)
	}
	start := time.Now()
	fmt.Fprintf(opts.Log, "controlplane: building kubernetes %s and etcd %s into %s (cold: about 9 minutes; cached afterwards)\n",
		opts.KubeVersion, etcdVersion, bin)
	if err := modbuild.Run(ctx, src, opts.Log, append([]string{"build", "-trimpath", "-ldflags", ldflags, "-o", bin + "/"}, pkgs...)...); err != nil {
		return "", fmt.Errorf("building kubernetes %s: %w", opts.KubeVersion, err)
	}
	if err := modbuild.Run(ctx, src, opts.Log, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(bin, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
		return "", fmt.Errorf("building etcd %s: %w", etcdVersion, err)
	}
	fmt.Fprintf(opts.Log, "controlplane: built in %s\n", time.Since(start).Round(time.Second))
	if err := modbuild.WriteStamp(bin, stamp); err != nil {
		return "", err
	}
	return bin, nil
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
