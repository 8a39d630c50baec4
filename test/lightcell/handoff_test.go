package lightcell

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/test/lightcell/handoff"
)

// serveHandoffs runs ServeHandoffs on a socket of its own until the test
// ends, and returns the socket.
func serveHandoffs(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "cells.sock")
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- ServeHandoffs(ctx, lis, Options{Runtime: fakeruntime.Config{}}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHandoffs: %v", err)
		}
	})
	return socket
}

// TestHandedCell: a cell handed over with kip-cell's flags and
// environment runs in the hosting process, serves the host in the stub's
// network namespace, runs its pod, and stops when the stub asks, which
// then exits 0.
func TestHandedCell(t *testing.T) {
	socket := serveHandoffs(t)
	ca := newCA(t)
	id, addr := "handed-1", loopbackAddress()
	b, err := ca.Bootstrap(id, "test", "kip", "uid-handed", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The local plugin's environment: the state directory and address.
	t.Setenv("KIP_CELL_STATE_DIR", filepath.Join(dir, "agent"))
	t.Setenv("KIP_CELL_ADDRESS", addr)
	t.Chdir(dir)
	conn, err := handoff.Hand(socket, []string{"--bootstrap", "bootstrap.json", "--imds-endpoint", "none",
		"--containerd-address", "/nonexistent.sock"})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		code, err := conn.Wait()
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		waited <- err
	}()
	var agentUp error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var c net.Conn
		if c, agentUp = net.Dial("tcp", net.JoinHostPort(addr, fmt.Sprint(cellapi.Port))); agentUp == nil {
			_ = c.Close()
			break
		}
	}
	if agentUp != nil {
		t.Fatalf("the handed cell never listened on %s (its pod IP from $KIP_CELL_ADDRESS): %v", addr, agentUp)
	}
	h := &host{agent: joinCell(t, ca, id, addr)}
	h.apply(t, testPod("handed", corev1.RestartPolicyAlways, "/app"))
	h.waitPhase(t, corev1.PodRunning)
	if _, err := os.Stat(filepath.Join(dir, "agent", "identity")); err != nil {
		t.Errorf("the cell's state is not in $KIP_CELL_STATE_DIR: %v", err)
	}

	if err := conn.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("the stopped cell: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stopped cell never ended")
	}
	if c, err := net.Dial("tcp", net.JoinHostPort(addr, fmt.Sprint(cellapi.Port))); err == nil {
		_ = c.Close()
		t.Error("the stopped cell still listens")
	}
}

// TestHandedCellWithBadFlags: the stub learns why its cell could not
// start, and exits 1.
func TestHandedCellWithBadFlags(t *testing.T) {
	socket := serveHandoffs(t)
	conn, err := handoff.Hand(socket, []string{"--no-such-flag"})
	if err != nil {
		t.Fatal(err)
	}
	code, err := conn.Wait()
	if code != 1 || err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("Wait = %d, %v; want 1 and the flag named", code, err)
	}
}
