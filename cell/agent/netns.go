package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// dialInNetns connects to addr from the network namespace at nsPath (see
// inNetns).
func dialInNetns(ctx context.Context, nsPath, addr string) (net.Conn, error) {
	var d net.Dialer
	var conn net.Conn
	var derr error
	if err := inNetns(nsPath, func() { conn, derr = d.DialContext(ctx, "tcp", addr) }); err != nil {
		return nil, err
	}
	return conn, derr
}

// inNetns runs fn on a thread that has entered the network namespace at
// nsPath (a socket belongs to the namespace it was created in, and
// /proc/thread-self/net shows the thread's), then returns the thread to
// the agent's own namespace. An empty nsPath, or the agent's own
// namespace, runs fn directly.
func inNetns(nsPath string, fn func()) error {
	if nsPath == "" || sameFile(nsPath, "/proc/self/ns/net") {
		fn()
		return nil
	}
	target, err := os.Open(nsPath)
	if err != nil {
		return fmt.Errorf("opening network namespace: %w", err)
	}
	defer target.Close()

	ch := make(chan error, 1)
	go func() {
		// This goroutine's thread changes namespace; if it cannot change
		// back, it stays locked and the thread dies with the goroutine.
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- fmt.Errorf("opening own network namespace: %w", err)
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("entering network namespace: %w", err)
			return
		}
		fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- nil
	}()
	return <-ch
}

func sameFile(a, b string) bool {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
