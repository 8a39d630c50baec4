package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs BuildBinaries makes, by package.
var Binaries = map[string]string{
	"kip":              "github.com/kipcell/kip/cmd/kip",
	"kip-cell":         "github.com/kipcell/kip/cmd/kip-cell",
	"kip-plugin-local": "github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local",
	"kip-plugin-aws":   "github.com/kipcell/kip/plugins/aws/cmd/kip-plugin-aws",
	"kip-plugin-gce":   "github.com/kipcell/kip/plugins/gce/cmd/kip-plugin-gce",
	"kip-plugin-azure": "github.com/kipcell/kip/plugins/azure/cmd/kip-plugin-azure",
	// The light cells (KipOptions.LightCells).
	"kip-light-cells": "github.com/kipcell/kip/test/cmd/kip-light-cells",
	"kip-light-stub":  "github.com/kipcell/kip/test/cmd/kip-light-stub",
}

// standalone are the modules outside go.work (the Makefile's
// STANDALONE), by module path, with their directories: the workspace
// cannot build them (plugins/gce's build list is its own), so their
// packages are built in their directory with GOWORK=off.
var standalone = map[string]string{"github.com/kipcell/kip/plugins/gce": "plugins/gce"}

// BuildBinaries builds kip, kip-cell and the plugins into dir (from the
// workspace the tests run in, or a standalone module's own); with
// RacePrograms, every one with -race, and their race reports go to
// dir/races (RaceReports).
func BuildBinaries(ctx context.Context, dir string) error {
	if RacePrograms() {
		races := filepath.Join(dir, "races")
		if err := os.MkdirAll(races, 0o755); err != nil { //nolint:gosec // kip's processes, of other users too, write there
			return fmt.Errorf("creating the race reports' directory: %w", err)
		}
		raceDir = races
	}
	for name := range Binaries {
		if err := BuildBinary(ctx, name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// BuildBinary builds the program name of Binaries to out, with more go
// build flags (-ldflags …) before the package; with -race when
// RacePrograms.
func BuildBinary(ctx context.Context, name, out string, flags ...string) error {
	pkg, ok := Binaries[name]
	if !ok {
		return fmt.Errorf("building %s: not one of framework.Binaries", name)
	}
	if RacePrograms() {
		flags = append([]string{"-race"}, flags...)
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	for module, dir := range standalone {
		if pkg == module || strings.HasPrefix(pkg, module+"/") {
			if cmd.Dir, err = repoFile(dir); err != nil {
				return fmt.Errorf("building %s: %w", name, err)
			}
			cmd.Env = append(os.Environ(), "GOWORK=off")
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return nil
}

// repoFile finds path relative to the repository root (the directory with
// go.work) from the test's working directory.
func repoFile(path string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, path), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding %s: no go.work above the working directory", path)
		}
		dir = parent
	}
}
