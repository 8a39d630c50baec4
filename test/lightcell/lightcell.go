// Package lightcell is a cell agent without containers, for scale and
// load tests that need many cells on one machine: the real agent
// (cell.Run: the join, mutual TLS, the pod logic of cell/pod, status,
// logs, exec, stats, the ClusterIP services table) over
// cell/runtime/fakeruntime, whose containers run no process. The real
// agent and a light one share everything but the runtime, and but the
// ClusterIP services, which a light cell counts (Programmed) instead of
// programming iptables, since its network namespace may be the machine's
// or the process's that hosts it.
//
// Three ways to run light cells:
//
//   - Cell.Run in a test's process (the host side's tests), or
//     StartProcess: a kip-light-cells process of the test's own;
//   - test/cmd/kip-light-cell, a drop-in for kip-cell (the same flags,
//     cell.Flags): one light cell, one process;
//   - test/cmd/kip-light-cells, many light cells in one process: one per
//     bootstrap file of a directory, and those handed over on a unix
//     socket (ServeHandoffs) by test/cmd/kip-light-stub, a small process
//     per cell that the local plugin (and so the cloud simulators, whose
//     instances are the local plugin's cells) runs as its agent command:
//     agentCommand [kip-light-stub, SOCKET, --bootstrap, {bootstrap}, …].
//     A handed cell listens in the stub's network namespace (netns mode)
//     and logs to the stub's stderr (the cell's agent.log).
//
// Its tests are also where the host's tests that need a real agent live,
// since host/ imports no agent package: host/cellclient's renewal against
// cell/server's identity (renew_test.go) and host/cells' cell outliving
// its certificates on light cells (certificates_test.go).
//
// It imports cell, cell/api, cell/runtime/fakeruntime, cell/clusterip,
// test/lightcell/handoff, x/sys/unix and testing; only tests and test
// commands import it.
package lightcell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/cell"
	"github.com/kipcell/kip/cell/clusterip"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/test/lightcell/handoff"
)

// Cell is one light cell: its fake runtime and what it was sent of the
// ClusterIP services.
type Cell struct {
	Runtime *fakeruntime.Runtime
	prog    *counter
}

// New returns a light cell whose runtime is configured by rcfg.
func New(rcfg fakeruntime.Config) *Cell {
	return &Cell{Runtime: fakeruntime.New(rcfg), prog: &counter{}}
}

// Programmed is how many tables the cell has programmed (whole or
// delta) and how many services the last one held.
func (c *Cell) Programmed() (syncs, services int64) {
	return c.prog.syncs.Load(), c.prog.services.Load()
}

// Run runs the cell as cell.Run runs a real one, until ctx ends (then
// its pod is stopped), with cfg's Runtime and ServicePrograms the light
// cell's.
func (c *Cell) Run(ctx context.Context, cfg cell.Config) error {
	cfg.Runtime = c.Runtime
	cfg.ServicePrograms = c.prog
	return cell.Run(ctx, cfg)
}

// counter is a Programmer that only counts.
type counter struct {
	syncs, services atomic.Int64
}

func (c *counter) Program(_ context.Context, s []clusterip.Service) error {
	c.syncs.Add(1)
	c.services.Store(int64(len(s)))
	return nil
}

// Options are what every cell of a process shares.
type Options struct {
	// Runtime configures each cell's fake runtime.
	Runtime fakeruntime.Config
	// Logger receives what ServeHandoffs says about cells it could not
	// start (their own logs go to their stubs' stderr); nil: discarded.
	Logger *slog.Logger
}

// ServeHandoffs runs the cells stubs hand over on lis (handoff), each
// until its stub asks it to stop or goes away, or until ctx ends; it
// returns once they have all ended.
func ServeHandoffs(ctx context.Context, lis *net.UnixListener, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var cells sync.WaitGroup
	defer cells.Wait()
	stop := context.AfterFunc(ctx, func() { _ = lis.Close() })
	defer stop()
	for {
		c, err := lis.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting handed cells: %w", err)
		}
		cells.Go(func() {
			h, err := handoff.Accept(c)
			if err != nil {
				_ = c.Close()
				log.WarnContext(ctx, "refusing a handed cell", "error", err)
				return
			}
			err = RunHanded(ctx, h, opts.Runtime)
			if err != nil {
				log.WarnContext(ctx, "handed cell ended", "args", h.Request.Args, "error", err)
			}
			h.Finish(err)
		})
	}
}

// RunHanded runs a handed cell as kip-cell would run with the stub's
// flags and environment, until the stub asks it to stop or ctx ends. It
// leaves h open (the caller Finishes it).
func RunHanded(ctx context.Context, h *handoff.Handed, rcfg fakeruntime.Config) error {
	fs := flag.NewFlagSet("kip-light-stub", flag.ContinueOnError)
	fs.SetOutput(h.Stderr)
	var flags cell.Flags
	flags.Register(fs, h.Getenv)
	if err := fs.Parse(h.Request.Args); err != nil {
		return fmt.Errorf("parsing the handed cell's flags: %w", err)
	}
	for _, p := range []*string{&flags.Bootstrap, &flags.Config.StateDir} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(h.Request.Dir, *p)
		}
	}
	cfg, err := flags.Load()
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if flags.Debug {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(h.Stderr, &slog.HandlerOptions{Level: level}))
	if cfg.NetNSPath == "" {
		// The stub's namespace is the cell's: the descriptor stays open
		// as long as the cell runs.
		cfg.NetNSPath = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), h.Netns.Fd())
	}
	if cfg.Listener, err = listenIn(h.Netns, cfg.ListenAddress()); err != nil {
		return fmt.Errorf("listening for the host in the cell's network namespace: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.Stopped():
			cancel()
		case <-ctx.Done():
		}
	}()
	return New(rcfg).Run(ctx, cfg)
}

// listenIn listens on addr in the network namespace netns: on this
// thread's namespace when it is netns, else on a thread that enters it
// for the while (the socket stays in the namespace it was made in).
func listenIn(netns *os.File, addr string) (net.Listener, error) {
	var target, own syscall.Stat_t
	if err := syscall.Fstat(int(netns.Fd()), &target); err != nil {
		return nil, err
	}
	if err := syscall.Stat("/proc/thread-self/ns/net", &own); err == nil && own.Dev == target.Dev && own.Ino == target.Ino {
		return net.Listen("tcp", addr)
	}
	type result struct {
		lis net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread that cannot go back stays locked and ends with the
		// goroutine.
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer back.Close()
		if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering the network namespace: %w", err)}
			return
		}
		lis, err := net.Listen("tcp", addr)
		if serr := unix.Setns(int(back.Fd()), unix.CLONE_NEWNET); serr != nil {
			ch <- result{lis: lis, err: errors.Join(err, serr)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{lis: lis, err: err}
	}()
	r := <-ch
	if r.err != nil && r.lis != nil {
		_ = r.lis.Close()
		return nil, r.err
	}
	return r.lis, r.err
}
