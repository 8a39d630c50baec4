package modbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// It is ignored when Main is set.
	Pkg string
	// Main, when set, is the source of a main package of Kip's own,
	// built in the throwaway module in place of Pkg: a command made of
	// some of Module's packages only (CoreDNS with the plugins a cluster
	// uses, not the cloud DNS ones, whose modules are most of its
	// download). Its imports of Module's packages are resolved at
	// Version.
	Main string
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
	return p.make(ctx, cacheDir, log, true)
}

// Resolve does what Build does before it compiles: it downloads the
// modules p needs into the module cache and resolves them in the
// throwaway module, under the same lock. A Build afterwards finds them
// there and only compiles; make check resolves ahead, while it compiles
// Kip (kip-prefetch), so that the download waits on the network beside
// the CPU's work. It does nothing when the binary is built already.
func (p Program) Resolve(ctx context.Context, cacheDir string, log io.Writer) error {
	_, err := p.make(ctx, cacheDir, log, false)
	return err
}

// make resolves p and, with compile, builds it (Build, Resolve).
func (p Program) make(ctx context.Context, cacheDir string, log io.Writer, compile bool) (string, error) {
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
	pkgs := []string{p.Pkg}
	if p.Main != "" {
		// Another main is another binary: its digest is in the stamp.
		sum := sha256.Sum256([]byte(p.Main))
		stamp += " main=" + hex.EncodeToString(sum[:6])
		if pkgs, err = MainImports(p.Main, p.Module); err != nil {
			return "", fmt.Errorf("reading the main package of %s: %w", p.Name, err)
		}
	}
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
	get := []string{"get"}
	for _, pkg := range pkgs {
		get = append(get, pkg+"@"+p.Version)
	}
	// controlplane.Progress shows this line as "downloading the Go
	// modules of NAME VERSION": the first half of a cold build's wait.
	fmt.Fprintf(log, "modbuild: resolving %s %s: %s\n", p.Name, p.Version, strings.Join(get[1:], " "))
	if err := Run(ctx, src, log, get...); err != nil {
		return "", fmt.Errorf("resolving modules: %w", err)
	}
	if !compile {
		return "", nil
	}
	target := p.Pkg
	if p.Main != "" {
		// Beside the scratch module's own package, in a directory of its own.
		mainDir := filepath.Join(src, p.Name)
		if err := os.MkdirAll(mainDir, 0o755); err != nil {
			return "", fmt.Errorf("creating %s: %w", mainDir, err)
		}
		if err := os.WriteFile(filepath.Join(mainDir, "main.go"), []byte(p.Main), 0o644); err != nil { //nolint:gosec // G306: source in a build directory
			return "", fmt.Errorf("writing the main package of %s: %w", p.Name, err)
		}
		target = "./" + p.Name
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", bin, err)
	}
	start := time.Now()
	fmt.Fprintf(log, "modbuild: building %s %s into %s (cold: %s; cached afterwards)\n", p.Name, p.Version, bin, p.Cold)
	// Built beside the binary and renamed over it, so that a process that
	// finds the stamp of an earlier build never runs half a file.
	tmp := out + ".new"
	if err := Run(ctx, src, log, "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, target); err != nil {
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

// MainImports returns the packages of module that the Go source main
// imports, in its order: what Build resolves with go get before it builds
// a Main of its own.
func MainImports(main, module string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", main, parser.ImportsOnly)
	if err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	var pkgs []string
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("parsing import %s: %w", imp.Path.Value, err)
		}
		if path == module || strings.HasPrefix(path, module+"/") {
			pkgs = append(pkgs, path)
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("it imports no package of %s", module)
	}
	return pkgs, nil
}
