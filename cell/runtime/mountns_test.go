package runtime

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperSocketEnv makes the test binary a process that serves a unix
// socket at the path it names (TestHelperServeSocket) instead of running
// the tests.
const helperSocketEnv = "KIP_TEST_SERVE_SOCKET"

// TestHelperServeSocket is not a test: run by TestMountsShared in another
// mount namespace, it serves the socket until it is killed.
func TestHelperServeSocket(t *testing.T) {
	path := os.Getenv(helperSocketEnv)
	if path == "" {
		t.Skip("a helper process of TestMountsShared")
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
}

func TestMountsShared(t *testing.T) {
	t.Run("same process", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "runtime.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		if err := MountsShared(t.Context(), "unix://"+path); err != nil {
			t.Errorf("a daemon in this process: %v, want shared", err)
		}
	})
	t.Run("no daemon", func(t *testing.T) {
		if err := MountsShared(t.Context(), filepath.Join(t.TempDir(), "none.sock")); err == nil {
			t.Error("no daemon at the socket, yet mounts are shared")
		}
	})
	t.Run("another mount namespace", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("a new mount namespace needs root")
		}
		path := filepath.Join(t.TempDir(), "runtime.sock")
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeSocket$")
		cmd.Env = append(os.Environ(), helperSocketEnv+"="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(path); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the helper never served its socket")
			}
			time.Sleep(10 * time.Millisecond)
		}
		err := MountsShared(t.Context(), path)
		if err == nil || !strings.Contains(err.Error(), "namespace") {
			t.Errorf("a daemon in another mount namespace: %v, want an error naming the namespaces", err)
		}
	})
}

func TestSameNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, self, peer string
		want             string // "" for same
	}{
		{"same", "/proc/self/ns/mnt", "/proc/self/ns/mnt", ""},
		{"different", "/proc/self/ns/mnt", "/proc/self/ns/net", "namespace net:"},
		{"peer gone", "/proc/self/ns/mnt", "/proc/0/ns/mnt", "reading the runtime's namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameNamespace(tc.self, tc.peer)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("sameNamespace = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("sameNamespace = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
