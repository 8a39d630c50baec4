// Command kip-cluster builds and runs a local Kubernetes control plane for
// Kip's demo and end-to-end tests (see test/controlplane).
//
//	kip-cluster build                 build the binaries (cached per version)
//	kip-cluster up [--nodes kip] [--apiserver-port N]
//	                                  build if needed, start, print the KUBECONFIG export
//	kip-cluster env                   print export lines for the running cluster
//	kip-cluster down [--purge]        stop it (and delete its state)
//
// --state DIR picks the state directory (default $XDG_STATE_HOME/kip/cluster);
// KIP_KUBE_VERSION picks the Kubernetes version (default v1.36.3).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/controlplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-cluster:", err)
		os.Exit(1)
	}
}

func defaultStateDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "kip", "cluster")
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kip-cluster", flag.ContinueOnError)
	state := fs.String("state", defaultStateDir(), "state directory")
	nodes := fs.String("nodes", "kip", "comma-separated virtual node names that get a system:node kubeconfig")
	purge := fs.Bool("purge", false, "down: also delete the state directory")
	timeout := fs.Duration("ready-timeout", 2*time.Minute, "up: how long to wait for each component")
	apiPort := fs.Int("apiserver-port", 0, "up: the API server's port on 127.0.0.1 (0: a free one)")
	// Flags may stand before or after the command.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: kip-cluster [--state DIR] build|up|env|down [--nodes a,b] [--purge]")
	}
	command := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	build := controlplane.BuildOptions{Log: os.Stderr}
	switch command {
	case "build":
		bin, err := controlplane.Build(ctx, build)
		if err != nil {
			return err
		}
		fmt.Println(bin)
		return nil
	case "up":
		bin, err := controlplane.Build(ctx, build)
		if err != nil {
			return err
		}
		c, err := controlplane.Start(ctx, controlplane.Options{
			StateDir:     *state,
			BinDir:       bin,
			NodeNames:    strings.Split(*nodes, ","),
			ReadyTimeout: *timeout,
			Ports:        controlplane.Ports{APIServer: *apiPort},
			Log:          os.Stderr,
		})
		if errors.Is(err, controlplane.ErrRunning) {
			// Already up: reuse it.
			if c, lerr := controlplane.Load(*state); lerr == nil {
				fmt.Fprintf(os.Stderr, "kip-cluster: control plane already running at %s; to use it:\n", c.APIServerURL)
				fmt.Print(c.Env())
				return nil
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kip-cluster: control plane up at %s; to use it:\n", c.APIServerURL)
		fmt.Print(c.Env())
		return nil
	case "env":
		c, err := controlplane.Load(*state)
		if err != nil {
			return err
		}
		fmt.Print(c.Env())
		return nil
	case "down":
		if err := controlplane.Stop(*state, 20*time.Second); err != nil {
			return err
		}
		if *purge {
			if err := os.RemoveAll(*state); err != nil {
				return fmt.Errorf("removing %s: %w", *state, err)
			}
		}
		fmt.Fprintln(os.Stderr, "kip-cluster: control plane stopped")
		return nil
	default:
		return fmt.Errorf("unknown command %q (build, up, env, down)", command)
	}
}
