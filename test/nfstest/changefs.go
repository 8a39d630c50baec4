package nfstest

import (
	"os"
	"path/filepath"
	"time"

	billy "github.com/go-git/go-billy/v5"
	"golang.org/x/sys/unix"
)

// ChangeFS adds billy.Change to a billy file system of a directory
// (osfs), so that go-nfs's SETATTR changes mode, owner and times (osfs
// alone answers them NFS3ERR_NOTSUPP), and go-nfs's UnixChange (Mknod,
// Mkfifo, Socket, Link), so that it serves MKNOD: FIFOs, sockets, device
// nodes. go-nfs v0.0.3's LINK does not decode RFC 1813's arguments, so
// hard links fail anyway.
type ChangeFS struct{ billy.Filesystem }

func (c ChangeFS) abs(name string) string { return filepath.Join(c.Root(), name) }

// Chmod changes name's mode.
func (c ChangeFS) Chmod(name string, mode os.FileMode) error { return os.Chmod(c.abs(name), mode) }

// Lchown changes name's owner, not following a link.
func (c ChangeFS) Lchown(name string, uid, gid int) error { return os.Lchown(c.abs(name), uid, gid) }

// Chown changes name's owner.
func (c ChangeFS) Chown(name string, uid, gid int) error { return os.Chown(c.abs(name), uid, gid) }

// Chtimes changes name's times.
func (c ChangeFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(c.abs(name), atime, mtime)
}

// Mknod makes a device node (or a FIFO or socket, by mode).
func (c ChangeFS) Mknod(name string, mode, major, minor uint32) error {
	return unix.Mknod(c.abs(name), mode, int(unix.Mkdev(major, minor)))
}

// Mkfifo makes a FIFO.
func (c ChangeFS) Mkfifo(name string, mode uint32) error { return unix.Mkfifo(c.abs(name), mode) }

// Socket makes a socket's node.
func (c ChangeFS) Socket(name string) error {
	return unix.Mknod(c.abs(name), unix.S_IFSOCK|0o644, 0)
}

// Link makes a hard link.
func (c ChangeFS) Link(target, name string) error { return os.Link(c.abs(target), c.abs(name)) }
