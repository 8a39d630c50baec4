// Command kip-prefetch downloads and resolves the Go modules of what the
// end-to-end tests build from the Go module proxy (the control plane and
// the kubelet, CoreDNS, metrics-server) without compiling them:
//
//	kip-prefetch
//
// make check starts it in the background before verify, so that on a cold
// machine those downloads wait on the network while Kip compiles, not
// later in front of an idle CPU. The builds take the same per-build locks
// (test/modbuild), so a test that needs one while kip-prefetch resolves it
// waits and then finds its modules there. What is built already is left
// alone; on a warm machine it returns at once. It exits non-zero on the
// first failure, which changes nothing for the tests: each build resolves
// its modules again and reports there what fails.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-prefetch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start := time.Now()
	if err := controlplane.Resolve(ctx, controlplane.BuildOptions{Log: os.Stdout}); err != nil {
		return fmt.Errorf("resolving the control plane's modules: %w", err)
	}
	if err := images.Resolve(ctx, os.Stdout); err != nil {
		return err
	}
	fmt.Printf("kip-prefetch: the modules of the control plane, CoreDNS and metrics-server are in the module cache (%s)\n", time.Since(start).Round(time.Second))
	return nil
}
