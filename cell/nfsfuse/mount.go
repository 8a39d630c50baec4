package nfsfuse

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Command is the first argument that makes kip-cell run Main.
const Command = "nfs-fuse"

// readyFD is the child's file descriptor of the pipe it reports on: "ok"
// once the mount is in place, or "error: <why>" before it exits.
const readyFD = 3

// portmapperPort is the portmapper's port (RFC 1833); tests move it.
var portmapperPort = "111"

// stopWait is how long Start waits for a child it stops (its ctx ended)
// to unmount and exit before it kills it.
const stopWait = 5 * time.Second

// Start mounts opts.Export of opts.Server on opts.Target: it starts
// "exe nfs-fuse <flags>" (exe is /proc/self/exe in the agent) in its own
// session, so that the mount outlives an agent that dies and is restarted,
// and returns once the child reports the mount in place (nil) or fails
// (its message: "mounting 10.0.0.5:/srv/share: MNT: permission denied").
// When ctx ends first the child is stopped and Start returns ctx's error.
//
// The child serves until the mount is unmounted (the agent unmounts
// Target when the pod ends: the child then exits 0) or it gets SIGTERM:
// it unmounts and exits; a busy mount is detached (MNT_DETACH) and the
// files still open in it are served until they are closed. Start reaps it.
func Start(ctx context.Context, exe string, opts Options) error {
	what := source(opts.Server, opts.Export)
	if _, err := opts.resolve(); err != nil {
		return fmt.Errorf("mounting %s: %w", what, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("mounting %s: %w", what, err)
	}
	defer r.Close()
	cmd := exec.Command(exe, append([]string{Command}, opts.args()...)...)
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if opts.LogFile != "" {
		lf, err := os.OpenFile(opts.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			w.Close()
			return fmt.Errorf("mounting %s: opening the log: %w", what, err)
		}
		defer lf.Close()
		cmd.Stderr = lf
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("mounting %s: starting %s: %w", what, exe, err)
	}
	exited := make(chan error, 1)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(l)
		exited <- cmd.Wait()
	}()
	select {
	case l := <-line:
		if l == "ok" {
			return nil // the goroutine reaps the child when it exits
		}
		err := <-exited
		if msg, ok := strings.CutPrefix(l, "error: "); ok {
			return fmt.Errorf("mounting %s: %s", what, msg)
		}
		return fmt.Errorf("mounting %s: the mount process ended without a word: %w", what, err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case werr := <-exited:
			_ = werr // stopped on purpose: how it ended is no news
		case <-time.After(stopWait):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return fmt.Errorf("mounting %s: %w", what, ctx.Err())
	}
}

// Main is the child: what "kip-cell nfs-fuse <flags>" runs. It mounts,
// reports on fd 3, serves until the mount is unmounted or SIGTERM, and
// returns the exit code: 0 after an unmount, 1 when the mount failed, 2
// for bad flags.
func Main(args []string) int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "nfs-fuse")
	// fd 3 is the parent's pipe only when Start ran us; by hand it may be
	// anything (the Go runtime's epoll), which must not be written or
	// closed.
	var ready *os.File
	var st syscall.Stat_t
	if syscall.Fstat(readyFD, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
		ready = os.NewFile(readyFD, "ready")
	}
	report := func(msg string) {
		if ready != nil {
			_, _ = io.WriteString(ready, msg+"\n")
			_ = ready.Close()
			ready = nil
		}
	}

	o, err := parseFlags(args)
	if err != nil {
		log.Error("bad flags", "error", err)
		report("error: " + err.Error())
		return 2
	}
	s, err := o.resolve()
	if err != nil {
		log.Error("bad options", "error", err)
		report("error: " + err.Error())
		return 2
	}
	log = log.With("server", s.server, "export", s.export, "target", s.target)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	m, err := mount(ctx, s, log)
	if err != nil {
		log.Error("mount failed", "error", err)
		report("error: " + err.Error())
		return 1
	}
	log.Info("mounted", "nfs_port", m.nfsPort, "mount_port", m.mountPort)
	report("ok")

	served := make(chan struct{})
	go func() {
		m.server.Wait()
		close(served)
	}()
	select {
	case <-served:
		log.Info("unmounted")
	case <-ctx.Done():
		log.Info("stopping: unmounting")
		if err := m.server.Unmount(); err != nil {
			// Busy: detach it. The files still open in it keep
			// working until closed (the kernel ends the FUSE
			// connection then, and Wait returns), rather than
			// failing under the containers that hold them.
			log.Warn("unmount failed, detaching", "error", err)
			_ = syscall.Unmount(s.target, syscall.MNT_DETACH)
		}
		<-served
	}
	m.close(log)
	return 0
}

// parseFlags reads the child's flags (Options.args writes them).
func parseFlags(args []string) (Options, error) {
	var o Options
	var mopts string
	fl := flag.NewFlagSet(Command, flag.ContinueOnError)
	fl.SetOutput(io.Discard) // the error goes to the parent on fd 3
	fl.StringVar(&o.Server, "server", "", "the server's IP address")
	fl.StringVar(&o.Export, "export", "", "the exported path")
	fl.StringVar(&o.Target, "target", "", "the directory to mount on")
	fl.BoolVar(&o.ReadOnly, "ro", false, "mount read-only")
	fl.IntVar(&o.NFSPort, "port", 0, "the NFS port (0: ask the portmapper)")
	fl.IntVar(&o.MountPort, "mountport", 0, "the MOUNT port (0: ask the portmapper)")
	fl.StringVar(&mopts, "o", "", "mount options, comma-separated")
	if err := fl.Parse(args); err != nil {
		return o, err
	}
	if fl.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if mopts != "" {
		o.Options = []string{mopts}
	}
	return o, nil
}

