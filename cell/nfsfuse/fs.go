package nfsfuse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// filesys is what every node shares: the NFS client and the sizes.
type filesys struct {
	nfs          *nfsClient
	rsize, wsize uint32
	log          *slog.Logger
}

// node is one file, directory or symlink, known by its NFS file handle.
// The kernel's inode number is the NFS fileid (StableAttr.Ino), so go-fuse
// keeps one node per server object however it is reached.
type node struct {
	fs.Inode
	fsys *filesys

	mu sync.Mutex
	fh []byte
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFlusher        = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeReleaser       = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.FileReaddirenter   = (*dirHandle)(nil)
	_ fs.FileSeekdirer      = (*dirHandle)(nil)
	_ fs.FileLookuper       = (*dirHandle)(nil)
)

func (n *node) handle() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fh
}

// errno turns an error of the NFS client into what the process sees: the
// status's errno, EINTR for a request the process gave up (ctx), and EIO
// for anything else (a soft mount's timeout, a malformed reply), which is
// logged since the process sees only EIO.
func (f *filesys) errno(op string, err error) syscall.Errno {
	var st nfsStatus
	var re *rpcError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return st.Errno()
	case errors.As(err, &re) && re.auth:
		return syscall.EACCES
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	f.log.Warn("NFS call failed", "op", op, "error", err)
	return syscall.EIO
}

// credOf is the AUTH_SYS credential of the process behind a FUSE request:
// its uid, gid and supplementary groups, as a kernel client sends them. A
// request the kernel makes itself (pid 0: write-back, release) has none;
// fallback, the opener's, is used then.
func credOf(ctx context.Context, fallback *cred) *cred {
	c, ok := fuse.FromContext(ctx)
	if !ok || (c.Pid == 0 && fallback != nil) {
		if fallback != nil {
			return fallback
		}
		return &cred{}
	}
	return &cred{uid: c.Uid, gid: c.Gid, gids: groupsOf(c.Pid, c.Gid)}
}

// groupsOf reads the supplementary groups of pid from /proc; the FUSE
// request carries only the uid and gid. The process may be gone: then it
// has none.
func groupsOf(pid, gid uint32) []uint32 {
	if pid == 0 {
		return nil
	}
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gids []uint32
		for _, g := range strings.Fields(rest) {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != gid {
				gids = append(gids, uint32(n))
			}
		}
		return gids
	}
	return nil
}

// typeBits are the S_IF* bits of an ftype3.
func typeBits(t uint32) uint32 {
	switch t {
	case 2:
		return syscall.S_IFDIR
	case 3:
		return syscall.S_IFBLK
	case 4:
		return syscall.S_IFCHR
	case 5:
		return syscall.S_IFLNK
	case 6:
		return syscall.S_IFSOCK
	case 7:
		return syscall.S_IFIFO
	}
	return syscall.S_IFREG
}

func (a *fattr) fill(out *fuse.Attr) {
	out.Ino = a.fileid
	out.Size = a.size
	out.Blocks = (a.used + 511) / 512
	out.Blksize = 4096
	out.Mode = typeBits(a.typ) | a.mode&07777
	out.Nlink = a.nlink
	out.Uid, out.Gid = a.uid, a.gid
	out.Rdev = uint32(unix.Mkdev(a.rdev1, a.rdev2))
	out.Atime, out.Atimensec = uint64(a.atime.sec), a.atime.nsec
	out.Mtime, out.Mtimensec = uint64(a.mtime.sec), a.mtime.nsec
	out.Ctime, out.Ctimensec = uint64(a.ctime.sec), a.ctime.nsec
}

