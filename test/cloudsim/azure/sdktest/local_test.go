package sdktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
)

// agentPort is where the stand-in agent of a local cell answers.
const agentPort = "18089"

// TestMain runs the test binary as a cell's stand-in agent when the local
// plugin starts it so (agentArgs): an HTTP server on the cell's address
// that answers with the cell's ID.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "azuresim-agent" {
		addr, cellID := os.Args[2], os.Args[3]
		err := http.ListenAndServe(net.JoinHostPort(addr, agentPort), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { //nolint:gosec // a test's stand-in agent
			_, _ = io.WriteString(w, "kip-cell "+cellID)
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestRealCell creates a VM with the SDK whose cell is a real local cell
// (the kip-plugin-local binary, loopback network mode) booted from its
// userData: the NIC's private IP is the cell's address, its agent answers
// there, and the delete stops the cell.
func TestRealCell(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	cells, err := localcells.New(ctx, localcells.Config{
		PluginPath: localcells.BuildPlugin(t), InstanceTypes: azuresim.CellSizes(azuresim.DefaultSizes),
		AgentCommand: []string{exe, "azuresim-agent", "{address}", "{cellID}"}, StateDir: stateDir, Network: "loopback",
	})
	if err != nil {
		t.Fatalf("starting local cells: %v", err)
	}
	t.Cleanup(func() {
		if err := cells.Close(); err != nil {
			t.Errorf("closing local cells: %v", err)
		}
	})
	sim, c := startSim(t, azuresim.Options{Cells: cells})

	const name, bootstrap = "kip-real-1", `{"cellID":"kip-real-1"}`
	mustCreate(t, c, spec{name: name, size: "Standard_B2s", zone: "1", bootstrap: bootstrap})
	nic, err := c.nics.Get(ctx, rg, name+"-nic", nil)
	if err != nil {
		t.Fatal(err)
	}
	ip := str(nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress)
	localID, cellDir := localcells.CheckCell(ctx, t, cells, stateDir, name, "Standard_B2s", ip, bootstrap)

	// The agent answers at the VM's address.
	var answer string
	eventually(t, "the agent to answer", func() bool {
		resp, err := http.Get("http://" + net.JoinHostPort(ip, agentPort) + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer = string(b)
		return true
	})
	if answer != "kip-cell "+name {
		t.Errorf("the agent at %s answered %q", ip, answer)
	}
	if vm, _ := sim.VM(rg, name); !vm.AgentStarted {
		t.Errorf("VM %+v: agent not started", vm)
	}

	if err := remove(ctx, c, name); err != nil {
		t.Fatal(err)
	}
	d, err := cells.Client().Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{localID}})
	if err != nil || len(d.Instances) != 0 {
		t.Errorf("local cell after the delete: %+v, %v; want none", d, err)
	}
	if _, err := os.Stat(cellDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cell directory %s still there: %v", cellDir, err)
	}
}
