package podnet

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a thread that has entered the network namespace at
// nsPath (a socket belongs to the namespace it was made in, and
// /proc/thread-self/net and /proc/sys/net show the thread's), then
// returns the thread to the process's own namespace. An empty nsPath, or
// the process's own namespace, runs fn directly.
func Do(nsPath string, fn func()) error {
	if nsPath == "" || sameFile(nsPath, "/proc/self/ns/net") {
		fn()
		return nil
	}
	target, err := os.Open(nsPath)
	if err != nil {
		return fmt.Errorf("opening network namespace: %w", err)
	}
	defer target.Close()
	return onThread(func() error {
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("entering network namespace: %w", err)
		}
		fn()
		return nil
	})
}

// onThread runs fn on a locked thread of its own, then returns the thread
// to the network namespace it started in, and returns fn's error. If it
// cannot return, the thread stays locked and dies with its goroutine.
func onThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(threadNetns())
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("opening own network namespace: %w", err)
			return
		}
		defer own.Close()
		ferr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- ferr
	}()
	return <-ch
}

// DialContext connects to addr over network with d from the network
// namespace at nsPath (see Do); the connection then lives there.
func DialContext(ctx context.Context, d *net.Dialer, nsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var derr error
	if err := Do(nsPath, func() { conn, derr = d.DialContext(ctx, network, addr) }); err != nil {
		return nil, err
	}
	return conn, derr
}

// sameFile reports whether paths a and b are the same file (namespace).
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
