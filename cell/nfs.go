package cell

import (
	"github.com/kipcell/kip/cell/nfs"
)

// nfsMounter mounts the pod's NFS shares with the kernel's client, and
// where the kernel has none with the agent's own (cell/nfsfuse), run as
// this executable's nfs-fuse command, its log in the state directory.
func nfsMounter(cfg Config) *nfs.Mounter {
	_ = cfg
	return &nfs.Mounter{}
}
