package modbuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Program is a Go command of a published module, built from the Go module
// proxy at a pinned version: CoreDNS and metrics-server (test/images),
// virtual-kubelet's mock node (test/scale).
type Program struct {
	// Name is the binary's name, its cache directory's and, with the
	// version, the stamp's.
	Name    string
	Module  string
	Version string
	// Pkg is the command's package: Module itself, or a package in it.
	Pkg string
	// Cold says how long a cold build takes, for the progress line.
	Cold string
}

// Build compiles p from the Go module proxy (a throwaway module,
// GOWORK=off, CGO_ENABLED=0, -trimpath) into
// <cacheDir>/<version>/bin/<name> and returns that path; an empty cacheDir
// means CacheDir(p.Name). When the binary is there already, built by the
// same Go toolchain (a stamp records both), it returns at once. The
// module's go directive must not ask for a newer Go than the one
// installed. Progress lines and the go command's output go to log (nil:
// discarded).
func (p Program) Build(ctx context.Context, cacheDir string, log io.Writer) (string, error) {
	if cacheDir == "" {
		dir, err := CacheDir(p.Name)
		if err != nil {
			return "", err
		}
		cacheDir = dir
	}
	if log == nil {
		log = io.Discard
	}
	goVersion, err := GoVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the Go toolchain: %w (install Go; %s %s needs it)", err, p.Name, p.Version)
	}
	dir := filepath.Join(cacheDir, p.Version)
	bin := filepath.Join(dir, "bin")
	out := filepath.Join(bin, p.Name)
	stamp := fmt.Sprintf("%s=%s go=%s", p.Name, p.Version, goVersion)
	if Current(bin, stamp, p.Name) {
		return out, nil
	}
	unlock, err := Lock(ctx, dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if Current(bin, stamp, p.Name) { // built by the process that held the lock
		return out, nil
	}

	modVersion := p.Module + "@" + p.Version
	mod, err := GoMod(ctx, modVersion)
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", modVersion, err)
	}
	if err := CheckGo(goVersion, p.Name+" "+p.Version, mod); err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	scratch := fmt.Sprintf("module local/kip-%s-build\n\ngo %s\n\nrequire %s %s\n", p.Name, GoDirective(mod), p.Module, p.Version)
	if err := ScratchModule(src, []byte(scratch)); err != nil {
		return "", err
	}
	pkgVersion := p.Pkg + "@" + p.Version
	fmt.Fprintf(log, "modbuild: resolving %s\n", pkgVersion)
	if err := Run(ctx, src, log, "get", pkgVersion); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", bin, err)
	}
	start := time.Now()
	fmt.Fprintf(log, "modbuild: building %s %s into %s (cold: %s; cached afterwards)\n", p.Name, p.Version, bin, p.Cold)
	// Built beside the binary and renamed over it, so that a process that
	// finds the stamp of an earlier build never runs half a file.
	tmp := out + ".new"
	if err := Run(ctx, src, log, "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, p.Pkg); err != nil {
		return "", fmt.Errorf("building %s %s: %w", p.Name, p.Version, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing the %s binary: %w", p.Name, err)
	}
	fmt.Fprintf(log, "modbuild: built %s in %s\n", p.Name, time.Since(start).Round(time.Second))
	if err := WriteStamp(bin, stamp); err != nil {
		return "", err
	}
	return out, nil
}
