// Command kip-light-cell is a light cell (test/lightcell) in a process of
// its own: a drop-in for kip-cell, with kip-cell's flags (cell.Flags),
// whose containers run no process (cell/runtime/fakeruntime). The flags
// about containerd are accepted and unused. For many cells in one
// process, see kip-light-cells and kip-light-stub.
//
//	kip-light-cell [-pull-delay D] --bootstrap FILE [kip-cell flags]
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/test/lightcell"
)

func main() {
	var flags cell.Flags
	flags.Register(flag.CommandLine, os.Getenv)
	pullDelay := flag.Duration("pull-delay", 0, "how long a light cell takes to pull an image")
	flag.Parse()
	level := slog.LevelInfo
	if flags.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := flags.Load()
	if err == nil {
		cfg.Logger = log
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err = lightcell.New(fakeruntime.Config{PullDelay: *pullDelay}).Run(ctx, cfg)
		stop()
	}
	if err != nil {
		log.Error("kip-light-cell failed", "error", err)
		os.Exit(1)
	}
}
