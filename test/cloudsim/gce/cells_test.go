package gcesim

import (
	"net/http"
	"testing"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// TestCellsFollowInstances: an inserted instance's cell starts from its
// kip-bootstrap item, named after the instance, of its machine type; the
// instance is RUNNING once the boot delay passed and the cell started,
// with the cell's address as nic0's networkIP; delete stops the cell, and
// the instance is TERMINATED once it stopped.
func TestCellsFollowInstances(t *testing.T) {
	clk := newClock()
	cells := cellstest.NewFakeCells()
	cells.Gate = make(chan struct{})
	sim := startSim(t, Options{Now: clk.Now, Cells: cells, BootDelay: 30 * time.Second, ShutdownDelay: 10 * time.Second})

	const bootstrap = `{"cellID":"kip-cell-1"}`
	body := insertBody("kip-cell-1", "e2-small", "", "", bootstrap)
	body["networkInterfaces"] = []any{map[string]any{"aliasIpRanges": []any{map[string]any{"ipCidrRange": "/32"}}}}
	if code, op := sim.insert(body, ""); code != http.StatusOK || op["error"] != nil {
		t.Fatalf("insert: %d %v", code, op)
	}
	clk.Advance(time.Minute)
	if st := sim.status("kip-cell-1"); st != "STAGING" {
		t.Errorf("status after the boot delay, cell not started: %s, want STAGING", st)
	}
	if _, in := sim.get("kip-cell-1"); nic0IP(in) != "" {
		t.Errorf("networkIP before the cell started: %q, want none", nic0IP(in))
	}
	close(cells.Gate)
	eventually(t, "the cell started", func() bool { return cells.IsStarted("kip-cell-1") })
	eventually(t, "RUNNING", func() bool { return sim.status("kip-cell-1") == "RUNNING" })
	_, in := sim.get("kip-cell-1")
	started, _ := cells.Started("kip-cell-1")
	addr, typ, got := started.Address, started.Type, started.Bootstrap
	if nic0IP(in) != addr || typ != "e2-small" || got != bootstrap {
		t.Errorf("networkIP %q, cell type %q, bootstrap %q; want %q, e2-small, %q", nic0IP(in), typ, got, addr, bootstrap)
	}
	// The alias IP the insert asked for is the cell's pod address.
	if got := nic0Alias(in); got != "127.78.0.2/32" {
		t.Errorf("aliasIpRanges %q, want the cell's pod address 127.78.0.2/32", got)
	}
	if in["lastStartTimestamp"] == nil {
		t.Error("a RUNNING instance without lastStartTimestamp")
	}

	if code, op := sim.do(http.MethodDelete, "zones/"+testZone+"/instances/kip-cell-1", nil); code != http.StatusOK || op["status"] != "RUNNING" {
		t.Fatalf("delete: %d %v; want a RUNNING operation", code, op)
	}
	eventually(t, "the cell stopped", func() bool { return cells.Stops("kip-cell-1") == 1 })
	if st := sim.status("kip-cell-1"); st != "STOPPING" {
		t.Errorf("status within the shutdown delay: %s, want STOPPING", st)
	}
	clk.Advance(10 * time.Second)
	if st := sim.status("kip-cell-1"); st != "" {
		t.Errorf("status after the shutdown delay: %q, want gone (notFound)", st)
	}
	if got, _ := sim.Instance(testZone, "kip-cell-1"); got.Status != "TERMINATED" || !got.Gone || got.Address != addr {
		t.Errorf("sim.Instance = %s gone %v address %q; want TERMINATED, gone, %q", got.Status, got.Gone, got.Address, addr)
	}
}

// TestAgentDelayAndSilence: an agent starts AgentDelay after its
// instance runs (by the injected clock, once the instance is read); a
// silenced one never does.
func TestAgentDelayAndSilence(t *testing.T) {
	clk := newClock()
	cells := cellstest.NewAgentCells()
	sim := startSim(t, Options{Now: clk.Now, Cells: cells, BootDelay: time.Minute, AgentDelay: 2 * time.Minute})
	sim.SilenceAgents(1)
	for _, name := range []string{"silent", "normal"} {
		if code, op := sim.insert(insertBody(name, "e2-small", "", "", "{}"), ""); code != http.StatusOK {
			t.Fatalf("insert %s: %d %v", name, code, op)
		}
	}
	eventually(t, "both cells started", func() bool { return cells.IsStarted("silent") && cells.IsStarted("normal") })
	clk.Advance(time.Minute)
	if st := sim.status("normal"); st != "RUNNING" || cells.AgentStarted("normal") {
		t.Errorf("after the boot delay: %s, agent started %v; want RUNNING without the agent", st, cells.AgentStarted("normal"))
	}
	clk.Advance(2 * time.Minute)
	eventually(t, "the agent started", func() bool { sim.status("normal"); return cells.AgentStarted("normal") })
	sim.status("silent")
	time.Sleep(50 * time.Millisecond) // a silenced agent that started would have by now
	if got, _ := sim.Instance(testZone, "silent"); cells.AgentStarted("silent") || !got.Silent {
		t.Errorf("the silenced agent started (%v) or the instance does not say it is silent (%v)", cells.AgentStarted("silent"), got.Silent)
	}
}

// TestWithoutCells: with no CellStarter an instance runs after its boot
// delay with an address of 10.128.0.0/16.
func TestWithoutCells(t *testing.T) {
	sim := startSim(t, Options{})
	sim.insert(insertBody("kip-a", "e2-small", "", "", ""), "")
	if _, in := sim.get("kip-a"); in["status"] != "RUNNING" || nic0IP(in) != "10.128.0.3" || nic0Alias(in) != "" {
		t.Errorf("instance without cells: %v at %q alias %q, want RUNNING at 10.128.0.3 without an alias IP", in["status"], nic0IP(in), nic0Alias(in))
	}
	b := insertBody("kip-b", "e2-small", "", "", "")
	b["networkInterfaces"] = []any{map[string]any{"aliasIpRanges": []any{map[string]any{"ipCidrRange": "/32"}}}}
	sim.insert(b, "")
	if _, in := sim.get("kip-b"); nic0IP(in) != "10.128.0.4" || nic0Alias(in) != "10.128.8.4/32" {
		t.Errorf("instance without cells, with an alias IP: at %q alias %q, want 10.128.0.4 and 10.128.8.4/32", nic0IP(in), nic0Alias(in))
	}
}
