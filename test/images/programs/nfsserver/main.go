// Command nfsserver is Kip's NFS test server: it serves the directory -dir
// (default /export, created if missing) over NFSv3 and MOUNT v3 on the one
// TCP port -listen (default :2049), with github.com/willscott/go-nfs over
// an osfs file system. Any export path a client asks MOUNT for mounts that
// directory; each mount is logged ("mount" with the client's address and
// the path). It exits 0 on SIGTERM or SIGINT.
//
// It is a test server, not one to store anything in: no authentication
// (AUTH_SYS credentials are ignored: every call runs as the server's own
// user), no portmapper (clients need port=2049,mountport=2049 or a client
// that falls back to 2049, as cell/nfsfuse does), no locking, and the
// file handles live in its memory (a restarted server makes every handle
// stale), and hard links fail (go-nfs v0.0.3 decodes LINK's arguments as
// SYMLINK's).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	billy "github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	nfs "github.com/willscott/go-nfs"
	"github.com/willscott/go-nfs/helpers"

	"github.com/kipcell/kip/test/nfstest"
)

func main() {
	dir := flag.String("dir", "/export", "the directory to serve (created if missing)")
	listen := flag.String("listen", ":2049", "the TCP address to serve NFS and MOUNT on")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*dir, *listen, log); err != nil {
		log.Error("nfsserver failed", "error", err)
		os.Exit(1)
	}
}

func run(dir, listen string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	// go-nfs logs every lookup of a missing name as an error.
	nfs.Log.SetLevel(nfs.WarnLevel)
	fsys := nfstest.ChangeFS{Filesystem: osfs.New(dir)}
	h := &handler{Handler: helpers.NewNullAuthHandler(fsys), fs: fsys, log: log}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Info("serving", "dir", dir, "listen", ln.Addr().String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	// The handle cache must outlast what a test holds open: a handle it
	// forgot is NFS3ERR_STALE to the client.
	err = nfs.Serve(ln, helpers.NewCachingHandler(h, 1<<20))
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		log.Info("stopping")
		return nil
	}
	return err
}

// handler logs each mount and serves the directory for every export path.
type handler struct {
	nfs.Handler
	fs  billy.Filesystem
	log *slog.Logger
}

func (h *handler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	h.log.Info("mount", "client", conn.RemoteAddr().String(), "path", string(req.Dirpath))
	return h.Handler.Mount(ctx, conn, req)
}
