// Package containerdtest gives integration and end-to-end tests a private containerd
// daemon (started as a plain child process with its own root, state and
// socket, the CRI plugin off; /work/shared/research/containerd.md §2 and
// §8), a network namespace holding a pod IP, and the test images in an
// in-process registry. Everything is removed when the test ends.
//
// Tests using it are skipped unless they run as root with containerd,
// runc and ip installed.
package containerdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
)

// Daemon is a running private containerd.
type Daemon struct {
	Dir      string
	Socket   string
	RuncRoot string
	Client   *client.Client
}

// Require skips the test unless the machine can run containers.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, bin := range []string{"containerd", "runc", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
}

// Random returns n random hex digits.
func Random(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// StartDaemon starts containerd for the test and stops it at the end.
func StartDaemon(t testing.TB) *Daemon {
	t.Helper()
	Require(t)
	d, stop, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if data, err := os.ReadFile(filepath.Join(d.Dir, "containerd.log")); err == nil {
				t.Logf("containerd log (tail):\n%s", tail(string(data), 3000))
			}
		}
		stop()
	})
	return d
}

// Start starts a private containerd in a new directory under /tmp (short:
// its socket path must fit in 108 bytes) and returns it with the function
// that stops it and removes everything it left: shims, mounts, files. For
// callers without a testing.TB, such as a TestMain.
func Start() (*Daemon, func(), error) {
	dir, err := os.MkdirTemp("/tmp", "kc-")
	if err != nil {
		return nil, nil, fmt.Errorf("creating containerd directory: %w", err)
	}
	return start(dir)
}

// maxSocketPath is the longest Unix socket path the kernel takes
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// StartIn starts a private containerd in dir, which it owns: whatever a
// daemon that died there left (shims, mounts, files) is removed first, and
// the returned stop function removes dir. For a long-lived caller such as
// the demo, whose state belongs under its own directory. The socket
// dir/containerd.sock must fit in a Unix socket path.
func StartIn(dir string) (*Daemon, func(), error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("resolving containerd directory: %w", err)
	}
	socket := filepath.Join(dir, "containerd.sock")
	if len(socket) > maxSocketPath {
		return nil, nil, fmt.Errorf("starting containerd in %s: its socket path %s is %d bytes, longer than a Unix socket allows (%d)",
			dir, socket, len(socket), maxSocketPath)
	}
	KillShims(socket)
	UnmountUnder(dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, fmt.Errorf("removing what an earlier containerd left in %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating containerd directory: %w", err)
	}
	return start(dir)
}

func start(dir string) (*Daemon, func(), error) {
	d := &Daemon{Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), RuncRoot: filepath.Join(dir, "runc")}
	config := fmt.Sprintf(`version = 2
root  = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Socket, filepath.Join(dir, "opt"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, nil, fmt.Errorf("writing containerd config: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, nil, fmt.Errorf("creating containerd log: %w", err)
	}
	cmd := exec.Command("containerd", "--config", cfgPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig fires when the forking thread dies: keep it alive.
	goruntime.LockOSThread()
	err = cmd.Start()
	goruntime.UnlockOSThread()
	if err != nil {
		_ = logFile.Close()
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("starting containerd: %w", err)
	}
	stop := func() {
		if d.Client != nil {
			_ = d.Client.Close()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		KillShims(d.Socket)
		UnmountUnder(dir)
		_ = os.RemoveAll(dir)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := client.New(d.Socket, client.WithTimeout(200*time.Millisecond))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Version(ctx)
			cancel()
			if err == nil {
				d.Client = c
				return d, stop, nil
			}
			_ = c.Close()
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			stop()
			return nil, nil, fmt.Errorf("containerd did not become ready: %w; its log:\n%s", err, tail(string(data), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// KillShims kills the shims of the containerd listening on socket only:
// their command line names it (test/kubeletnode's containerd too).
func KillShims(socket string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, socket) {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// UnmountUnder unmounts what is still mounted below dir (a crashed test's
// rootfs).
func UnmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

// Netns is a named network namespace with a pod IP on a veth inside it.
type Netns struct {
	Name string
	Path string
	IP   string
}

// NewNetns creates a network namespace holding ip (with lo up) and deletes
// it when the test ends.
func NewNetns(t testing.TB, ip string) *Netns {
	t.Helper()
	Require(t)
	n := &Netns{Name: "kct-" + Random(8), IP: ip}
	n.Path = "/var/run/netns/" + n.Name
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.Name).Run() })
	run("-n", n.Name, "link", "set", "lo", "up")
	// A veth pair with both ends inside (no dummy module everywhere).
	run("-n", n.Name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	run("-n", n.Name, "addr", "add", ip+"/24", "dev", "eth0")
	run("-n", n.Name, "link", "set", "eth0", "up")
	run("-n", n.Name, "link", "set", "eth1", "up")
	return n
}
