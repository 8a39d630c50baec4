package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Loop devices: the kernel side of a local disk's attachment, through the
// loop driver's ioctls (golang.org/x/sys/unix), not losetup, so that the
// plugin needs no util-linux where its cells live and every step runs on
// the thread of the cells' mount namespace (machine.run): the device node,
// the backing file's path and /sys are the ones the cell's agent sees.
//
//   - bind: LOOP_CTL_GET_FREE on /dev/loop-control names a free device
//     (the kernel adds one when none is free), LOOP_CONFIGURE (Linux 5.8)
//     binds the file to it in one call, read-only with LO_FLAGS_READ_ONLY.
//     Another process (losetup) may take the same device in between: the
//     configure then fails with EBUSY and bind asks again. No
//     LO_FLAGS_AUTOCLEAR: the device outlives the plugin process that
//     bound it, as a cloud's attachment outlives its API call.
//   - the node: /dev is a devtmpfs on most machines, where the kernel
//     makes /dev/loopN itself; where it is not (a container's tmpfs /dev),
//     bind makes the node from /sys/block/loopN/dev.
//   - which file a device is bound to: /sys/block/loopN/loop/backing_file,
//     the path as the reading thread's root sees it, present only while
//     the device is bound. A device is the disk's only while that is the
//     disk's file: the plugin never unbinds a device it cannot tell is
//     its own.
//   - unbind: LOOP_CLR_FD on the device, opened and checked first (an
//     open device cannot be unbound and bound again by another under it).
//     The kernel unbinds at once when nobody else has the device open;
//     while it is mounted or open elsewhere it only marks it
//     LO_FLAGS_AUTOCLEAR and unbinds it at the last close. The attachment
//     is detaching until then (attach.go).

// loopControl is the loop driver's control device.
const loopControl = "/dev/loop-control"

// sysBlock is where the kernel lists block devices.
const sysBlock = "/sys/block"

// bindAttempts bounds how often bind asks for a free device that another
// process then takes first.
const bindAttempts = 16

// loopsOf returns the loop device (/dev/loopN) bound to each of files
// where m's commands run; a file bound to none is absent.
func loopsOf(m machine, files ...string) (out map[string]string, err error) {
	m.run(func() {
		var bound map[string]string
		if bound, err = boundLoops(); err != nil {
			return
		}
		out = make(map[string]string, len(files))
		for _, f := range files {
			if dev, ok := bound[resolved(f)]; ok {
				out[f] = dev
			}
		}
	})
	return out, err
}

// boundLoops returns the bound loop devices of the calling thread's view,
// by backing file: the file's path as the kernel shows it, to /dev/loopN.
func boundLoops() (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(sysBlock, "loop*"))
	if err != nil {
		return nil, fmt.Errorf("listing loop devices: %w", err)
	}
	out := map[string]string{}
	for _, dir := range names {
		name := filepath.Base(dir)
		backing, err := backingFile(name)
		if err != nil {
			return nil, err
		}
		if backing != "" {
			out[backing] = "/dev/" + name
		}
	}
	return out, nil
}

// backingFile returns the file loop device name (loopN) is bound to, or
// "" while it is bound to none (or is gone).
func backingFile(name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(sysBlock, name, "loop", "backing_file"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENXIO) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the backing file of %s: %w", name, err)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

// resolved is path with its symbolic links resolved, as the kernel shows a
// backing file, or path when that fails.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// bindLoop binds file to a free loop device where m's commands run and
// returns the device (/dev/loopN).
func bindLoop(m machine, file string, readOnly bool) (device string, err error) {
	m.run(func() { device, err = bindLoopHere(file, readOnly) })
	return device, err
}

// bindLoopHere is bindLoop on the calling thread.
func bindLoopHere(file string, readOnly bool) (string, error) {
	mode, flags := unix.O_RDWR, uint32(0)
	if readOnly {
		mode, flags = unix.O_RDONLY, unix.LO_FLAGS_READ_ONLY
	}
	backing, err := unix.Open(file, mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", file, err)
	}
	defer unix.Close(backing)
	ctl, err := unix.Open(loopControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", loopControl, err)
	}
	defer unix.Close(ctl)
	cfg := unix.LoopConfig{Fd: uint32(backing)} //nolint:gosec // G115: a descriptor is small and non-negative
	cfg.Info.Flags = flags
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], file) // what losetup shows; truncated, NUL-terminated
	for range bindAttempts {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("asking %s for a free loop device: %w", loopControl, err)
		}
		name := "loop" + strconv.Itoa(n)
		device := "/dev/" + name
		if err := ensureBlockNode(device, name); err != nil {
			return "", err
		}
		fd, err := unix.Open(device, mode|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("opening %s: %w", device, err)
		}
		err = unix.IoctlLoopConfigure(fd, &cfg)
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.EBUSY):
			continue // another process bound it first: ask again
		case err != nil:
			return "", fmt.Errorf("binding %s to %s: %w", file, device, err)
		}
		return device, nil
	}
	return "", fmt.Errorf("binding %s: every free loop device was taken by another process first, %d times", file, bindAttempts)
}

// ensureBlockNode makes the block device node path of the kernel's device
// name (loopN) where the node is missing (a /dev that is no devtmpfs).
func ensureBlockNode(path, name string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(sysBlock, name, "dev"))
	if err != nil {
		return fmt.Errorf("making the device node %s: %w", path, err)
	}
	var major, minor uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "%d:%d", &major, &minor); err != nil {
		return fmt.Errorf("making the device node %s: reading its number %q: %w", path, data, err)
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(major, minor))); err != nil && !errors.Is(err, unix.EEXIST) { //nolint:gosec // G115: a device number fits an int on Linux
		return fmt.Errorf("making the device node %s: %w", path, err)
	}
	return nil
}

// errNotOurLoop: a loop device is bound to another file than the one it
// was to be unbound from.
var errNotOurLoop = errors.New("bound to another file")

// unbindLoop unbinds device (/dev/loopN) from file where m's commands
// run, if it is bound to file; a device bound to nothing is done, one
// bound to another file is errNotOurLoop and left alone. It returns once
// the device is unbound (gone true), or once ctx ends or a short while
// has passed while the kernel keeps it bound for another opener (a mount):
// then it unbinds at that opener's last close.
func unbindLoop(ctx context.Context, m machine, device, file string) (gone bool, err error) {
	m.run(func() { err = unbindLoopHere(device, file) })
	if err != nil {
		return false, err
	}
	name := filepath.Base(device)
	for delay := 5 * time.Millisecond; ; delay *= 2 {
		var backing string
		m.run(func() { backing, err = backingFile(name) })
		if err != nil || backing == "" {
			return err == nil, err
		}
		if delay > 80*time.Millisecond {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(delay):
		}
	}
}

// unbindLoopHere asks the kernel to unbind device from file on the
// calling thread.
func unbindLoopHere(device, file string) error {
	fd, err := unix.Open(device, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) {
		return nil // no such device: nothing is bound to it
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", device, err)
	}
	defer unix.Close(fd)
	// Checked with the device open: it cannot be unbound and bound to
	// another file now.
	backing, err := backingFile(filepath.Base(device))
	switch {
	case err != nil:
		return err
	case backing == "":
		return nil
	case backing != resolved(file):
		return fmt.Errorf("unbinding %s from %s: %w (%s)", device, file, errNotOurLoop, backing)
	}
	if err := unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("unbinding %s from %s: %w", device, file, err)
	}
	return nil
}