// child returns the inode of the server object fh, reusing the one the
// kernel already knows for its fileid (and taking the newer handle).
func (n *node) child(ctx context.Context, fh []byte, a fattr, out *fuse.EntryOut) *fs.Inode {
	a.fill(&out.Attr)
	c := &node{fsys: n.fsys, fh: fh}
	in := n.NewInode(ctx, c, fs.StableAttr{Mode: typeBits(a.typ), Ino: a.fileid})
	if old, ok := in.Operations().(*node); ok && old != c {
		old.mu.Lock()
		old.fh = fh
		old.mu.Unlock()
	}
	return in
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cr := credOf(ctx, nil)
	fh, a, err := n.fsys.nfs.lookup(ctx, cr, n.handle(), name)
	if err != nil {
		return nil, n.fsys.errno("LOOKUP", err)
	}
	if a == nil {
		got, err := n.fsys.nfs.getattr(ctx, cr, fh)
		if err != nil {
			return nil, n.fsys.errno("GETATTR", err)
		}
		a = &got
	}
	return n.child(ctx, fh, *a, out), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.fsys.nfs.getattr(ctx, credOf(ctx, opener(f)), n.handle())
	if err != nil {
		return n.fsys.errno("GETATTR", err)
	}
	a.fill(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var s sattr
	if v, ok := in.GetMode(); ok {
		s.mode = &v
	}
	if v, ok := in.GetUID(); ok {
		s.uid = &v
	}
	if v, ok := in.GetGID(); ok {
		s.gid = &v
	}
	if v, ok := in.GetSize(); ok {
		s.size = &v
	}
	if t, ok := in.GetATime(); ok {
		s.atime, s.atimeNow = &t, in.Valid&fuse.FATTR_ATIME_NOW != 0
	}
	if t, ok := in.GetMTime(); ok {
		s.mtime, s.mtimeNow = &t, in.Valid&fuse.FATTR_MTIME_NOW != 0
	}
	cr := credOf(ctx, opener(f))
	a, err := n.fsys.nfs.setattr(ctx, cr, n.handle(), s)
	if err != nil {
		return n.fsys.errno("SETATTR", err)
	}
	if a == nil {
		got, err := n.fsys.nfs.getattr(ctx, cr, n.handle())
		if err != nil {
			return n.fsys.errno("GETATTR", err)
		}
		a = &got
	}
	a.fill(&out.Attr)
	return 0
}

// accessBits are the ACCESS3 bits an access(2) or open(2) mask asks for.
func accessBits(mask uint32, dir bool) uint32 {
	var want uint32
	if mask&unix.R_OK != 0 {
		want |= access3Read
	}
	if mask&unix.W_OK != 0 {
		want |= access3Modify | access3Extend
		if dir {
			want |= access3Delete
		}
	}
	if mask&unix.X_OK != 0 {
		if dir {
			want |= access3Lookup
		} else {
			want |= access3Execute
		}
	}
	return want
}

// check asks the server whether cr may do mask to the node, as the kernel
// client does on access(2) and open(2) (there is no default_permissions:
// the server decides).
func (n *node) check(ctx context.Context, cr *cred, mask uint32) syscall.Errno {
	want := accessBits(mask, n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR)
	if want == 0 {
		_, err := n.fsys.nfs.getattr(ctx, cr, n.handle())
		return n.fsys.errno("GETATTR", err)
	}
	got, err := n.fsys.nfs.access(ctx, cr, n.handle(), want)
	if err != nil {
		return n.fsys.errno("ACCESS", err)
	}
	if got&want != want {
		return syscall.EACCES
	}
	return 0
}

func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	return n.check(ctx, credOf(ctx, nil), mask)
}

// openMask is the access(2) mask an open's flags need.
func openMask(flags uint32) uint32 {
	switch flags & syscall.O_ACCMODE {
	case syscall.O_WRONLY:
		return unix.W_OK
	case syscall.O_RDWR:
		return unix.R_OK | unix.W_OK
	}
	return unix.R_OK
}

// fileHandle is an open file: NFS is stateless, so it only remembers who
// opened it (for the kernel's own requests) and whether a write awaits a
// COMMIT.
type fileHandle struct {
	cr *cred

	mu    sync.Mutex
	dirty bool // a write the server made less stable than FILE_SYNC
}

func opener(f fs.FileHandle) *cred {
	if h, ok := f.(*fileHandle); ok {
		return h.cr
	}
	return nil
}

// Open checks access as the kernel client does and opens nothing on the
// server. It keeps no page cache across opens (no FOPEN_KEEP_CACHE), which
// gives close-to-open consistency: an open sees what another client
// wrote before its close.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	cr := credOf(ctx, nil)
	if e := n.check(ctx, cr, openMask(flags)); e != 0 {
		return nil, 0, e
	}
	return &fileHandle{cr: cr}, 0, 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	cr := credOf(ctx, opener(f))
	got := 0
	for got < len(dest) {
		count := min(uint32(len(dest)-got), n.fsys.rsize)
		data, eof, err := n.fsys.nfs.read(ctx, cr, n.handle(), uint64(off)+uint64(got), count)
		if err != nil {
			return nil, n.fsys.errno("READ", err)
		}
		got += copy(dest[got:], data)
		if eof || len(data) == 0 {
			break
		}
	}
	return fuse.ReadResultData(dest[:got]), 0
}

