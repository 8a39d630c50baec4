// Command kip-prefetch prepares, ahead of the end-to-end tests, what they
// build that no test step before them compiles:
//
//	kip-prefetch resolve   download and resolve the Go modules of the control
//	                       plane and the kubelet, CoreDNS and metrics-server,
//	                       without compiling them
//	kip-prefetch build     build the control plane, the kubelet node, CoreDNS
//	                       and metrics-server into their caches, and compile
//	                       the binaries of kip's image (kip, kip-cell and the
//	                       local plugin: -trimpath, static) into the Go build
//	                       cache
//
// make check starts it in the background, in a process group of its own at
// the lowest priority (nice 19), before verify: resolve first, so that on a
// cold machine the downloads wait on the network while Kip compiles, then
// make build into a scratch directory, then build, which use the CPU that
// verify and test leave idle (their tests wait on timers and processes).
// Each build takes the same per-build lock as the tests (test/modbuild), so
// a test that needs one while kip-prefetch builds it waits and then finds it
// built. What is built already is left alone; on a warm machine it returns
// in seconds. It exits non-zero on the first failure, which changes nothing
// for the tests: each build runs again where a test needs it and reports
// there what fails.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	kipimages "github.com/kipcell/kip/deploy/images"
	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/images"
)

const usage = "usage: kip-prefetch resolve|build"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-prefetch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, phase string, log io.Writer) error {
	start := time.Now()
	switch phase {
	case "resolve":
		if err := controlplane.Resolve(ctx, controlplane.BuildOptions{Log: log}); err != nil {
			return fmt.Errorf("resolving the control plane's modules: %w", err)
		}
		if err := images.Resolve(ctx, log); err != nil {
			return err
		}
		fmt.Fprintf(log, "kip-prefetch: the modules of the control plane, CoreDNS and metrics-server are in the module cache (%s)\n", time.Since(start).Round(time.Second))
	case "build":
		if err := build(ctx, log); err != nil {
			return err
		}
		fmt.Fprintf(log, "kip-prefetch: the control plane, the kubelet, CoreDNS, metrics-server and kip's image binaries are built (%s)\n", time.Since(start).Round(time.Second))
	default:
		return fmt.Errorf("unknown phase %q (%s)", phase, usage)
	}
	return nil
}

// imageBinaries are the binaries of the kip image the full pass builds
// (test/e2e's pushKipImage: the local plugin only).
var imageBinaries = []string{"kip", "kip-cell", "kip-plugin-local"}

// build builds, in the order the full pass needs them, what it would
// otherwise build in front of it.
func build(ctx context.Context, log io.Writer) error {
	opts := controlplane.BuildOptions{Log: log}
	if _, err := controlplane.Build(ctx, opts); err != nil {
		return fmt.Errorf("building the control plane: %w", err)
	}
	if _, err := controlplane.BuildNode(ctx, opts); err != nil {
		return fmt.Errorf("building the kubelet node: %w", err)
	}
	if _, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{Log: log}); err != nil {
		return fmt.Errorf("building CoreDNS: %w", err)
	}
	if _, err := images.BuildMetricsServer(ctx, images.BuildOptions{Log: log}); err != nil {
		return fmt.Errorf("building metrics-server: %w", err)
	}
	repo, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("finding the checkout: %w", err)
	}
	compile := kipimages.GoBuild(repo, "prefetch") // the version is the link's alone: the compiles are the image's
	platform := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	for _, b := range kipimages.Binaries {
		if !slices.Contains(imageBinaries, b.Name) {
			continue
		}
		fmt.Fprintf(log, "kip-prefetch: compiling %s as kip's image has it\n", b.Name)
		if _, err := compile(ctx, b, platform); err != nil {
			return fmt.Errorf("compiling %s for kip's image: %w", b.Name, err)
		}
	}
	return nil
}
