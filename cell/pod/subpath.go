package pod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// subPathsDir is the directory under the volumes' directory that holds the
// pinned subPaths, one bind mount per container and mount:
// .subpaths/<container>/<index of the volumeMount>. A volume's name is a
// DNS label, so no volume is called that.
const subPathsDir = ".subpaths"

// errLeavesVolume marks a subPath that resolves outside its volume.
var errLeavesVolume = errors.New("leaves the volume")

// openat2 is unix.Openat2; a test replaces it to take the path of a kernel
// without openat2 (Linux before 5.6).
var openat2 = unix.Openat2

// pinSubPath opens sub beneath base without leaving it and bind-mounts
// what it opened at target, which it returns: the runtime then binds the
// file or directory that was checked, not whatever the path names by the
// time runc mounts it. A container that swaps a directory of a shared
// volume for a symlink in between (to /, say) cannot redirect the mount
// onto the cell's files: the kubelet pins a subPath the same way, through
// an open file descriptor (pkg/volume/util/subpath, CVE-2021-25741). A
// symlink inside the volume is followed while it stays inside; one that
// leads out, absolute or by "..", is refused (errLeavesVolume). An earlier
// pin at target (the container's previous start) is replaced.
func pinSubPath(base, sub, target string) (string, error) {
	f, err := openBeneath(base, sub)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", fmt.Errorf("reading subPath %q: %w", sub, err)
	}
	if err := unpin(target); err != nil {
		return "", err
	}
	if err := makeMountPoint(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return "", err
	}
	// The kernel follows /proc/self/fd/N to the open file itself, wherever
	// its path leads now.
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), target, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("pinning subPath %q at %s: %w", sub, target, err)
	}
	return target, nil
}

// openBeneath opens sub, relative to the directory base, for its mount
// only (O_PATH: no read, so a FIFO or a device is not opened as one),
// resolved by the kernel without leaving base (openat2's RESOLVE_BENEATH:
// every component, symlinks included, at once, so nothing can be swapped
// during the walk). Where the kernel lacks openat2 it walks base with
// os.Root, which refuses the same escapes one component at a time.
func openBeneath(base, sub string) (*os.File, error) {
	dir, err := os.Open(base) //nolint:gosec // G304: the volume's own directory
	if err != nil {
		return nil, fmt.Errorf("opening the volume: %w", err)
	}
	defer dir.Close()
	fd, err := openat2(int(dir.Fd()), sub, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), filepath.Join(base, sub)), nil
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("subPath %q %w", sub, errLeavesVolume)
	case !errors.Is(err, unix.ENOSYS):
		return nil, fmt.Errorf("opening subPath %q: %w", sub, err)
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("opening the volume: %w", err)
	}
	defer root.Close()
	// Not O_PATH: os.Root would open a final symlink itself rather than
	// follow it. O_NONBLOCK keeps a FIFO from blocking the open.
	f, err := root.OpenFile(sub, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		if _, lerr := root.Lstat(sub); lerr == nil || !errors.Is(lerr, os.ErrNotExist) {
			return nil, fmt.Errorf("subPath %q %w or cannot be opened: %w", sub, errLeavesVolume, err)
		}
		return nil, fmt.Errorf("opening subPath %q: %w", sub, err)
	}
	return f, nil
}

// makeMountPoint makes target a directory (dir) or an empty file to
// bind-mount onto, replacing one of the other kind.
func makeMountPoint(target string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(target), err)
	}
	if info, err := os.Lstat(target); err == nil && info.IsDir() != dir {
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("replacing %s: %w", target, err)
		}
	}
	if dir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating %s: %w", target, err)
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640) //nolint:gosec // G304: under the agent's own volume directory
	if err != nil {
		return fmt.Errorf("creating %s: %w", target, err)
	}
	return f.Close()
}

// unpin unmounts whatever is mounted at target (every layer of it).
func unpin(target string) error {
	for range 16 {
		err := unix.Unmount(target, unix.MNT_DETACH)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more), or not there
		default:
			return fmt.Errorf("unmounting the earlier pin at %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmounting the earlier pin at %s: still mounted after 16 unmounts", target)
}

// makeSubPathDir creates the missing directory sub under base, with perm
// (permission bits, setgid),
// as the kubelet does for a subPath of an emptyDir, a hostPath or a disk,
// without following a symlink out of base on the way (os.Root): a symlink
// in the volume to /etc must not make the agent create /etc/<name> on the
// cell.
func makeSubPathDir(base, sub string, perm os.FileMode) error {
	root, err := os.OpenRoot(base)
	if err != nil {
		return fmt.Errorf("opening the volume: %w", err)
	}
	defer root.Close()
	if _, err := root.Lstat(sub); !errors.Is(err, os.ErrNotExist) {
		return nil //nolint:nilerr // there already (or not reachable: the open says why)
	}
	if err := root.MkdirAll(sub, perm.Perm()); err != nil {
		return fmt.Errorf("creating subPath %q: %w", sub, err)
	}
	// The umask took its share: the subPath itself gets perm whole, as
	// the kubelet's SafeMakeDir gives it.
	if err := root.Chmod(sub, perm); err != nil {
		return fmt.Errorf("setting the mode of subPath %q: %w", sub, err)
	}
	return nil
}
