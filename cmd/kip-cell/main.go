// Command kip-cell is the cell agent: it runs the pod bound to its cell
// through containerd and serves the kip host over mutual TLS (see package
// github.com/kipcell/kip/cell; its Flags are this command's).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"

	containerdlog "github.com/containerd/log"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/nfsfuse"
)

// version is set at build time (make build, make dist, make images:
// -X main.version=...).
var version = "dev"

func main() {
	// The agent runs itself as the process behind a FUSE NFS mount
	// (nfsfuse.Start): that process has its own flags.
	if len(os.Args) > 1 && os.Args[1] == nfsfuse.Command {
		os.Exit(nfsfuse.Main(os.Args[2:]))
	}
	var (
		flags   cell.Flags
		showVer bool
	)
	flags.Register(flag.CommandLine, os.Getenv)
	flag.BoolVar(&showVer, "version", false, "print the version and exit")
	flag.Parse()
	if showVer {
		fmt.Printf("kip-cell %s (%s %s/%s)\n", version, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
		return
	}

	level := slog.LevelInfo
	if flags.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	_ = containerdlog.SetLevel("warn")

	if err := run(&flags, log); err != nil {
		log.Error("kip-cell failed", "error", err)
		os.Exit(1)
	}
}

func run(flags *cell.Flags, log *slog.Logger) error {
	// Before anything of the cell is touched: an agent whose supervisor
	// died before recording it must not run beside the one the next
	// supervisor starts.
	open, err := cell.AwaitStartGate(os.Getenv)
	if err != nil {
		return err
	}
	_ = os.Unsetenv(cell.EnvStartGate)
	if !open {
		log.Warn("exiting: the supervisor that started this agent ended before it recorded it")
		return nil
	}
	cfg, err := flags.Load()
	if err != nil {
		return err
	}
	cfg.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return cell.Run(ctx, cfg)
}
