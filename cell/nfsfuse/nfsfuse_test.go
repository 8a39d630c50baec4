package nfsfuse

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain makes the test binary the mount's process too: Start runs
// os.Args[0] nfs-fuse ..., as the agent runs /proc/self/exe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Command {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE with mount(2) needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

// mountDir makes a directory to mount on that every user can reach (the
// tests run processes as other users in it).
func mountDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	target := filepath.Join(dir, "mnt")
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	return target
}

// mountOf is the line of /proc/self/mountinfo for target, or "".
func mountOf(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == target {
			return l
		}
	}
	return ""
}

// childOf is the pid of the nfs-fuse process serving target, or 0.
func childOf(target string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == Command && slices.Contains(args, target) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// waitGone waits until target is unmounted and its process has exited.
func waitGone(t *testing.T, target string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mountOf(t, target) != "" || childOf(target) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: mount %q, process %d", mountOf(t, target), childOf(target))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startMount mounts opts through Start; cleanup unmounts it and checks that
// the process exits.
func startMount(t *testing.T, opts Options) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	opts.LogFile = filepath.Join(t.TempDir(), "nfs-fuse.log")
	if err := Start(ctx, os.Args[0], opts); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; mountOf(t, opts.Target) != "" && i < 100; i++ {
			if err := syscall.Unmount(opts.Target, 0); err != nil && i == 99 {
				t.Errorf("unmounting: %v", err)
				_ = syscall.Unmount(opts.Target, syscall.MNT_DETACH)
			}
			time.Sleep(20 * time.Millisecond)
		}
		waitGone(t, opts.Target)
		if t.Failed() {
			b, _ := os.ReadFile(opts.LogFile)
			t.Logf("the mount's log:\n%s", b)
		}
	})
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// mountFixture is the mount TestMount's cases share: a server and its
// export mounted.
type mountFixture struct {
	srv *testServer
	mnt string
}

func (fx *mountFixture) onServer(name string) string { return filepath.Join(fx.srv.dir, name) }
func (fx *mountFixture) onMount(name string) string  { return filepath.Join(fx.mnt, name) }

func TestMount(t *testing.T) {
	needRoot(t)
	fx := &mountFixture{srv: newServer(t, false), mnt: mountDir(t)}
	startMount(t, fx.srv.options(fx.mnt))
	tests := []struct {
		name string
		run  func(*testing.T, *mountFixture)
	}{
		{"mountinfo", mountMountinfo},
		{"a multi-MB file written at offsets", mountMultiMBFileAtOffsets},
		{"append", mountAppend},
		{"what the server writes is read", mountWhatTheServerWritesIsRead},
		{"an open sees the server's change", mountAnOpenSeesTheServersChange},
		{"directories", mountDirectories},
		{"rename, unlink, rmdir", mountRenameUnlinkRmdir},
		{"attributes", mountAttributes},
		{"symlink", mountSymlink},
		{"a FIFO", mountFIFO},
		{"errors", mountErrors},
		{"concurrent readers and writers", mountConcurrentReadersAndWriters},
		{"statfs", mountStatfs},
		{"credentials are the caller's", mountCredentialsAreTheCallers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, fx) })
	}
}

func mountMountinfo(t *testing.T, fx *mountFixture) {
	l := mountOf(t, fx.mnt)
	// ... - fuse.nfs 127.0.0.1:/export rw,...
	_, post, _ := strings.Cut(l, " - ")
	if f := strings.Fields(post); len(f) < 2 || f[0] != "fuse.nfs" || f[1] != "127.0.0.1:/export" {
		t.Errorf("mountinfo line %q, want type fuse.nfs and source 127.0.0.1:/export", l)
	}
	if !strings.Contains(l, "nosuid") || !strings.Contains(l, "nodev") || !strings.Contains(l, "allow_other") {
		t.Errorf("mountinfo line %q, want nosuid, nodev, allow_other", l)
	}
}

