// Command kip-light-cells runs many light cell agents (test/lightcell) in
// one process, one per bootstrap file (*.json) in a directory, each on its
// bootstrap's listenAddress, keeping each one's key in DIR/<cell
// ID>.identity. It prints "ready <n>" once all of them listen, and runs
// until SIGTERM or SIGINT; a light cell waits to be joined as a real one.
//
//	kip-light-cells -bootstraps DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/test/lightcell"
)

func main() {
	dir := flag.String("bootstraps", "", "directory of bootstrap files, one light cell each")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kip-light-cells:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		if err != nil {
			return fmt.Errorf("listing bootstrap files in %q: %w", dir, err)
		}
		return fmt.Errorf("no bootstrap files in %q", dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var (
		wg        sync.WaitGroup
		listening sync.WaitGroup
		errs      = make(chan error, len(files))
	)
	for _, file := range files {
		b, err := cellapi.ReadBootstrap(file)
		if err != nil {
			return err
		}
		listening.Add(1)
		wg.Go(func() {
			once := sync.OnceFunc(listening.Done)
			defer once()
			if err := lightcell.New().Serve(ctx, b, filepath.Join(dir, b.CellID+".identity"), once); err != nil {
				errs <- err
				stop()
			}
		})
	}
	listening.Wait()
	select {
	case err := <-errs:
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
