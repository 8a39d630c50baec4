package nfsfuse

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The NFSv3 procedures (RFC 1813) the file system uses, MOUNT v3's MNT and
// UMNT (RFC 1813, appendix I) and the portmapper's GETPORT (RFC 1833).

const (
	progPortmap = 100000
	progNFS     = 100003
	progMount   = 100005

	procGetattr     = 1
	procSetattr     = 2
	procLookup      = 3
	procAccess      = 4
	procReadlink    = 5
	procRead        = 6
	procWrite       = 7
	procCreate      = 8
	procMkdir       = 9
	procSymlink     = 10
	procMknod       = 11
	procRemove      = 12
	procRmdir       = 13
	procRename      = 14
	procLink        = 15
	procReaddirplus = 17
	procFsstat      = 18
	procFsinfo      = 19
	procCommit      = 21

	fhSize3        = 64   // NFS3_FHSIZE
	nameLimit      = 4096 // a name or path in a reply; servers' limits are far lower
	nfs3Ok         = 0
	nfs3ErrJukebox = 10008 // NFS3ERR_JUKEBOX: try again later

	unstable = 0
	fileSync = 2

	createUnchecked = 0
	createGuarded   = 1
)

// nfsStatus is an NFS3ERR_* status the server answered.
type nfsStatus uint32

// errnos maps each NFS3ERR_* status to the errno a process sees, as the
// Linux client maps them (fs/nfs/nfs3xdr.c, nfs_stat_to_errno), except that
// the statuses Linux turns into kernel-internal errnos (BADHANDLE,
// NOT_SYNC, BAD_COOKIE, TOOSMALL, BADTYPE) get the nearest errno a process
// can understand.
var errnos = map[nfsStatus]syscall.Errno{
	1:     syscall.EPERM,
	2:     syscall.ENOENT,
	5:     syscall.EIO,
	6:     syscall.ENXIO,
	13:    syscall.EACCES,
	17:    syscall.EEXIST,
	18:    syscall.EXDEV,
	19:    syscall.ENODEV,
	20:    syscall.ENOTDIR,
	21:    syscall.EISDIR,
	22:    syscall.EINVAL,
	27:    syscall.EFBIG,
	28:    syscall.ENOSPC,
	30:    syscall.EROFS,
	31:    syscall.EMLINK,
	63:    syscall.ENAMETOOLONG,
	66:    syscall.ENOTEMPTY,
	69:    syscall.EDQUOT,
	70:    syscall.ESTALE,
	71:    syscall.EREMOTE,
	10001: syscall.ESTALE,    // BADHANDLE
	10002: syscall.EIO,       // NOT_SYNC
	10003: syscall.EIO,       // BAD_COOKIE (readdir restarts first)
	10004: syscall.ENOTSUP,   // NOTSUPP
	10005: syscall.EIO,       // TOOSMALL
	10006: syscall.EREMOTEIO, // SERVERFAULT
	10007: syscall.EINVAL,    // BADTYPE
	10008: syscall.EAGAIN,    // JUKEBOX, once retrying gave up
}

func (s nfsStatus) Error() string { return fmt.Sprintf("NFS3ERR %d: %v", uint32(s), s.Errno()) }

// Errno is the errno a process gets for the status; EIO for one RFC 1813
// does not define.
func (s nfsStatus) Errno() syscall.Errno {
	if e, ok := errnos[s]; ok {
		return e
	}
	return syscall.EIO
}

// Unwrap lets errors.Is(err, syscall.ENOENT) match.
func (s nfsStatus) Unwrap() error { return s.Errno() }

// fattr is fattr3.
type fattr struct {
	typ                 uint32
	mode                uint32
	nlink               uint32
	uid, gid            uint32
	size, used          uint64
	rdev1, rdev2        uint32
	fsid, fileid        uint64
	atime, mtime, ctime nfstime
}

type nfstime struct{ sec, nsec uint32 }

func (d *dec) time() nfstime { return nfstime{d.u32(), d.u32()} }

