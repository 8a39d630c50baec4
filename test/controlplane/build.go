package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
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
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("finding the cache directory: %w", err)
		}
		o.CacheDir = filepath.Join(base, "kip", "controlplane")
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
	goVersion, err := goEnv(ctx, "GOVERSION")
	if err != nil {
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; Kubernetes %s needs it)", err, opts.KubeVersion)
	}
	stamp := fmt.Sprintf("kube=%s bins=%s go=%s", opts.KubeVersion, strings.Join(Binaries, ","), goVersion)
	if have, err := os.ReadFile(filepath.Join(bin, ".stamp")); err == nil && string(have) == stamp && allExecutable(bin) {
		return bin, nil
	}

	src := filepath.Join(opts.CacheDir, opts.KubeVersion, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("creating build directory: %w", err)
	}
	kubeMod, err := downloadGoMod(ctx, "k8s.io/kubernetes@"+opts.KubeVersion)
	if err != nil {
		return "", fmt.Errorf("downloading k8s.io/kubernetes@%s: %w", opts.KubeVersion, err)
	}
	want := goDirective(kubeMod)
	if !goAtLeast(goVersion, want) {
		return "", fmt.Errorf("kubernetes %s needs Go %s or newer, but `go` is %s: install a newer Go toolchain (this machine cannot download one)",
			opts.KubeVersion, want, goVersion)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), scratchGoMod(kubeMod, opts.KubeVersion), 0o644); err != nil {
		return "", fmt.Errorf("writing scratch go.mod: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "doc.go"), []byte("package build\n"), 0o644); err != nil {
		return "", fmt.Errorf("writing scratch package: %w", err)
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
	if err := goCmd(ctx, src, opts.Log, get...); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	etcdVersion, err := goOutput(ctx, src, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", fmt.Errorf("finding the etcd version kubernetes pins: %w", err)
	}
	if err := goCmd(ctx, src, opts.Log, "get", "go.etcd.io/etcd/server/v3@"+etcdVersion); err != nil {
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
	if err := goCmd(ctx, src, opts.Log, append([]string{"build", "-trimpath", "-ldflags", ldflags, "-o", bin + "/"}, pkgs...)...); err != nil {
		return "", fmt.Errorf("building kubernetes %s: %w", opts.KubeVersion, err)
	}
	if err := goCmd(ctx, src, opts.Log, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(bin, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
		return "", fmt.Errorf("building etcd %s: %w", etcdVersion, err)
	}
	fmt.Fprintf(opts.Log, "controlplane: built in %s\n", time.Since(start).Round(time.Second))
	if err := os.WriteFile(filepath.Join(bin, ".stamp"), []byte(stamp), 0o644); err != nil {
		return "", fmt.Errorf("writing build stamp: %w", err)
	}
	return bin, nil
}

func allExecutable(dir string) bool {
	for _, b := range Binaries {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// scratchGoMod maps every k8s.io staging module, which k8s.io/kubernetes
// replaces with ./staging/... (absent from its module zip), to its
// published v0.X.Y tag.
func scratchGoMod(kubeMod []byte, kubeVersion string) []byte {
	m := kubeVersionRE.FindStringSubmatch(kubeVersion)
	staging := "v0." + m[1] + "." + m[2]
	var b bytes.Buffer
	fmt.Fprintf(&b, "module local/kip-controlplane-build\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", goDirective(kubeMod), kubeVersion)
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

func goDirective(mod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "1.0"
}

// goAtLeast reports whether toolchain (like "go1.26.8") is at least want
// (like "1.26.0").
func goAtLeast(toolchain, want string) bool {
	have := versionParts(strings.TrimPrefix(toolchain, "go"))
	need := versionParts(want)
	for i := range 3 {
		if have[i] != need[i] {
			return have[i] > need[i]
		}
	}
	return true
}

func versionParts(v string) [3]int {
	var out [3]int
	for i, p := range strings.SplitN(v, ".", 3) {
		digits := p
		if end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			digits = p[:end] // "27rc1" → 27
		}
		out[i], _ = strconv.Atoi(digits)
	}
	return out
}

func downloadGoMod(ctx context.Context, modVersion string) ([]byte, error) {
	out, err := goOutput(ctx, "", "mod", "download", "-json", modVersion)
	if err != nil {
		return nil, err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return nil, fmt.Errorf("parsing go mod download output: %w", err)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("%s", info.Error)
	}
	return os.ReadFile(info.GoMod)
}

func goEnv(ctx context.Context, key string) (string, error) {
	return goOutput(ctx, "", "env", key)
}

// goCommand runs the go tool outside any workspace, resolving modules.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	return cmd
}

func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := goCommand(ctx, dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func goCmd(ctx context.Context, dir string, log io.Writer, args ...string) error {
	cmd := goCommand(ctx, dir, args...)
	var tail bytes.Buffer
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, &tail)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w: %s", args[0], err, lastLines(tail.String(), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
