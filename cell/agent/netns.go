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

// dialInNetns connects to addr from the network namespace at nsPath. The
// socket is created by a thread that has entered the namespace (a socket
// belongs to the namespace it was created in) and then returns to the
// agent's own. An empty nsPath, or the agent's own namespace, dials
// directly.
func dialInNetns(ctx context.Context, nsPath, addr string) (net.Conn, error) {
	var d net.Dialer
	if nsPath == "" || sameFile(nsPath, "/proc/self/ns/net") {
		return d.DialContext(ctx, "tcp", addr)
	}
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace: %w", err)
	}
	defer target.Close()

	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// This goroutine's thread changes namespace; if it cannot change
		// back, it stays locked and the thread dies with the goroutine.
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- result{err: fmt.Errorf("opening own network namespace: %w", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering network namespace: %w", err)}
			return
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

func sameFile(a, b string) bool {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
