// Package nfsfuse mounts an NFSv3 export with a userspace client served
// through FUSE, for cells whose kernel has no NFS client (no "nfs" in
// /proc/filesystems) but has FUSE. Package cell/nfs calls it where the
// kernel's client is missing; it resolves and checks the server first.
//
// Start (in the agent) runs "kip-cell nfs-fuse <flags>" in its own session,
// so that the mount outlives an agent that dies and is restarted, and
// waits for the child to report the mount in place or its error. Main is
// that child: it finds the ports (the portmapper's GETPORT, else 2049 for
// NFS and MOUNT, as go-nfs and many userspace servers serve them), asks
// MOUNT v3 for the export's root handle, mounts FUSE on the target itself
// (mount(2), allow_other, nosuid, nodev, "server:/export" of type
// fuse.nfs), serves until the target is unmounted (then exits 0) or
// SIGTERM (then unmounts; a busy mount is detached and serves its open
// files until they are closed), and sends UMNT. Options is the
// whole contract; mount options it cannot honour are refused by name
// (ErrNeedsKernel for NFSv4, UDP, Kerberos, NLM locks...).
//
// The client is written here over ONC RPC on TCP (rpc.go, nfs3.go), not
// taken from go-nfs-client: that library is path-based with a lookup
// cache and one credential a mount, panics on some malformed replies and
// gives up on a lost connection after 100 tries. Here:
//
//   - every node is an NFS file handle and its inode number the fileid;
//   - each call carries AUTH_SYS of the FUSE caller (uid, gid and the
//     supplementary groups of its process), and there is no
//     default_permissions: the server decides, as for a kernel client
//     (root squash included); open and access(2) ask ACCESS as the kernel
//     client does;
//   - writes are FILE_SYNC (durable when answered; COMMIT on flush, fsync
//     and release should a server answer less stable), reads and writes go
//     at any offset in chunks of the server's rtmax/wtmax, and the page
//     cache is dropped on every open: close-to-open consistency;
//   - attributes and entries are cached for actimeo (1 s by default),
//     negative entries not at all;
//   - calls are multiplexed on one connection; a lost connection is
//     redialled (from a reserved port, as root, unless noresvport) and the
//     calls in flight sent again, forever on a hard mount (the default:
//     a server restart must not turn into EIO for the pod), retrans times
//     on a soft one; a call unanswered for timeo (60 s) is sent again on a
//     new connection;
//   - NFS3ERR_* statuses become the errnos the Linux client gives.
//
// It imports no Kip package.
package nfsfuse
