package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/syncbuf"
)

// Test plugin binaries built by TestMain: the fake provider reporting
// version 1.0.0 and 2.0.0.
var pluginV1, pluginV2 string

func TestMain(m *testing.M) {
	if spec := os.Getenv(echoEnv); spec != "" {
		os.Exit(echo(spec))
	}
	dir, err := os.MkdirTemp("", "kip-host-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginV1 = filepath.Join(dir, "v1", BinaryPrefix+"fake")
	pluginV2 = filepath.Join(dir, "v2", BinaryPrefix+"fake")
	for _, b := range []struct{ out, version string }{{pluginV1, "1.0.0"}, {pluginV2, "2.0.0"}} {
		cmd := exec.Command("go", "build", "-o", b.out, "-ldflags", "-X main.version="+b.version, "./testdata/testplugin")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building test plugin:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// installPlugin copies src into a fresh plugin directory as
// kip-plugin-fake and returns the directory and the path.
func installPlugin(t testing.TB, src string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, BinaryPrefix+"fake")
	replaceBinary(t, src, path)
	return dir, path
}

// replaceBinary atomically puts a copy of src at dst, as an installer would.
func replaceBinary(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// writeScript writes an executable shell script.
func writeScript(t testing.TB, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// testLogger logs at info to the test's output and to the returned buffer.
func testLogger(t testing.TB) (*slog.Logger, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	w := io.MultiWriter(buf, t.Output())
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// testConfig is a Config for the fake plugin at path with fast restarts.
func testConfig(t testing.TB, path string, env ...string) Config {
	log, _ := testLogger(t)
	return Config{
		Name:      "fake",
		Path:      path,
		Env:       env,
		Configure: &pluginapi.ConfigureRequest{ClusterID: "c1", NodeName: "n1"},
		Logger:    log,
		Backoff:   func(int) time.Duration { return 20 * time.Millisecond },
		CallWait:  20 * time.Second,
	}
}

func open(t testing.TB, cfg Config) *Supervisor {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func launchReq(cell string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{CellID: cell, NodeName: "n1", PodUID: "uid-" + cell, InstanceType: "fake.medium"}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// procsRunning returns the live processes whose command line mentions path.
func procsRunning(path string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(path)) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// eventually polls cond for up to d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killPlugin(t testing.TB, s *Supervisor) int {
	t.Helper()
	pid := s.Pid()
	if pid <= 0 {
		t.Fatalf("Pid() = %d, want a process", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing plugin %d: %v", pid, err)
	}
	return pid
}

func listedCells(t testing.TB, c pluginapi.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := c.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	cells := map[string]string{}
	for _, inst := range resp.Instances {
		cells[inst.CellID] = inst.ID
	}
	return cells
}
