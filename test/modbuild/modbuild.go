package modbuild

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
	"strconv"
	"strings"
)

// CacheDir returns the directory Kip's builds of name are cached in:
// $XDG_CACHE_HOME/kip/<name>, by default ~/.cache/kip/<name>.
func CacheDir(name string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w", err)
	}
	return filepath.Join(base, "kip", name), nil
}

// GoVersion returns the version of the go command on PATH, like
// "go1.26.8".
func GoVersion(ctx context.Context) (string, error) {
	return Output(ctx, "", "env", "GOVERSION")
}

// ModuleDir downloads modVersion ("github.com/virtual-kubelet/virtual-kubelet@v1.13.0")
// through the module proxy and returns its directory in the module cache,
// read-only.
func ModuleDir(ctx context.Context, modVersion string) (string, error) {
	out, err := Output(ctx, "", "mod", "download", "-json", modVersion)
	if err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return "", fmt.Errorf("parsing go mod download output: %w", err)
	}
	if info.Error != "" {
		return "", fmt.Errorf("%s", info.Error)
	}
	return info.Dir, nil
}

// GoMod downloads the go.mod of modVersion ("k8s.io/kubernetes@v1.36.3")
// through the module proxy and returns it.
func GoMod(ctx context.Context, modVersion string) ([]byte, error) {
	out, err := Output(ctx, "", "mod", "download", "-json", modVersion)
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

// GoDirective returns the version of mod's go directive ("1.26.0"), or
// "1.0" when it has none.
func GoDirective(mod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "1.0"
}

// CheckGo returns an error naming both versions unless the toolchain
// (GoVersion's "go1.26.8") is at least the go directive of mod, the go.mod
// of what (a module and version, for the message).
func CheckGo(toolchain, what string, mod []byte) error {
	if want := GoDirective(mod); !AtLeast(toolchain, want) {
		return fmt.Errorf("%s needs Go %s or newer, but `go` is %s: install a newer Go toolchain (this machine cannot download one)",
			what, want, toolchain)
	}
	return nil
}

// AtLeast reports whether toolchain (like "go1.26.8") is at least want
// (like "1.26.0").
func AtLeast(toolchain, want string) bool {
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

// ScratchModule writes a throwaway module into dir (created if needed): a
// go.mod with goMod as its whole text and an empty package, so that go get
// and go build run there resolve modules without touching the repository.
func ScratchModule(dir string, goMod []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating build directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), goMod, 0o644); err != nil {
		return fmt.Errorf("writing scratch go.mod: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte("package build\n"), 0o644); err != nil {
		return fmt.Errorf("writing scratch package: %w", err)
	}
	return nil
}

// Command returns the go command with args, run in dir outside any
// workspace, resolving modules (GOFLAGS=-mod=mod) and building static
// binaries (CGO_ENABLED=0).
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	return cmd
}

// Output runs go with args in dir (as Command) and returns its standard
// output, trimmed; an error carries its standard error.
func Output(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := Command(ctx, dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Run runs go with args in dir (as Command), its output going to log; an
// error carries the last 20 lines it wrote.
func Run(ctx context.Context, dir string, log io.Writer, args ...string) error {
	cmd := Command(ctx, dir, args...)
	var tail bytes.Buffer
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, &tail)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w: %s", args[0], err, LastLines(tail.String(), 20))
	}
	return nil
}

// LastLines returns the last n lines of s, for an error message that quotes
// a log.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stampFile is the file in a binary directory that records what was built
// there, and with which Go.
const stampFile = ".stamp"

// Current reports whether binDir holds every one of bins, executable, and
// a stamp equal to stamp (WriteStamp's, after the last good build).
func Current(binDir, stamp string, bins ...string) bool {
	have, err := os.ReadFile(filepath.Join(binDir, stampFile))
	if err != nil || string(have) != stamp {
		return false
	}
	for _, b := range bins {
		st, err := os.Stat(filepath.Join(binDir, b))
		if err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// WriteStamp marks binDir as built for stamp, which names what was built
// and the Go toolchain ("kube=v1.36.3 … go=go1.26.8"); call it only after
// every binary was built.
func WriteStamp(binDir, stamp string) error {
	if err := os.WriteFile(filepath.Join(binDir, stampFile), []byte(stamp), 0o644); err != nil {
		return fmt.Errorf("writing build stamp: %w", err)
	}
	return nil
}
