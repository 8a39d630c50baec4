package gcesim

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
)

// TestLocalCells inserts an instance whose cell is a real local cell: the
// kip-plugin-local binary under host/plugin's supervisor, in loopback
// network mode, with /bin/sleep standing in for the cell agent, booted
// from the instance's kip-bootstrap metadata item.
func TestLocalCells(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cells, stateDir := localcells.StartForTest(ctx, t, CellTypes(DefaultMachineTypes), nil)
	sim := startSim(t, Options{Cells: cells})

	const name, bootstrap = "kip-local-1", `{"cellID":"kip-local-1"}`
	if code, op := sim.insert(insertBody(name, "e2-small", "SPOT", "DELETE", bootstrap), rid1); code != http.StatusOK || op["error"] != nil {
		t.Fatalf("insert: %d %v", code, op)
	}
	eventually(t, "RUNNING", func() bool { return sim.status(name) == "RUNNING" })
	_, in := sim.get(name)
	ip := nic0IP(in)

	// The address is the one the local plugin gave the cell, which runs.
	localID, cellDir := localcells.CheckCell(ctx, t, cells, stateDir, name, "e2-small", ip, bootstrap)

	// Preemption (instanceTerminationAction DELETE): the instance ends
	// and the local cell is gone.
	if err := sim.Preempt(testZone, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the instance gone", func() bool { return sim.status(name) == "" })
	d, err := cells.Client().Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{localID}})
	if err != nil || len(d.Instances) != 0 {
		t.Errorf("local cell after preemption: %+v, %v; want none", d, err)
	}
	if _, err := os.Stat(cellDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cell directory %s still there: %v", cellDir, err)
	}
}
