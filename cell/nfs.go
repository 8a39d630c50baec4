package cell

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/kipcell/kip/cell/nfs"
	"github.com/kipcell/kip/cell/nfsfuse"
)

// nfsMounter mounts the pod's NFS shares with the kernel's client, and
// where the kernel has none with the agent's own (cell/nfsfuse), run as
// this executable's nfs-fuse command, each mount's log in the state
// directory's nfs/.
func nfsMounter(cfg Config) *nfs.Mounter {
	logDir := filepath.Join(cfg.StateDir, "nfs")
	return &nfs.Mounter{
		FUSE: func(ctx context.Context, addr netip.Addr, s nfs.Share, target string) error {
			opts := nfsfuse.Options{
				Server: addr.String(), Export: s.Path, Target: target, ReadOnly: s.ReadOnly, Options: s.Options,
				LogFile: filepath.Join(logDir, strings.ReplaceAll(strings.Trim(target, "/"), "/", "_")+".log"),
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			if err := os.MkdirAll(logDir, 0o700); err != nil {
				return err
			}
			return nfsfuse.Start(ctx, "/proc/self/exe", opts)
		},
	}
}
