// Command kip-cluster builds and runs a local Kubernetes control plane for
// Kip's demo and end-to-end tests (see test/controlplane).
//
//	kip-cluster build [--log FILE]    build the binaries (cached per version)
//	kip-cluster up [--log FILE] [--nodes kip] [--apiserver-port N] [--apiserver-arg FLAG]...
//	               [--kubelet [--kubelet-registry HOST:PORT]...]
//	                                  build if needed, start, print the KUBECONFIG export
//	kip-cluster env                   print export lines for the running cluster
//	kip-cluster down [--purge]        stop it (and delete its state)
//
// --log FILE (up, build) sends the build's and the control plane's log,
// the Go tool's own output among it, to FILE (appended) instead of
// stderr, and prints only one line per step on stderr: a cold build with
// about how long it takes, the build done, the control plane up (make
// demo runs it so).
// --state DIR picks the state directory (default $XDG_STATE_HOME/kip/cluster);
// KIP_KUBE_VERSION picks the Kubernetes version (default v1.36.3).
// --kubelet also builds (cached) and starts a real kubelet node, kip-infra,
// in a network namespace of its own (test/kubeletnode), for the cluster's
// own add-ons; --kubelet-registry names a plain-HTTP registry its
// containerd may pull from. down stops it with the control plane.
// --apiserver-arg adds a kube-apiserver flag when up starts the control
// plane (not when it finds it running), e.g. --v=4. (The control plane
// always runs with --enable-aggregator-routing=true: the API server calls
// webhooks and aggregated APIs at their Service's endpoints, pod IPs,
// since no kube-proxy leads its ClusterIP anywhere on this host;
// docs/networking.md.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/kubeletnode"
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

// options are kip-cluster's flags.
type options struct {
	state, nodes  string
	purge         bool
	timeout       time.Duration
	apiPort       int
	apiserverArgs []string
	kubelet       bool
	registries    []string
	log           string
}

// parse reads the command and its flags, which may stand before or after
// the command.
func parse(args []string) (string, options, error) {
	var o options
	fs := flag.NewFlagSet("kip-cluster", flag.ContinueOnError)
	fs.StringVar(&o.state, "state", defaultStateDir(), "state directory")
	fs.StringVar(&o.nodes, "nodes", "kip", "comma-separated virtual node names that get a system:node kubeconfig")
	fs.BoolVar(&o.purge, "purge", false, "down: also delete the state directory")
	fs.DurationVar(&o.timeout, "ready-timeout", 2*time.Minute, "up: how long to wait for each component")
	fs.IntVar(&o.apiPort, "apiserver-port", 0, "up: the API server's port on 127.0.0.1 (0: a free one)")
	fs.Func("apiserver-arg", "up: one more kube-apiserver flag, such as --enable-aggregator-routing=true (repeatable)",
		func(s string) error { o.apiserverArgs = append(o.apiserverArgs, s); return nil })
	fs.BoolVar(&o.kubelet, "kubelet", false, "up: also start a real kubelet node, "+kubeletnode.DefaultName+" (built from source, cached)")
	fs.Func("kubelet-registry", "up: a plain-HTTP registry (HOST:PORT) the kubelet node pulls from (repeatable)",
		func(s string) error { o.registries = append(o.registries, s); return nil })
	fs.StringVar(&o.log, "log", "", "up, build: append the build's and the control plane's log to this file, print only the steps on stderr")
	if err := fs.Parse(args); err != nil {
		return "", o, err
	}
	if fs.NArg() == 0 {
		return "", o, errors.New("usage: kip-cluster [--state DIR] build|up|env|down [--nodes a,b] [--apiserver-arg FLAG]... [--kubelet] [--purge]")
	}
	command := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return "", o, err
	}
	if fs.NArg() > 0 {
		return "", o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return command, o, nil
}

func run(ctx context.Context, args []string) error {
	command, o, err := parse(args)
	if err != nil {
		return err
	}
	logw, closeLog, err := openLog(o.log)
	if err != nil {
		return err
	}
	defer closeLog()
	build := controlplane.BuildOptions{Log: logw}
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
		nodeBin := ""
		if o.kubelet {
			if nodeBin, err = controlplane.BuildNode(ctx, build); err != nil {
				return err
			}
		}
		c, err := controlplane.Start(ctx, controlplane.Options{
			StateDir:     o.state,
			BinDir:       bin,
			NodeNames:    strings.Split(o.nodes, ","),
			ReadyTimeout: o.timeout,
			Ports:        controlplane.Ports{APIServer: o.apiPort},
			ExtraArgs:    map[string][]string{"kube-apiserver": o.apiserverArgs},
			Log:          logw,
		})
		if errors.Is(err, controlplane.ErrRunning) {
			// Already up: reuse it.
			if c, lerr := controlplane.Load(o.state); lerr == nil {
				if o.log != "" {
					fmt.Fprintf(os.Stderr, "  control plane already running at %s\n", c.APIServerURL)
				} else {
					fmt.Fprintf(os.Stderr, "kip-cluster: control plane already running at %s; to use it:\n", c.APIServerURL)
				}
				fmt.Print(c.Env())
				return nil
			}
		}
		if err != nil {
			return err
		}
		if o.kubelet {
			if _, err := kubeletnode.Start(ctx, c, kubeletnode.Options{
				BinDir: nodeBin, Registries: o.registries, ReadyTimeout: o.timeout, Log: logw,
			}); err != nil {
				_ = c.Stop()
				return err
			}
		}
		if o.log != "" {
			fmt.Fprintf(os.Stderr, "  control plane up at %s (its log: %s)\n", c.APIServerURL, o.log)
		} else {
			fmt.Fprintf(os.Stderr, "kip-cluster: control plane up at %s; to use it:\n", c.APIServerURL)
		}
		fmt.Print(c.Env())
		return nil
	case "env":
		c, err := controlplane.Load(o.state)
		if err != nil {
			return err
		}
		fmt.Print(c.Env())
		return nil
	case "down":
		if err := stopNodes(o.state); err != nil {
			return err
		}
		if err := controlplane.Stop(o.state, 20*time.Second); err != nil {
			return err
		}
		if o.purge {
			if err := os.RemoveAll(o.state); err != nil {
				return fmt.Errorf("removing %s: %w", o.state, err)
			}
		}
		fmt.Fprintln(os.Stderr, "kip-cluster: control plane stopped")
		return nil
	default:
		return fmt.Errorf("unknown command %q (build, up, env, down)", command)
	}
}

// openLog returns where up and build write their log: stderr when path is
// empty, else path (appended) through controlplane.Progress, which prints
// the steps a person follows on stderr.
func openLog(path string) (io.Writer, func(), error) {
	if path == "" {
		return os.Stderr, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the log: %w", err)
	}
	return controlplane.Progress(os.Stderr, f), func() { _ = f.Close() }, nil
}

// stopNodes stops the kubelet nodes up --kubelet started (their state is
// under nodes/ in the cluster's).
func stopNodes(state string) error {
	entries, err := os.ReadDir(filepath.Join(state, "nodes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // none
	}
	if err != nil {
		return fmt.Errorf("listing kubelet nodes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, kubeletnode.Stop(filepath.Join(state, "nodes", e.Name())))
		}
	}
	return errors.Join(errs...)
}