func (d *dec) fattr() fattr {
	return fattr{
		typ: d.u32(), mode: d.u32(), nlink: d.u32(), uid: d.u32(), gid: d.u32(),
		size: d.u64(), used: d.u64(), rdev1: d.u32(), rdev2: d.u32(),
		fsid: d.u64(), fileid: d.u64(),
		atime: d.time(), mtime: d.time(), ctime: d.time(),
	}
}

// postOpAttr reads post_op_attr: the attributes, or nil when the server
// sent none.
func (d *dec) postOpAttr() *fattr {
	if !d.boolean() {
		return nil
	}
	a := d.fattr()
	return &a
}

// wcc skips wcc_data and returns its post-operation attributes.
func (d *dec) wcc() *fattr {
	if d.boolean() { // pre_op_attr: size, mtime, ctime
		d.u64()
		d.time()
		d.time()
	}
	return d.postOpAttr()
}

func (d *dec) postOpFH() []byte {
	if !d.boolean() {
		return nil
	}
	return d.opaque(fhSize3)
}

// sattr is sattr3: nil fields are not set. atimeNow/mtimeNow ask for the
// server's time (SET_TO_SERVER_TIME).
type sattr struct {
	mode, uid, gid     *uint32
	size               *uint64
	atime, mtime       *time.Time
	atimeNow, mtimeNow bool
}

func (e *enc) sattr(s sattr) {
	for _, v := range []*uint32{s.mode, s.uid, s.gid} {
		e.boolean(v != nil)
		if v != nil {
			e.u32(*v)
		}
	}
	e.boolean(s.size != nil)
	if s.size != nil {
		e.u64(*s.size)
	}
	for _, t := range []struct {
		now bool
		at  *time.Time
	}{{s.atimeNow, s.atime}, {s.mtimeNow, s.mtime}} {
		switch {
		case t.now:
			e.u32(1)
		case t.at != nil:
			e.u32(2)
			e.u32(uint32(t.at.Unix()))
			e.u32(uint32(t.at.Nanosecond()))
		default:
			e.u32(0)
		}
	}
}

func (e *enc) dirop(dir []byte, name string) {
	e.opaque(dir)
	e.str(name)
}

// nfsClient is the NFSv3 program on one server.
type nfsClient struct {
	rpc *rpcClient
}