// Write writes FILE_SYNC, so a write is durable once answered: nothing is
// lost if the server restarts and nothing waits for a COMMIT. A server
// that answers with less (it may, RFC 1813 3.3.7) gets a COMMIT on flush,
// fsync and release.
func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	cr := credOf(ctx, opener(f))
	done := 0
	for done < len(data) {
		end := min(len(data), done+int(n.fsys.wsize))
		w, committed, err := n.fsys.nfs.write(ctx, cr, n.handle(), uint64(off)+uint64(done), data[done:end], fileSync)
		if err != nil {
			return uint32(done), n.fsys.errno("WRITE", err)
		}
		if committed != fileSync {
			if h, ok := f.(*fileHandle); ok {
				h.mu.Lock()
				h.dirty = true
				h.mu.Unlock()
			}
		}
		if w == 0 {
			return uint32(done), syscall.EIO
		}
		done += int(w)
	}
	return uint32(done), 0
}

// commit sends a COMMIT when a write awaits one.
func (n *node) commit(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*fileHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty {
		return 0
	}
	if err := n.fsys.nfs.commit(ctx, credOf(ctx, h.cr), n.handle()); err != nil {
		return n.fsys.errno("COMMIT", err)
	}
	h.dirty = false
	return 0
}

func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return n.commit(ctx, f) }

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, _ uint32) syscall.Errno {
	return n.commit(ctx, f)
}

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if e := n.commit(ctx, f); e != 0 {
		n.fsys.log.Warn("commit on release failed", "errno", e)
	}
	return 0
}

// Create creates GUARDED: O_EXCL on an existing name is EEXIST. Without
// O_EXCL an existing file is opened instead (never truncated by the
// create itself, unlike UNCHECKED, unless O_TRUNC asks).
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	cr := credOf(ctx, nil)
	fh, a, err := n.fsys.nfs.create(ctx, cr, n.handle(), name, mode&07777, true)
	if errors.Is(err, syscall.EEXIST) && flags&syscall.O_EXCL == 0 {
		var in *fs.Inode
		var e syscall.Errno
		if in, e = n.Lookup(ctx, name, out); e != 0 {
			return nil, nil, 0, e
		}
		c := in.Operations().(*node)
		if c.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return nil, nil, 0, syscall.EISDIR
		}
		if e := c.check(ctx, cr, openMask(flags)); e != 0 {
			return nil, nil, 0, e
		}
		if flags&syscall.O_TRUNC != 0 {
			zero := uint64(0)
			got, err := n.fsys.nfs.setattr(ctx, cr, c.handle(), sattr{size: &zero})
			if err != nil {
				return nil, nil, 0, n.fsys.errno("SETATTR", err)
			}
			if got != nil {
				got.fill(&out.Attr)
			}
		}
		return in, &fileHandle{cr: cr}, 0, 0
	}
	if err != nil {
		return nil, nil, 0, n.fsys.errno("CREATE", err)
	}
	return n.child(ctx, fh, a, out), &fileHandle{cr: cr}, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fh, a, err := n.fsys.nfs.mkdir(ctx, credOf(ctx, nil), n.handle(), name, mode&07777)
	if err != nil {
		return nil, n.fsys.errno("MKDIR", err)
	}
	return n.child(ctx, fh, a, out), 0
}

// Mknod makes FIFOs, sockets and device nodes (MKNOD; the mount is nodev,
// so a device node made here cannot be opened through it), and regular
// files as Create does.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cr := credOf(ctx, nil)
	var ftype uint32
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, 0:
		fh, a, err := n.fsys.nfs.create(ctx, cr, n.handle(), name, mode&07777, true)
		if err != nil {
			return nil, n.fsys.errno("CREATE", err)
		}
		return n.child(ctx, fh, a, out), 0
	case syscall.S_IFBLK:
		ftype = 3
	case syscall.S_IFCHR:
		ftype = 4
	case syscall.S_IFSOCK:
		ftype = 6
	case syscall.S_IFIFO:
		ftype = 7
	default:
		return nil, syscall.EINVAL
	}
	fh, a, err := n.fsys.nfs.mknod(ctx, cr, n.handle(), name, ftype, mode&07777, unix.Major(uint64(dev)), unix.Minor(uint64(dev)))
	if err != nil {
		return nil, n.fsys.errno("MKNOD", err)
	}
	return n.child(ctx, fh, a, out), 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fh, a, err := n.fsys.nfs.symlink(ctx, credOf(ctx, nil), n.handle(), name, target)
	if err != nil {
		return nil, n.fsys.errno("SYMLINK", err)
	}
	return n.child(ctx, fh, a, out), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	p, err := n.fsys.nfs.readlink(ctx, credOf(ctx, nil), n.handle())
	if err != nil {
		return nil, n.fsys.errno("READLINK", err)
	}
	return []byte(p), 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	cr := credOf(ctx, nil)
	a, err := n.fsys.nfs.link(ctx, cr, t.handle(), n.handle(), name)
	if err != nil {
		return nil, n.fsys.errno("LINK", err)
	}
	if a == nil {
		got, err := n.fsys.nfs.getattr(ctx, cr, t.handle())
		if err != nil {
			return nil, n.fsys.errno("GETATTR", err)
		}
		a = &got
	}
	return n.child(ctx, t.handle(), *a, out), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.fsys.errno("REMOVE", n.fsys.nfs.remove(ctx, credOf(ctx, nil), procRemove, n.handle(), name))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fsys.errno("RMDIR", n.fsys.nfs.remove(ctx, credOf(ctx, nil), procRmdir, n.handle(), name))
}

