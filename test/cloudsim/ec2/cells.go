package ec2sim

import (
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// CellStarter starts and stops the cell behind each simulated instance
// (simcells.CellStarter): Start is called in the background after
// RunInstances answered, the instance stays pending until it returns, and
// becomes running with the returned address (its privateIpAddress) once
// the boot delay has passed; if Start fails the instance goes to
// terminated with stateReason Server.InternalError.
type CellStarter = simcells.CellStarter

// AgentStarter is a CellStarter that holds a cell's agent back until
// Options.AgentDelay after the instance runs (simcells.AgentStarter).
type AgentStarter = simcells.AgentStarter

// CellTypes are the sizes of EC2 instance types, for a CellStarter
// (localcells.Config.InstanceTypes).
func CellTypes(types []InstanceType) []simcells.InstanceType {
	out := make([]simcells.InstanceType, 0, len(types))
	for _, t := range types {
		out = append(out, simcells.InstanceType{Name: t.Name, VCPUs: t.VCPUs, MemoryMiB: t.MemoryMiB})
	}
	return out
}

// cellInstance is an instance as its cell's Lifecycle sees it
// (simcells.Instance); its methods run under s.mu.
type cellInstance struct {
	s  *Server
	in *instance
}

func (c cellInstance) Cell() *simcells.Cell { return &c.in.cell }
func (c cellInstance) ReadyAt() time.Time   { return c.in.readyAt }

// StartFailed ends the instance whose cell could not start.
func (c cellInstance) StartFailed(now time.Time) {
	if in := c.in; in.state == statePending {
		in.state, in.reason, in.terminatedAt = stateTerminated, ReasonInternalError, now
	}
}

// CellStopped frees what the instance held once its cell stopped: its
// subnet addresses (without a CellStarter, and the secondary ones taken
// from the subnet) and its metadata service.
func (c cellInstance) CellStopped(time.Time) {
	if c.in.subnetAddr.IsValid() {
		delete(c.in.subnet.used, c.in.subnetAddr)
	}
	for _, a := range c.in.subnetSecondaries {
		delete(c.in.subnet.used, a)
	}
	c.s.imds.Stop(c.in.id)
}

// startCell brings up the cell of a new instance: at once without a
// CellStarter (an address from the subnet), in the background with one.
// The caller holds s.mu.
func (s *Server) startCell(in *instance) {
	s.startIMDS(in)
	if !s.cells.HasStarter() {
		if a, ok := in.subnet.allocate(); ok {
			in.subnetAddr, in.cell.Address = a, a.String()
		}
	}
	s.cells.StartLocked(cellInstance{s, in})
	s.assignSecondaries(in)
}

// stopCell stops the cell of an instance that is shutting down. The
// caller holds s.mu.
func (s *Server) stopCell(in *instance) { s.cells.StopLocked(cellInstance{s, in}) }