// call makes one NFS call; the reply's body starts with the nfsstat3. A
// JUKEBOX answer ("busy, try later") is retried after a pause, as the
// Linux client does, until ctx ends.
func (c *nfsClient) call(ctx context.Context, cr *cred, proc uint32, args []byte) (*dec, nfsStatus, error) {
	for {
		body, err := c.rpc.call(ctx, progNFS, 3, proc, cr, args)
		if err != nil {
			return nil, 0, err
		}
		d := &dec{b: body}
		st := nfsStatus(d.u32())
		if d.err != nil {
			return nil, 0, d.err
		}
		if st != nfs3ErrJukebox {
			return d, st, nil
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// done turns a decoded reply into the call's error: the status when it is
// not NFS3_OK, a decoding error, or nil.
func done(d *dec, st nfsStatus) error {
	if st != nfs3Ok {
		return st
	}
	return d.err
}

func (c *nfsClient) getattr(ctx context.Context, cr *cred, fh []byte) (fattr, error) {
	var e enc
	e.opaque(fh)
	d, st, err := c.call(ctx, cr, procGetattr, e.b)
	if err != nil {
		return fattr{}, err
	}
	if st != nfs3Ok {
		return fattr{}, st
	}
	a := d.fattr()
	return a, d.err
}

func (c *nfsClient) setattr(ctx context.Context, cr *cred, fh []byte, s sattr) (*fattr, error) {
	var e enc
	e.opaque(fh)
	e.sattr(s)
	e.boolean(false) // no guard
	d, st, err := c.call(ctx, cr, procSetattr, e.b)
	if err != nil {
		return nil, err
	}
	a := d.wcc()
	return a, done(d, st)
}

func (c *nfsClient) lookup(ctx context.Context, cr *cred, dir []byte, name string) ([]byte, *fattr, error) {
	var e enc
	e.dirop(dir, name)
	d, st, err := c.call(ctx, cr, procLookup, e.b)
	if err != nil {
		return nil, nil, err
	}
	if st != nfs3Ok {
		return nil, nil, st
	}
	fh := d.opaque(fhSize3)
	a := d.postOpAttr()
	return fh, a, d.err
}

const (
	access3Read    = 0x01
	access3Lookup  = 0x02
	access3Modify  = 0x04
	access3Extend  = 0x08
	access3Delete  = 0x10
	access3Execute = 0x20
)

func (c *nfsClient) access(ctx context.Context, cr *cred, fh []byte, want uint32) (uint32, error) {
	var e enc
	e.opaque(fh)
	e.u32(want)
	d, st, err := c.call(ctx, cr, procAccess, e.b)
	if err != nil {
		return 0, err
	}
	d.postOpAttr()
	if st != nfs3Ok {
		return 0, st
	}
	got := d.u32()
	return got, d.err
}

func (c *nfsClient) readlink(ctx context.Context, cr *cred, fh []byte) (string, error) {
	var e enc
	e.opaque(fh)
	d, st, err := c.call(ctx, cr, procReadlink, e.b)
	if err != nil {
		return "", err
	}
	d.postOpAttr()
	if st != nfs3Ok {
		return "", st
	}
	p := d.str(nameLimit)
	return p, d.err
}

func (c *nfsClient) read(ctx context.Context, cr *cred, fh []byte, off uint64, count uint32) ([]byte, bool, error) {
	var e enc
	e.opaque(fh)
	e.u64(off)
	e.u32(count)
	d, st, err := c.call(ctx, cr, procRead, e.b)
	if err != nil {
		return nil, false, err
	}
	d.postOpAttr()
	if st != nfs3Ok {
		return nil, false, st
	}
	d.u32() // count
	eof := d.boolean()
	data := d.opaque(int(count))
	return data, eof, d.err
}

// write writes data at off with the given stability and returns how much
// the server wrote and how stable it made it.
func (c *nfsClient) write(ctx context.Context, cr *cred, fh []byte, off uint64, data []byte, stable uint32) (uint32, uint32, error) {
	var e enc
	e.opaque(fh)
	e.u64(off)
	e.u32(uint32(len(data)))
	e.u32(stable)
	e.opaque(data)
	d, st, err := c.call(ctx, cr, procWrite, e.b)
	if err != nil {
		return 0, 0, err
	}
	d.wcc()
	if st != nfs3Ok {
		return 0, 0, st
	}
	n := d.u32()
	committed := d.u32()
	d.fixed(8) // write verifier
	return n, committed, d.err
}

func (c *nfsClient) commit(ctx context.Context, cr *cred, fh []byte) error {
	var e enc
	e.opaque(fh)
	e.u64(0)
	e.u32(0) // to the end of the file
	d, st, err := c.call(ctx, cr, procCommit, e.b)
	if err != nil {
		return err
	}
	d.wcc()
	return done(d, st)
}

// created reads the reply of CREATE, MKDIR and SYMLINK: the new object's
// handle and attributes, which the server may leave out (then a LOOKUP
// fetches them).
func (c *nfsClient) created(ctx context.Context, cr *cred, dir []byte, name string, proc uint32, args []byte) ([]byte, fattr, error) {
	d, st, err := c.call(ctx, cr, proc, args)
	if err != nil {
		return nil, fattr{}, err
	}
	if st != nfs3Ok {
		return nil, fattr{}, st
	}
	fh := d.postOpFH()
	a := d.postOpAttr()
	d.wcc()
	if d.err != nil {
		return nil, fattr{}, d.err
	}
	if fh == nil {
		var err error
		if fh, a, err = c.lookup(ctx, cr, dir, name); err != nil {
			return nil, fattr{}, err
		}
	}
	if a == nil {
		got, err := c.getattr(ctx, cr, fh)
		if err != nil {
			return nil, fattr{}, err
		}
		a = &got
	}
	return fh, *a, nil
}

func (c *nfsClient) create(ctx context.Context, cr *cred, dir []byte, name string, mode uint32, guarded bool) ([]byte, fattr, error) {
	var e enc
	e.dirop(dir, name)
	if guarded {
		e.u32(createGuarded)
	} else {
		e.u32(createUnchecked)
	}
	e.sattr(sattr{mode: &mode})
	return c.created(ctx, cr, dir, name, procCreate, e.b)
}

func (c *nfsClient) mkdir(ctx context.Context, cr *cred, dir []byte, name string, mode uint32) ([]byte, fattr, error) {
	var e enc
	e.dirop(dir, name)
	e.sattr(sattr{mode: &mode})
	return c.created(ctx, cr, dir, name, procMkdir, e.b)
}

func (c *nfsClient) symlink(ctx context.Context, cr *cred, dir []byte, name, target string) ([]byte, fattr, error) {
	var e enc
	e.dirop(dir, name)
	e.sattr(sattr{})
	e.str(target)
	return c.created(ctx, cr, dir, name, procSymlink, e.b)
}

// mknod makes a special file: ftype 3 (block) or 4 (character device)
// with its major and minor numbers, 6 (socket) or 7 (FIFO).
func (c *nfsClient) mknod(ctx context.Context, cr *cred, dir []byte, name string, ftype, mode, major, minor uint32) ([]byte, fattr, error) {
	var e enc
	e.dirop(dir, name)
	e.u32(ftype)
	e.sattr(sattr{mode: &mode})
	if ftype == 3 || ftype == 4 {
		e.u32(major)
		e.u32(minor)
	}
	return c.created(ctx, cr, dir, name, procMknod, e.b)
}

func (c *nfsClient) remove(ctx context.Context, cr *cred, proc uint32, dir []byte, name string) error {
	var e enc
	e.dirop(dir, name)
	d, st, err := c.call(ctx, cr, proc, e.b)
	if err != nil {
		return err
	}
	d.wcc()
	return done(d, st)
}

func (c *nfsClient) rename(ctx context.Context, cr *cred, from []byte, fromName string, to []byte, toName string) error {
	var e enc
	e.dirop(from, fromName)
	e.dirop(to, toName)
	d, st, err := c.call(ctx, cr, procRename, e.b)
	if err != nil {
		return err
	}
	d.wcc()
	d.wcc()
	return done(d, st)
}

func (c *nfsClient) link(ctx context.Context, cr *cred, fh, dir []byte, name string) (*fattr, error) {
	var e enc
	e.opaque(fh)
	e.dirop(dir, name)
	d, st, err := c.call(ctx, cr, procLink, e.b)
	if err != nil {
		return nil, err
	}
	a := d.postOpAttr()
	d.wcc()
	return a, done(d, st)
}

// dirEntry is one entryplus3.
type dirEntry struct {
	name   string
	fileid uint64
	attr   *fattr
	fh     []byte
}

// readdirplus reads the whole directory, page by page. A cookie the server
// no longer knows (BAD_COOKIE: the directory changed under the listing)
// restarts the listing once from the beginning.
func (c *nfsClient) readdirplus(ctx context.Context, cr *cred, dir []byte) ([]dirEntry, error) {
	all, err := c.readdirplusFrom(ctx, cr, dir)
	if errors.Is(err, nfsStatus(10003)) {
		all, err = c.readdirplusFrom(ctx, cr, dir)
	}
	return all, err
}

func (c *nfsClient) readdirplusFrom(ctx context.Context, cr *cred, dir []byte) ([]dirEntry, error) {
	var (
		all    []dirEntry
		cookie uint64
		verf   = make([]byte, 8)
	)
	for {
		var e enc
		e.opaque(dir)
		e.u64(cookie)
		e.fixed(verf)
		e.u32(32 << 10)  // dircount
		e.u32(128 << 10) // maxcount
		d, st, err := c.call(ctx, cr, procReaddirplus, e.b)
		if err != nil {
			return nil, err
		}
		d.postOpAttr()
		if st != nfs3Ok {
			return nil, st
		}
		verf = d.fixed(8)
		n := 0
		for d.boolean() {
			var de dirEntry
			de.fileid = d.u64()
			de.name = d.str(nameLimit)
			cookie = d.u64()
			de.attr = d.postOpAttr()
			de.fh = d.postOpFH()
			if d.err != nil {
				break
			}
			n++
			all = append(all, de)
		}
		eof := d.boolean()
		if d.err != nil {
			return nil, d.err
		}
		if eof {
			return all, nil
		}
		if n == 0 {
			return nil, errors.New("reading a directory: the server sent no entry and no end")
		}
	}
}

type fsstat struct {
	tbytes, fbytes, abytes, tfiles, ffiles, afiles uint64
}

func (c *nfsClient) fsstat(ctx context.Context, cr *cred, fh []byte) (fsstat, error) {
	var e enc
	e.opaque(fh)
	d, st, err := c.call(ctx, cr, procFsstat, e.b)
	if err != nil {
		return fsstat{}, err
	}
	d.postOpAttr()
	if st != nfs3Ok {
		return fsstat{}, st
	}
	s := fsstat{d.u64(), d.u64(), d.u64(), d.u64(), d.u64(), d.u64()}
	return s, d.err
}

type fsinfo struct {
	rtmax, wtmax uint32
}

func (c *nfsClient) fsinfo(ctx context.Context, cr *cred, fh []byte) (fsinfo, error) {
	var e enc
	e.opaque(fh)
	d, st, err := c.call(ctx, cr, procFsinfo, e.b)
	if err != nil {
		return fsinfo{}, err
	}
	d.postOpAttr()
	if st != nfs3Ok {
		return fsinfo{}, st
	}
	var fi fsinfo
	fi.rtmax = d.u32()
	d.u32() // rtpref
	d.u32() // rtmult
	fi.wtmax = d.u32()
	return fi, d.err
}

// mountStatus is a mountstat3 other than MNT3_OK. Its statuses are errnos
// (RFC 1813, section 5.1.5) but for NOTSUPP and SERVERFAULT.
type mountStatus uint32

func (s mountStatus) Error() string {
	switch s {
	case 10004:
		return "operation not supported"
	case 10006:
		return "server fault"
	}
	return syscall.Errno(s).Error()
}

// mnt asks the MOUNT program for the export's root handle. MNT carries
// AUTH_SYS as root, as mount.nfs sends it.
func mnt(ctx context.Context, c *rpcClient, export string) ([]byte, error) {
	var e enc
	e.str(export)
	body, err := c.call(ctx, progMount, 3, 1, &cred{}, e.b)
	if err != nil {
		return nil, err
	}
	d := dec{b: body}
	if st := d.u32(); st != 0 && d.err == nil {
		return nil, mountStatus(st)
	}
	fh := d.opaque(fhSize3)
	return fh, d.err
}

// umnt tells the MOUNT program the export is no longer mounted; servers
// use it only for showmount, so its failure is only logged.
func umnt(ctx context.Context, c *rpcClient, export string) error {
	var e enc
	e.str(export)
	_, err := c.call(ctx, progMount, 3, 3, &cred{}, e.b)
	return err
}

// getport asks the portmapper at addr for the TCP port of prog version 3.
func getport(ctx context.Context, c *rpcClient, prog uint32) (int, error) {
	var e enc
	e.u32(prog)
	e.u32(3)
	e.u32(6) // IPPROTO_TCP
	e.u32(0)
	body, err := c.call(ctx, progPortmap, 2, 3, nil, e.b)
	if err != nil {
		return 0, err
	}
	d := dec{b: body}
	port := d.u32()
	return int(port), d.err
}