// Rename refuses renameat2's flags (NOREPLACE, EXCHANGE): NFSv3 has no
// atomic way to honour them, and the Linux client refuses them too.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags != 0 {
		return syscall.EINVAL
	}
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	return n.fsys.errno("RENAME", n.fsys.nfs.rename(ctx, credOf(ctx, nil), n.handle(), name, to.handle(), newName))
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	s, err := n.fsys.nfs.fsstat(ctx, credOf(ctx, nil), n.handle())
	if err != nil {
		return n.fsys.errno("FSSTAT", err)
	}
	const bsize = 4096
	out.Bsize, out.Frsize = bsize, bsize
	out.Blocks, out.Bfree, out.Bavail = s.tbytes/bsize, s.fbytes/bsize, s.abytes/bsize
	out.Files, out.Ffree = s.tfiles, s.ffiles
	out.NameLen = 255
	return 0
}

// OpendirHandle opens a directory: the listing is read with READDIRPLUS on
// the first readdir and kept in the handle, so that the kernel's
// per-entry lookups of a READDIRPLUS listing need no LOOKUP call.
func (n *node) OpendirHandle(ctx context.Context, _ uint32) (fs.FileHandle, uint32, syscall.Errno) {
	cr := credOf(ctx, nil)
	if e := n.check(ctx, cr, unix.R_OK); e != 0 {
		return nil, 0, e
	}
	return &dirHandle{n: n, cr: cr}, 0, 0
}

type dirHandle struct {
	n  *node
	cr *cred

	mu      sync.Mutex
	entries []dirEntry // nil until read
	byName  map[string]int
	next    int
}

func (d *dirHandle) load(ctx context.Context) syscall.Errno {
	if d.entries != nil {
		return 0
	}
	all, err := d.n.fsys.nfs.readdirplus(ctx, d.cr, d.n.handle())
	if err != nil {
		return d.n.fsys.errno("READDIRPLUS", err)
	}
	ino := d.n.StableAttr().Ino
	d.entries = []dirEntry{{name: ".", fileid: ino}, {name: "..", fileid: ino}}
	d.byName = map[string]int{}
	for _, e := range all {
		if e.name == "." || e.name == ".." {
			continue
		}
		d.byName[e.name] = len(d.entries)
		d.entries = append(d.entries, e)
	}
	return 0
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.load(ctx); e != 0 {
		return nil, e
	}
	if d.next >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[d.next]
	d.next++
	de := &fuse.DirEntry{Name: e.name, Ino: e.fileid, Off: uint64(d.next), Mode: syscall.S_IFDIR}
	if e.name != "." && e.name != ".." {
		de.Mode = syscall.S_IFREG
		if e.attr != nil {
			de.Mode = typeBits(e.attr.typ)
		}
	}
	return de, 0
}

// Seekdir to 0 (rewinddir) reads the directory again; any other offset is
// one this handle gave out.
func (d *dirHandle) Seekdir(_ context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 {
		d.entries, d.byName = nil, nil
	}
	d.next = int(off)
	return 0
}

// Lookup answers the kernel's lookups of a READDIRPLUS listing from the
// handle and attributes the listing carried.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.mu.Lock()
	i, ok := d.byName[name]
	var e dirEntry
	if ok {
		e = d.entries[i]
	}
	d.mu.Unlock()
	if !ok || e.fh == nil || e.attr == nil {
		return d.n.Lookup(ctx, name, out)
	}
	return d.n.child(ctx, e.fh, *e.attr, out), 0
}

// String names the node in go-fuse's debug log.
func (n *node) String() string { return fmt.Sprintf("nfs:%x", n.handle()) }
