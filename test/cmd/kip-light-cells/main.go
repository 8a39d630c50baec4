// Command kip-light-cells runs many light cell agents (test/lightcell) in
// one process: one per bootstrap file (*.json) in the directory of
// -bootstraps, each on its bootstrap's listenAddress with its state in
// DIR/<cell ID>/, and, with -listen, every cell a kip-light-stub hands
// over on that unix socket (the local plugin's agentCommand, for a
// thousand cells: test/lightcell/handoff). It prints "ready <n>" once the
// n cells of the directory and the socket listen, and runs until SIGTERM
// or SIGINT, then stops every cell (their pods too); a light cell waits to
// be joined as a real one.
//
//	kip-light-cells [-bootstraps DIR] [-listen SOCKET] [-pull-delay D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/test/lightcell"
)

func main() {
	dir := flag.String("bootstraps", "", "directory of bootstrap files, one light cell each")
	socket := flag.String("listen", "", "unix socket where kip-light-stub hands cells over")
	pullDelay := flag.Duration("pull-delay", 0, "how long a light cell takes to pull an image")
	flag.Parse()
	if err := run(*dir, *socket, fakeruntime.Config{PullDelay: *pullDelay}); err != nil {
		fmt.Fprintln(os.Stderr, "kip-light-cells:", err)
		os.Exit(1)
	}
}

func run(dir, socket string, rcfg fakeruntime.Config) error {
	if dir == "" && socket == "" {
		return errors.New("nothing to run: give -bootstraps, -listen or both")
	}
	var files []string
	if dir != "" {
		var err error
		if files, err = filepath.Glob(filepath.Join(dir, "*.json")); err != nil || len(files) == 0 {
			if err != nil {
				return fmt.Errorf("listing bootstrap files in %q: %w", dir, err)
			}
			return fmt.Errorf("no bootstrap files in %q", dir)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var (
		wg        sync.WaitGroup
		listening sync.WaitGroup
		errs      = make(chan error, len(files)+1)
	)
	defer wg.Wait()
	if socket != "" {
		lis, err := listenUnix(socket)
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := lightcell.ServeHandoffs(ctx, lis, lightcell.Options{Runtime: rcfg, Logger: log}); err != nil {
				errs <- err
				stop()
			}
		})
	}
	for _, file := range files {
		b, err := cell.ReadBootstrap(file)
		if err != nil {
			stop()
			return err
		}
		listening.Add(1)
		wg.Go(func() {
			once := sync.OnceFunc(listening.Done)
			defer once()
			err := lightcell.New(rcfg).Run(ctx, cell.Config{
				Bootstrap: b, StateDir: filepath.Join(dir, b.CellID), ResolvConf: "/etc/resolv.conf",
				StopGrace: 5 * time.Second, Logger: log, Ready: func(net.Addr) { once() },
			})
			if err != nil {
				errs <- err
				stop()
			}
		})
	}
	listening.Wait()
	select {
	case err := <-errs:
		stop()
		return err
	default:
	}
	fmt.Printf("ready %d\n", len(files))
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// listenUnix listens at socket for the stubs, in place of a socket an
// earlier run left.
func listenUnix(socket string) (*net.UnixListener, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the old socket: %w", err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening for handed cells: %w", err)
	}
	return lis, nil
}