func mountMultiMBFileAtOffsets(t *testing.T, fx *mountFixture) {
	const size = 5<<20 + 123
	want := make([]byte, size)
	_, _ = rand.Read(want)
	f, err := os.OpenFile(fx.onMount("big"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// The second half first, then the first: writes at any offset.
	for _, part := range [][2]int{{size / 2, size}, {0, size / 2}} {
		if _, err := f.WriteAt(want[part[0]:part[1]], int64(part[0])); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, 1000)
	if _, err := f.ReadAt(got, 3<<20); err != nil || !bytes.Equal(got, want[3<<20:3<<20+1000]) {
		t.Errorf("ReadAt 3 MiB: %v, data equal %v", err, bytes.Equal(got, want[3<<20:3<<20+1000]))
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, p := range []string{fx.onServer("big"), fx.onMount("big")} {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v, %d bytes, equal %v", p, err, len(got), bytes.Equal(got, want))
		}
	}
}

func mountAppend(t *testing.T, fx *mountFixture) {
	if err := os.WriteFile(fx.onMount("log"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fx.onMount("log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fx.onServer("log")); string(got) != "one\ntwo\n" {
		t.Errorf("server has %q, want one, two", got)
	}
}

func mountWhatTheServerWritesIsRead(t *testing.T, fx *mountFixture) {
	if err := os.WriteFile(fx.onServer("from-server"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fx.onMount("from-server")); err != nil || string(got) != "hello" {
		t.Errorf("read %q, %v; want hello", got, err)
	}
	st, err := os.Stat(fx.onMount("from-server"))
	want, _ := os.Stat(fx.onServer("from-server"))
	if err != nil || st.Sys().(*syscall.Stat_t).Ino != want.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("inode %v, %v; want the server's %d (go-nfs's fileid)", st, err, want.Sys().(*syscall.Stat_t).Ino)
	}
}

// Close-to-open: an open sees what the server has, even within the
// attribute cache time of an earlier read.
func mountAnOpenSeesTheServersChange(t *testing.T, fx *mountFixture) {
	if err := os.WriteFile(fx.onServer("grows"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fx.onMount("grows")); err != nil || string(got) != "one" {
		t.Fatalf("first read %q, %v", got, err)
	}
	if err := os.WriteFile(fx.onServer("grows"), []byte("two, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fx.onMount("grows")); err != nil || string(got) != "two, longer" {
		t.Errorf("read after the server's change: %q, %v", got, err)
	}
	if err := os.WriteFile(fx.onServer("grows"), []byte("TWO, LONGER"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fx.onMount("grows")); err != nil || string(got) != "TWO, LONGER" {
		t.Errorf("read after the server's change of the same size: %q, %v", got, err)
	}
}

func mountDirectories(t *testing.T, fx *mountFixture) {
	if err := os.Mkdir(fx.onMount("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c", "a", "b"} {
		if err := os.WriteFile(fx.onMount("d/"+n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(fx.onMount("d/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(fx.onMount("d"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	if want := []string{"a", "b", "c", "sub/"}; !slices.Equal(names, want) {
		t.Errorf("ReadDir = %v, want %v", names, want)
	}
	if st, err := os.Stat(fx.onServer("d/sub")); err != nil || !st.IsDir() {
		t.Errorf("server: d/sub %v, %v", st, err)
	}
	// ls -la: the entries and their attributes from READDIRPLUS.
	out, err := exec.Command("ls", "-la", fx.onMount("d")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " sub\n") || !strings.Contains(string(out), " ..\n") {
		t.Errorf("ls -la: %v\n%s", err, out)
	}
}

func mountRenameUnlinkRmdir(t *testing.T, fx *mountFixture) {
	if err := os.Rename(fx.onMount("d/a"), fx.onMount("d/sub/moved")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fx.onServer("d/sub/moved")); err != nil || string(got) != "a" {
		t.Errorf("server: moved %q, %v", got, err)
	}
	if _, err := os.Stat(fx.onServer("d/a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server: d/a still there: %v", err)
	}
	if err := os.Remove(fx.onMount("d/b")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fx.onServer("d/b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server: d/b still there: %v", err)
	}
	// go-nfs answers NFS3ERR_IO here (nfs_onremove.go), not
	// NOTEMPTY: the errno is the server's; TestErrnos maps NOTEMPTY.
	if err := syscall.Rmdir(fx.onMount("d/sub")); err == nil {
		t.Errorf("rmdir of a full directory succeeded")
	}
	if _, err := os.Stat(fx.onServer("d/sub/moved")); err != nil {
		t.Errorf("server: after a refused rmdir: %v", err)
	}
	if err := os.Remove(fx.onMount("d/sub/moved")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(fx.onMount("d/sub")); err != nil {
		t.Fatalf("rmdir: %v", err)
	}
	if _, err := os.Stat(fx.onServer("d/sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server: d/sub still there: %v", err)
	}
}

func mountAttributes(t *testing.T, fx *mountFixture) {
	p := fx.onMount("attrs")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		name string
		do   func() error
		// what the server's stat must show
		check func(st *syscall.Stat_t) bool
	}{
		{"truncate", func() error { return os.Truncate(p, 1000) }, func(st *syscall.Stat_t) bool { return st.Size == 1000 }},
		{"chmod", func() error { return os.Chmod(p, 0o640) }, func(st *syscall.Stat_t) bool { return st.Mode&0o7777 == 0o640 }},
		// go-nfs runs every call as itself (root) and ignores
		// AUTH_SYS, so a chown is granted: this checks that the
		// owner reaches the server, not who may change it.
		{"chown", func() error { return os.Chown(p, 1234, 5678) }, func(st *syscall.Stat_t) bool { return st.Uid == 1234 && st.Gid == 5678 }},
		{"mtime", func() error { return os.Chtimes(p, mtime, mtime) }, func(st *syscall.Stat_t) bool { return st.Mtim.Sec == mtime.Unix() }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fx.onServer("attrs"), &st); err != nil || !s.check(&st) {
			t.Errorf("%s: the server's file: %+v, %v", s.name, st, err)
		}
		// And the mount shows the same at once (the reply's attributes).
		var mst syscall.Stat_t
		if err := syscall.Stat(p, &mst); err != nil || !s.check(&mst) {
			t.Errorf("%s: the mount's stat: %+v, %v", s.name, mst, err)
		}
	}
}

func mountSymlink(t *testing.T, fx *mountFixture) {
	if err := os.Symlink("some/where", fx.onMount("link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fx.onMount("link"), fx.onServer("link")} {
		if got, err := os.Readlink(p); err != nil || got != "some/where" {
			t.Errorf("readlink %s = %q, %v", p, got, err)
		}
	}
}

func mountFIFO(t *testing.T, fx *mountFixture) {
	if err := syscall.Mkfifo(fx.onMount("fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fx.onServer("fifo"), fx.onMount("fifo")} {
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeNamedPipe == 0 || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: %v, %v; want a FIFO, rw-r-----", p, st, err)
		}
	}
}

func mountErrors(t *testing.T, fx *mountFixture) {
	if err := os.WriteFile(fx.onMount("exists"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want syscall.Errno
	}{
		{"O_EXCL on an existing name", func() error {
			_, err := os.OpenFile(fx.onMount("exists"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			return err
		}, syscall.EEXIST},
		{"mkdir on an existing name", func() error { return os.Mkdir(fx.onMount("exists"), 0o755) }, syscall.EEXIST},
		{"open a missing file", func() error { _, err := os.Open(fx.onMount("missing")); return err }, syscall.ENOENT},
		{"a file as a directory", func() error { _, err := os.Stat(fx.onMount("exists/x")); return err }, syscall.ENOTDIR},
		{"renameat2 NOREPLACE", func() error {
			return unixRenameNoReplace(fx.onMount("exists"), fx.onMount("other"))
		}, syscall.EINVAL},
	}
	for _, tt := range tests {
		if got := errnoOf(tt.do()); got != tt.want {
			t.Errorf("%s: errno %v, want %v", tt.name, got, tt.want)
		}
	}
	// Without O_EXCL the existing file is opened, not replaced.
	if err := os.WriteFile(fx.onServer("keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fx.onMount("keep"), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "kept" {
		t.Errorf("O_CREAT without O_EXCL read %q, want kept", got)
	}
}

func mountConcurrentReadersAndWriters(t *testing.T, fx *mountFixture) {
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			want := bytes.Repeat([]byte{byte('a' + i)}, 300<<10+i)
			p := fx.onMount("par-" + strconv.Itoa(i))
			if err := os.WriteFile(p, want, 0o644); err != nil {
				errs <- err
				return
			}
			got, err := os.ReadFile(p)
			if err == nil && !bytes.Equal(got, want) {
				err = errors.New(p + ": read back different data")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func mountStatfs(t *testing.T, fx *mountFixture) {
	var got, want syscall.Statfs_t
	if err := syscall.Statfs(fx.mnt, &got); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(fx.srv.dir, &want); err != nil {
		t.Fatal(err)
	}
	total := func(s syscall.Statfs_t) uint64 { return s.Blocks * uint64(s.Bsize) }
	if total(got) != total(want)/4096*4096 || got.Files != want.Files {
		t.Errorf("statfs: %d bytes, %d files; the server's file system %d, %d", total(got), got.Files, total(want), want.Files)
	}
}

func mountCredentialsAreTheCallers(t *testing.T, fx *mountFixture) {
	if err := os.WriteFile(fx.onServer("for-1234"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cat", fx.onMount("for-1234"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 5678, Groups: []uint32{42}}}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "x" {
		t.Fatalf("cat as 1234: %q, %v", out, err)
	}
	var seen []call
	for _, c := range fx.srv.recorded() {
		if c.prog == progNFS && c.uid == 1234 {
			seen = append(seen, c)
		}
	}
	if len(seen) == 0 {
		t.Fatalf("no NFS call as uid 1234 among %d", len(fx.srv.recorded()))
	}
	for _, c := range seen {
		if c.flavor != authSys || c.gid != 5678 || !slices.Equal(c.gids, []uint32{42}) {
			t.Errorf("call %d as uid 1234: flavor %d gid %d groups %v, want AUTH_SYS, 5678, [42]", c.proc, c.flavor, c.gid, c.gids)
		}
	}
}

func unixRenameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

func TestReadOnly(t *testing.T) {
	needRoot(t)
	srv := newServer(t, false)
	if err := os.WriteFile(filepath.Join(srv.dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Options)
	}{
		{"ReadOnly", func(o *Options) { o.ReadOnly = true }},
		{"the ro mount option", func(o *Options) { o.Options = []string{"ro"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mnt := mountDir(t)
			o := srv.options(mnt)
			tt.edit(&o)
			startMount(t, o)
			if opts := strings.Fields(mountOf(t, mnt)); len(opts) < 6 || !slices.Contains(strings.Split(opts[5], ","), "ro") {
				t.Errorf("mountinfo %q, want ro", mountOf(t, mnt))
			}
			if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "data" {
				t.Errorf("read %q, %v", got, err)
			}
			for name, err := range map[string]error{
				"write":  os.WriteFile(filepath.Join(mnt, "f"), []byte("no"), 0o644),
				"create": os.WriteFile(filepath.Join(mnt, "new"), []byte("no"), 0o644),
				"mkdir":  os.Mkdir(filepath.Join(mnt, "d"), 0o755),
				"remove": os.Remove(filepath.Join(mnt, "f")),
			} {
				if errnoOf(err) != syscall.EROFS {
					t.Errorf("%s: %v, want EROFS", name, err)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(srv.dir, "f")); string(got) != "data" {
				t.Errorf("the server's file is %q", got)
			}
		})
	}
}

// TestStartFails: Start returns the child's error, or fails within its ctx,
// and leaves no mount and no process.
func TestStartFails(t *testing.T) {
	needRoot(t)
	refusing := newServer(t, true)
	serving := newServer(t, false)
	silent := silentListener(t)
	closed := closedPort(t)
	tests := []struct {
		name    string
		opts    func(target string) Options
		timeout time.Duration
		want    string // in the error
		within  time.Duration
	}{
		{"the server refuses the export", refusing.options, 20 * time.Second,
			"mounting 127.0.0.1:/export: MNT: permission denied", 10 * time.Second},
		{"no such export", func(target string) Options {
			o := serving.options(target)
			o.Export = "/elsewhere"
			return o
		}, 20 * time.Second, "mounting 127.0.0.1:/elsewhere: MNT: no such file or directory", 10 * time.Second},
		{"nothing listens", func(target string) Options {
			return Options{Server: "127.0.0.1", Export: "/export", Target: target, NFSPort: closed, MountPort: closed}
		}, 20 * time.Second, "connection refused", 10 * time.Second},
		{"the server never answers", func(target string) Options {
			return Options{Server: "127.0.0.1", Export: "/export", Target: target, NFSPort: silent, MountPort: silent}
		}, 2 * time.Second, "context deadline exceeded", 2*time.Second + stopWait},
		{"an option only the kernel honours", func(target string) Options {
			o := serving.options(target)
			o.Options = []string{"nfsvers=4.1"}
			return o
		}, 20 * time.Second, `mount option "nfsvers=4.1": needs the kernel's NFS client`, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mnt := mountDir(t)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			start := time.Now()
			err := Start(ctx, os.Args[0], tt.opts(mnt))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v, want %q", err, tt.want)
			}
			if d := time.Since(start); d > tt.within {
				t.Errorf("Start took %v, want at most %v", d, tt.within)
			}
			waitGone(t, mnt)
		})
	}
}

// TestStop: the mount's process exits when the target is unmounted (the
// agent's unmount at the pod's end) and unmounts on SIGTERM.
func TestStop(t *testing.T) {
	needRoot(t)
	srv := newServer(t, false)
	tests := []struct {
		name string
		stop func(t *testing.T, target string, pid int)
	}{
		{"umount", func(t *testing.T, target string, _ int) {
			if err := syscall.Unmount(target, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"SIGTERM", func(t *testing.T, _ string, pid int) {
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		// A busy mount is detached: it leaves the tree at once, and
		// the process serves the files still open until they are
		// closed, then exits.
		{"SIGTERM while a file is open", func(t *testing.T, target string, pid int) {
			f, err := os.Open(filepath.Join(target, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for i := 0; mountOf(t, target) != "" && i < 500; i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if l := mountOf(t, target); l != "" {
				t.Fatalf("still mounted after SIGTERM: %s", l)
			}
			if _, err := f.Stat(); err != nil {
				t.Errorf("the open file after the detach: %v", err)
			}
			if childOf(target) != pid {
				t.Errorf("the process exited with a file still open")
			}
		}},
	}
	if err := os.WriteFile(filepath.Join(srv.dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mnt := mountDir(t)
			startMount(t, srv.options(mnt))
			pid := childOf(mnt)
			if pid == 0 {
				t.Fatal("no nfs-fuse process")
			}
			// Its own session: it outlives the agent's.
			if sid, _ := unix.Getsid(pid); sid != pid {
				t.Errorf("session %d, want its own (%d)", sid, pid)
			}
			tt.stop(t, mnt, pid)
			waitGone(t, mnt)
		})
	}
}

// TestServerLost: a hard mount waits for a server that went away and
// carries on once it is back, instead of failing the pod's reads.
func TestServerLost(t *testing.T) {
	needRoot(t)
	srv := newServer(t, false)
	mnt := mountDir(t)
	startMount(t, srv.options(mnt))
	lose(t, srv, mnt, true)
}

// TestSoftMount: a soft mount gives up on a server that went away: EIO
// after retrans more tries.
func TestSoftMount(t *testing.T) {
	needRoot(t)
	srv := newServer(t, false)
	mnt := mountDir(t)
	o := srv.options(mnt)
	o.Options = []string{"soft", "timeo=10", "retrans=1"}
	startMount(t, o)
	lose(t, srv, mnt, false)
}

// lose cuts the server off while a file is read: a hard mount's read
// waits and gets the data once the server is back, a soft one's fails
// with EIO.
func lose(t *testing.T, srv *testServer, mnt string, hard bool) {
	t.Helper()
	if _, err := os.ReadDir(mnt); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv.dir, "later"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}

	srv.blocked.Store(true)
	srv.drop()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := os.ReadFile(filepath.Join(mnt, "later"))
		done <- result{b, err}
	}()
	if !hard {
		select {
		case r := <-done:
			if errnoOf(r.err) != syscall.EIO {
				t.Errorf("soft mount, server gone: read %q, %v; want EIO", r.b, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Error("soft mount, server gone: read still waiting after 20 s")
		}
		srv.blocked.Store(false)
		return
	}
	select {
	case r := <-done:
		t.Fatalf("read while the server was gone: %q, %v; want it to wait", r.b, r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	srv.blocked.Store(false)
	select {
	case r := <-done:
		if r.err != nil || string(r.b) != "still here" {
			t.Errorf("read after the server came back: %q, %v", r.b, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("read still waiting 20 s after the server came back")
	}
}

// TestErrnos: each NFS3ERR_* status reaches the process as the errno the
// Linux client gives (or, where Linux uses a kernel-internal one, the
// nearest a process understands).
func TestErrnos(t *testing.T) {
	tests := []struct {
		status nfsStatus
		want   syscall.Errno
	}{
		{1, syscall.EPERM}, {2, syscall.ENOENT}, {5, syscall.EIO}, {6, syscall.ENXIO},
		{13, syscall.EACCES}, {17, syscall.EEXIST}, {18, syscall.EXDEV}, {19, syscall.ENODEV},
		{20, syscall.ENOTDIR}, {21, syscall.EISDIR}, {22, syscall.EINVAL}, {27, syscall.EFBIG},
		{28, syscall.ENOSPC}, {30, syscall.EROFS}, {31, syscall.EMLINK}, {63, syscall.ENAMETOOLONG},
		{66, syscall.ENOTEMPTY}, {69, syscall.EDQUOT}, {70, syscall.ESTALE}, {71, syscall.EREMOTE},
		{10001, syscall.ESTALE}, {10002, syscall.EIO}, {10003, syscall.EIO}, {10004, syscall.ENOTSUP},
		{10005, syscall.EIO}, {10006, syscall.EREMOTEIO}, {10007, syscall.EINVAL}, {10008, syscall.EAGAIN},
		{12345, syscall.EIO},
	}
	f := &filesys{}
	for _, tt := range tests {
		if got := f.errno("TEST", tt.status); got != tt.want {
			t.Errorf("status %d: errno %v, want %v", tt.status, got, tt.want)
		}
		if !errors.Is(tt.status, tt.want) {
			t.Errorf("status %d is not %v", tt.status, tt.want)
		}
	}
	f.log = slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		err  error
		want syscall.Errno
	}{
		{&rpcError{msg: "authentication error 5", auth: true}, syscall.EACCES},
		{&rpcError{msg: "procedure unavailable"}, syscall.EIO},
		{errTimedOut, syscall.EIO},
		{context.Canceled, syscall.EINTR},
	} {
		if got := f.errno("TEST", tt.err); got != tt.want {
			t.Errorf("%v: errno %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestClient calls the NFS client directly where the kernel hides what it
// does: the kernel looks a name up before it creates, so only a race would
// show whether CREATE is GUARDED.
func TestClient(t *testing.T) {
	srv := newServer(t, false)
	s, err := srv.options("/unused").resolve()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	rc := newRPCClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)), s, log)
	defer rc.close()
	ctx := t.Context()
	root, err := mnt(ctx, rc, srv.export)
	if err != nil {
		t.Fatal(err)
	}
	c := &nfsClient{rpc: rc}
	cr := &cred{}
	if err := os.WriteFile(filepath.Join(srv.dir, "there"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.create(ctx, cr, root, "there", 0o644, true); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("guarded CREATE of an existing name: %v, want EEXIST", err)
	}
	if b, _ := os.ReadFile(filepath.Join(srv.dir, "there")); string(b) != "keep" {
		t.Errorf("the existing file is now %q", b)
	}

	// A directory larger than one READDIRPLUS reply.
	const n = 3000
	if err := os.Mkdir(filepath.Join(srv.dir, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(srv.dir, "many", "file-with-a-long-name-"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, _, err := c.lookup(ctx, cr, root, "many")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := c.readdirplus(ctx, cr, dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		if e.name == "." || e.name == ".." {
			continue // go-nfs sends them bare; the file system makes its own
		}
		if e.attr == nil || e.fh == nil {
			t.Errorf("entry %q without attributes or handle", e.name)
		}
		names[e.name] = true
	}
	if len(names) != n {
		t.Errorf("READDIRPLUS listed %d names, want %d", len(names), n)
	}
	pages := 0
	for _, cl := range srv.recorded() {
		if cl.prog == progNFS && cl.proc == procReaddirplus {
			pages++
		}
	}
	if pages < 2 {
		t.Errorf("%d READDIRPLUS calls, want the listing in several pages", pages)
	}
}