// mounted is a mount in place.
type mounted struct {
	server             *fuse.Server
	mountc, nfsc       *rpcClient
	export             string
	nfsPort, mountPort int
}

func (m *mounted) close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.mountc.ready.Store(false)
	if err := umnt(ctx, m.mountc, m.export); err != nil {
		log.Info("UMNT failed", "error", err)
	}
	m.mountc.close()
	m.nfsc.close()
}

// mount finds the ports, asks MOUNT for the export's handle, reads the
// server's transfer sizes and mounts FUSE on the target.
func mount(ctx context.Context, s settings, log *slog.Logger) (*mounted, error) {
	nfsPort, mountPort := s.nfsPort, s.mountPort
	if nfsPort == 0 || mountPort == 0 {
		np, mp, err := askPortmapper(ctx, s, log)
		if err != nil {
			return nil, err
		}
		if nfsPort == 0 {
			nfsPort = np
		}
		if mountPort == 0 {
			mountPort = mp
		}
	}
	mountc := newRPCClient(net.JoinHostPort(s.server, strconv.Itoa(mountPort)), s, log)
	root, err := mnt(ctx, mountc, s.export)
	if err != nil {
		mountc.close()
		return nil, fmt.Errorf("MNT: %w", err)
	}
	nfsc := mountc
	if nfsPort != mountPort {
		nfsc = newRPCClient(net.JoinHostPort(s.server, strconv.Itoa(nfsPort)), s, log)
	}
	m := &mounted{mountc: mountc, nfsc: nfsc, export: s.export, nfsPort: nfsPort, mountPort: mountPort}
	fail := func(err error) (*mounted, error) {
		m.close(log)
		return nil, err
	}
	c := &nfsClient{rpc: nfsc}
	info, err := c.fsinfo(ctx, &cred{}, root)
	if err != nil {
		return fail(fmt.Errorf("FSINFO: %w", err))
	}
	attr, err := c.getattr(ctx, &cred{}, root)
	if err != nil {
		return fail(fmt.Errorf("GETATTR of the export: %w", err))
	}
	fsys := &filesys{nfs: c, rsize: s.rsize, wsize: s.wsize, log: log}
	if info.rtmax > 0 {
		fsys.rsize = min(fsys.rsize, info.rtmax)
	}
	if info.wtmax > 0 {
		fsys.wsize = min(fsys.wsize, info.wtmax)
	}

	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
	if s.readOnly {
		flags |= syscall.MS_RDONLY
	}
	if s.noexec {
		flags |= syscall.MS_NOEXEC
	}
	timeout := s.attrTimeout
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        true, // the pod's containers run as any user
			FsName:            source(s.server, s.export),
			Name:              "nfs", // fuse.nfs in /proc/self/mountinfo
			DirectMountStrict: true,  // we are root; a cell has no fusermount
			DirectMountFlags:  flags,
			DisableXAttrs:     true, // NFSv3 has none
			MaxWrite:          int(min(fsys.wsize, 1<<20)),
		},
		// Attributes and entries are trusted for actimeo (1 s unless
		// set): short, since other clients of the export change it
		// behind our back, as the kernel client's acregmin/acdirmin
		// bound it; not 0, so that a stat storm does not become a
		// GETATTR storm. Negative entries are not cached: a file another
		// client creates is seen at once.
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		RootStableAttr: &fs.StableAttr{
			Mode: syscall.S_IFDIR,
			Ino:  attr.fileid,
		},
	}
	rootNode := &node{fsys: fsys, fh: root}
	server, err := fs.Mount(s.target, rootNode, opts)
	if err != nil {
		return fail(fmt.Errorf("mounting FUSE on %s: %w", s.target, err))
	}
	m.server = server
	// From now on a lost server is waited for, not an error.
	mountc.ready.Store(true)
	nfsc.ready.Store(true)
	return m, nil
}

// source is the mount's source as the kernel client shows it:
// "10.0.0.5:/srv/share", "[fd00::5]:/srv/share".
func source(server, export string) string {
	if strings.Contains(server, ":") {
		return "[" + server + "]:" + export
	}
	return server + ":" + export
}

// askPortmapper asks the portmapper (port 111) for the NFS and MOUNT v3
// TCP ports. Where no portmapper answers, both are 2049: go-nfs and many
// userspace servers serve both programs there and run no portmapper.
func askPortmapper(ctx context.Context, s settings, log *slog.Logger) (nfsPort, mountPort int, err error) {
	ps := s
	ps.resvport = false
	ps.timeo = min(s.timeo, 10*time.Second)
	pm := newRPCClient(net.JoinHostPort(s.server, portmapperPort), ps, log)
	defer pm.close()
	mountPort, err = getport(ctx, pm, progMount)
	if err == nil {
		nfsPort, err = getport(ctx, pm, progNFS)
	}
	var rpcErr *rpcError
	switch {
	case ctx.Err() != nil:
		return 0, 0, ctx.Err()
	case err != nil && !errors.As(err, &rpcErr):
		log.Info("no portmapper answers: NFS and MOUNT on 2049", "error", err)
		return 2049, 2049, nil
	case err != nil:
		return 0, 0, fmt.Errorf("asking the portmapper: %w", err)
	case mountPort == 0:
		return 0, 0, errors.New("the server's portmapper knows no MOUNT v3 over TCP")
	case nfsPort == 0:
		return 0, 0, errors.New("the server's portmapper knows no NFS v3 over TCP")
	}
	return nfsPort, mountPort, nil
}
