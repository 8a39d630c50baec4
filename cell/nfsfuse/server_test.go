package nfsfuse

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	billy "github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	nfs "github.com/willscott/go-nfs"
	"github.com/willscott/go-nfs/helpers"
	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/test/nfstest"
)

// The test server: go-nfs (github.com/willscott/go-nfs) serving a
// directory, NFS and MOUNT on one port and no portmapper, as the e2e
// test's nfsserver program does, behind a proxy that records each call's
// credentials and can cut the connections.

// exportHandler serves one export path and can refuse every mount.
type exportHandler struct {
	nfs.Handler
	fs          billy.Filesystem
	dir, export string
	refuse      bool
}

func (h *exportHandler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	// The file system goes with a refusal too: go-nfs makes a handle of
	// it whatever the status (mount.go) and panics on nil.
	if h.refuse {
		return nfs.MountStatusErrAcces, h.fs, nil
	}
	if string(req.Dirpath) != h.export {
		return nfs.MountStatusErrNoEnt, h.fs, nil
	}
	return h.Handler.Mount(ctx, conn, req)
}

func (h *exportHandler) FSStat(_ context.Context, _ billy.Filesystem, s *nfs.FSStat) error {
	var st unix.Statfs_t
	if err := unix.Statfs(h.dir, &st); err != nil {
		return err
	}
	bs := uint64(st.Bsize)
	s.TotalSize, s.FreeSize, s.AvailableSize = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
	s.TotalFiles, s.FreeFiles, s.AvailableFiles = st.Files, st.Ffree, st.Ffree
	return nil
}

// call is one RPC call the proxy saw.
type call struct {
	prog, proc uint32
	flavor     uint32
	uid, gid   uint32
	gids       []uint32
}

type testServer struct {
	dir    string // what the server serves
	export string
	port   int // the proxy's

	mu      sync.Mutex
	calls   []call
	conns   map[net.Conn]bool
	blocked atomic.Bool
}

func init() {
	nfs.Log.SetLevel(nfs.PanicLevel) // go-nfs logs every ENOENT as an error
}

// newServer serves a new directory as /export on 127.0.0.1; refuse makes
// every MNT answer MNT3ERR_ACCES.
func newServer(t *testing.T, refuse bool) *testServer {
	t.Helper()
	s := &testServer{dir: t.TempDir(), export: "/export", conns: map[net.Conn]bool{}}
	back, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fsys := nfstest.ChangeFS{Filesystem: osfs.New(s.dir)}
	h := &exportHandler{
		Handler: helpers.NewNullAuthHandler(fsys), fs: fsys,
		dir: s.dir, export: s.export, refuse: refuse,
	}
	go func() { _ = nfs.Serve(back, helpers.NewCachingHandler(h, 1<<16)) }()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = front.Addr().(*net.TCPAddr).Port
	go s.accept(front, back.Addr().String())
	t.Cleanup(func() {
		front.Close()
		back.Close()
		s.drop()
	})
	return s
}

func (s *testServer) accept(ln net.Listener, backend string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if s.blocked.Load() {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", backend)
		if err != nil {
			c.Close()
			continue
		}
		s.mu.Lock()
		s.conns[c], s.conns[b] = true, true
		s.mu.Unlock()
		go func() { _, _ = io.Copy(c, b); c.Close() }()
		go func() { s.forward(c, b); b.Close() }()
	}
}

// forward copies the client's records to the server, recording each call.
func (s *testServer) forward(c, b net.Conn) {
	r := bufio.NewReader(c)
	for {
		rec, err := readRecord(r)
		if err != nil {
			return
		}
		d := dec{b: rec}
		d.u32() // xid
		d.u32() // call
		d.u32() // rpcvers
		cl := call{prog: d.u32()}
		d.u32() // vers
		cl.proc = d.u32()
		cl.flavor = d.u32()
		body := dec{b: d.opaque(400)}
		if cl.flavor == authSys {
			body.u32()
			body.str(255)
			cl.uid, cl.gid = body.u32(), body.u32()
			for n := body.u32(); n > 0 && body.err == nil; n-- {
				cl.gids = append(cl.gids, body.u32())
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, cl)
		s.mu.Unlock()
		out := binary.BigEndian.AppendUint32(nil, uint32(len(rec))|lastFragment)
		if _, err := b.Write(append(out, rec...)); err != nil {
			return
		}
	}
}

// drop cuts every connection, as a server restart does.
func (s *testServer) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
		delete(s.conns, c)
	}
}

func (s *testServer) recorded() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

func (s *testServer) options(target string) Options {
	return Options{Server: "127.0.0.1", Export: s.export, Target: target, NFSPort: s.port, MountPort: s.port}
}

// silentListener accepts connections and never answers: a server that
// does not respond.
func silentListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}
