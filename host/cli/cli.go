package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// Version is kip's release version, set at build time with
// -ldflags "-X github.com/kipcell/kip/host/cli.Version=v0.1.0".
var Version = "0.0.0-dev"

// Env is what a command sees of its process: arguments, streams,
// environment and the path of the kip binary.
type Env struct {
	Stdout, Stderr io.Writer
	Environ        []string
	// Executable is the kip binary's path; its directory is the default
	// plugin directory.
	Executable string
}

// ProcessEnv returns the Env of the running process.
func ProcessEnv() Env {
	exe, err := os.Executable()
	if err == nil {
		exe, _ = filepath.EvalSymlinks(exe)
	}
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ(), Executable: exe}
}

// exitError carries an exit status with an already-printed failure.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

const usage = `kip runs a Kubernetes virtual node whose every pod gets its own right-sized
cloud instance (a cell), launched through a cloud plugin.

Usage:
  kip run --config FILE [--plugin-dir DIR] [--node-name NAME]
                                           run the virtual node (the daemon)
  kip version                              print kip's version and the plugin API versions it accepts
  kip cells [--address URL | --config FILE] [-o table|json]
                                           the running kip's cells: pod, instance, type, zone,
                                           capacity type, price, phase, age
  kip plugins list [--plugin-dir DIR] [-o table|json]
                                           every plugin found: name, version, API versions,
                                           capabilities, path, SHA-256
  kip plugins describe NAME [--plugin-dir DIR]
                                           start the plugin, handshake, print its GetInfo as JSON
  kip plugins verify NAME --config FILE [--plugin-dir DIR]
                                           handshake, GetInfo and Configure with FILE's settings

The plugin directory defaults to $KIP_PLUGIN_DIR, else the directory of the kip binary.
`

// Run runs kip with args (without the program name) and returns the exit
// status: 0 success, 1 failure, 2 usage error.
func Run(ctx context.Context, args []string, env Env) int {
	err := run(ctx, args, env)
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "kip: %v\n\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(env.Stderr, "kip: %v\n", err)
		return 1
	}
}

var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

func run(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return usageError("no command")
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintf(env.Stdout, "kip %s (%s %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		fmt.Fprintf(env.Stdout, "plugin API %s (protocol %d): accepts plugins listing API %s, or any other %d.x\n",
			pluginapi.APIVersion, pluginapi.ProtocolVersion, strings.Join(pluginapi.SupportedAPIVersions(), ", "), pluginapi.ProtocolVersion)
		return nil
	case "run":
		return runDaemon(ctx, args[1:], env)
	case "plugins":
		return runPlugins(ctx, args[1:], env)
	case "cells":
		return runCells(ctx, args[1:], env)
	case "help", "-h", "--help":
		fmt.Fprint(env.Stdout, usage)
		return nil
	default:
		return usageError("unknown command %q", args[0])
	}
}

func newFlagSet(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("verify local --config f" and "verify --config f local").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
