package localcells

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// BuildPlugin builds kip-plugin-local from the workspace into the test's
// temporary directory and returns its path, as
// test/e2e/framework.BuildBinaries does, for simulator tests that start
// real cells.
func BuildPlugin(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kip-plugin-local")
	cmd := exec.Command("go", "build", "-o", out, "github.com/kipcell/kip/plugins/local/cmd/kip-plugin-local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kip-plugin-local: %v\n%s", err, b)
	}
	return out
}

// StartForTest starts LocalCells for a simulator's test, closed when
// the test ends: the kip-plugin-local binary built from the workspace, in
// loopback network mode, with /bin/sleep standing in for the cell agent,
// sized like types. It returns them with their state directory.
func StartForTest(ctx context.Context, t testing.TB, types []simcells.InstanceType, log *slog.Logger) (*LocalCells, string) {
	t.Helper()
	stateDir := t.TempDir()
	cells, err := New(ctx, Config{
		PluginPath: BuildPlugin(t), InstanceTypes: types, AgentCommand: []string{"/bin/sleep", "300"},
		StateDir: stateDir, Network: "loopback", Logger: log,
	})
	if err != nil {
		t.Fatalf("starting local cells: %v", err)
	}
	t.Cleanup(func() {
		if err := cells.Close(); err != nil {
			t.Errorf("closing local cells: %v", err)
		}
	})
	return cells, stateDir
}

// CheckCell checks, for a simulator's test, that the instance's cell is a
// running local cell of its type at address (in the local plugin's
// loopback subnet) whose cell directory under stateDir holds bootstrap,
// and returns the cell's local instance ID and directory.
func CheckCell(ctx context.Context, t testing.TB, c *LocalCells, stateDir, instanceID, instanceType, address, bootstrap string) (string, string) {
	t.Helper()
	localID, ok := c.LocalID(instanceID)
	if !ok {
		t.Fatalf("no local cell recorded for %s", instanceID)
	}
	d, err := c.Client().Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{localID}})
	if err != nil || len(d.Instances) != 1 {
		t.Fatalf("describing local cell %s: %v (%v found)", localID, err, d)
	}
	local := d.Instances[0]
	if local.State != pluginapi.StateRunning || local.PrivateAddress() != address || local.CellID != instanceID || local.InstanceType != instanceType {
		t.Errorf("local cell %+v; want running, cell ID %s, type %s, address %s", local, instanceID, instanceType, address)
	}
	if a, err := netip.ParseAddr(address); err != nil || !netip.MustParsePrefix("127.77.0.0/16").Contains(a) {
		t.Errorf("address %q is not in the local plugin's loopback subnet", address)
	}
	cellDir := filepath.Join(stateDir, "cells", instanceID)
	if got, err := os.ReadFile(filepath.Join(cellDir, "bootstrap")); err != nil || string(got) != bootstrap {
		t.Errorf("the cell's bootstrap file: %q, %v; want %q", got, err, bootstrap)
	}
	return localID, cellDir
}
