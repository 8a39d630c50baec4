package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountsShared returns nil when the daemon serving the unix socket at
// address sees the mounts this process makes, and otherwise says why not.
// containerd starts its shims and runc in its own mount namespace, so a
// tmpfs the agent mounts for a volume reaches a container's bind mount
// only when the agent is in that namespace too (a cloud cell's agent and
// containerd, both systemd services; a local cell's agent, which enters
// only its network namespace). The daemon is the socket's peer
// (SO_PEERCRED); its namespace is read from /proc. When that cannot be
// read (another user's process, a restricted /proc) the answer is "not
// shared": a volume written to a tmpfs the runtime cannot see would look
// empty in the container.
func MountsShared(ctx context.Context, address string) error {
	pid, err := socketPeer(ctx, strings.TrimPrefix(address, "unix://"))
	if err != nil {
		return err
	}
	return sameNamespace("/proc/self/ns/mnt", "/proc/"+strconv.Itoa(pid)+"/ns/mnt")
}

// socketPeer returns the PID of the process serving the unix socket at
// path, as this process's PID namespace numbers it.
func socketPeer(ctx context.Context, path string) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, fmt.Errorf("finding the runtime's process: %w", err)
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("finding the runtime's process: %w", err)
	}
	var (
		cred    *unix.Ucred
		credErr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("finding the runtime's process: %w", err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("finding the runtime's process: reading the peer of %s: %w", path, credErr)
	}
	if cred.Pid <= 0 {
		return 0, fmt.Errorf("finding the runtime's process: the peer of %s is outside this PID namespace", path)
	}
	return int(cred.Pid), nil
}

// sameNamespace returns nil when the namespace links self and peer
// (/proc/<pid>/ns/<kind>) name one namespace, else why not.
func sameNamespace(self, peer string) error {
	own, err := os.Readlink(self)
	if err != nil {
		return fmt.Errorf("reading this process's namespace: %w", err)
	}
	theirs, err := os.Readlink(peer)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("the runtime's namespace cannot be read (%s: permission denied), so it may not see this process's mounts", peer)
	}
	if err != nil {
		return fmt.Errorf("reading the runtime's namespace: %w", err)
	}
	if own != theirs {
		return fmt.Errorf("the runtime's process is in namespace %s (%s), this process in %s", theirs, peer, own)
	}
	return nil
}
