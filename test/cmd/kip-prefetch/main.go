// Command kip-prefetch prepares, ahead of the steps of make check that
// need them, what no earlier step compiles:
//
//	kip-prefetch -make make -bin bin/prefetch
//
// It installs golangci-lint (hack/tools.sh) while it downloads and resolves
// the Go modules of the control plane and the kubelet, CoreDNS and
// metrics-server without compiling them; then it runs make build into the
// -bin directory (the compile without -race, static and -trimpath, that
// make examples, make demo-check and the full pass's build of kip's image
// then only link); then it builds the control plane, the kubelet node,
// CoreDNS and metrics-server into their caches.
//
// make check starts it in the background at the lowest priority (nice 19)
// before verify, so that it uses the CPU that verify and test leave idle
// (downloads, tests that wait on timers and processes). It makes itself
// the leader of a process group of its own, which make check kills whole
// when it ends, compilers and all; it stays in make check's session, for
// under the kernel's autogroup scheduling a new session would be a group
// of its own, scheduled beside make check as an equal whatever its nice
// value. Each build takes the same per-build lock as the tests
// (test/modbuild), so a test that needs one while kip-prefetch builds it
// waits and then finds it built. What is built already is left alone; on a
// warm machine it returns in seconds. It exits non-zero on the first
// failure, which changes nothing for the tests: each build runs again
// where a step needs it and reports there what fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/images"
)

func main() {
	makeCmd := flag.String("make", "make", "the make command, for make build")
	bin := flag.String("bin", "bin/prefetch", "where make build puts its binaries (BIN)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kip-prefetch [-make make] [-bin dir]")
		os.Exit(2)
	}
	// make build's recipes run in other directories (plugins/gce).
	binDir, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-prefetch:", err)
		os.Exit(2)
	}
	// A group of its own, for make check to kill whole; not a session
	// (see the package comment).
	if err := syscall.Setpgid(0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "kip-prefetch: leading a process group of its own:", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, *makeCmd, binDir, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-prefetch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, makeCmd, bin string, log io.Writer) error {
	start := time.Now()
	lint := make(chan error, 1)
	go func() { lint <- command(ctx, log, "hack/tools.sh", "golangci-lint") }()
	err := controlplane.Resolve(ctx, controlplane.BuildOptions{Log: log})
	if err != nil {
		err = fmt.Errorf("resolving the control plane's modules: %w", err)
	} else {
		err = images.Resolve(ctx, log)
	}
	if err := errors.Join(err, <-lint); err != nil {
		return err
	}
	fmt.Fprintf(log, "kip-prefetch: golangci-lint, and the modules of the control plane, CoreDNS and metrics-server (%s)\n", time.Since(start).Round(time.Second))
	if err := command(ctx, log, makeCmd, "--no-print-directory", "build", "BIN="+bin); err != nil {
		return err
	}
	fmt.Fprintf(log, "kip-prefetch: make build (%s)\n", time.Since(start).Round(time.Second))
	if err := build(ctx, log); err != nil {
		return err
	}
	fmt.Fprintf(log, "kip-prefetch: the control plane, the kubelet, CoreDNS and metrics-server are built (%s)\n", time.Since(start).Round(time.Second))
	return nil
}

// command runs name with args, its output to log.
func command(ctx context.Context, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running %s %v: %w", name, args, err)
	}
	return nil
}

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
	return nil
}
