package gcesim

import (
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// BootstrapKey is the instance metadata item that holds the kip
// bootstrap document (LaunchRequest.Bootstrap, verbatim), which the
// simulator gives the instance's cell as the boot recipe would.
const BootstrapKey = "kip-bootstrap"

// metadataItem is the value of the instance's metadata item key, or nil.
func metadataItem(body map[string]any, key string) []byte {
	md, _ := body["metadata"].(map[string]any)
	items, _ := md["items"].([]any)
	for _, it := range items {
		kv, _ := it.(map[string]any)
		if k, _ := kv["key"].(string); k == key {
			v, _ := kv["value"].(string)
			return []byte(v)
		}
	}
	return nil
}

// cellInstance is an instance as its cell's Lifecycle sees it
// (simcells.Instance); its methods run under s.mu.
type cellInstance struct {
	s  *Server
	in *instance
}

func (c cellInstance) Cell() *simcells.Cell { return &c.in.cell }
func (c cellInstance) ReadyAt() time.Time   { return c.in.runningAt }

// StartFailed stops an instance whose cell could not start: it goes
// STOPPING and TERMINATED, as a GCE instance whose guest failed.
func (c cellInstance) StartFailed(now time.Time) {
	if !c.in.stopping {
		c.in.beginStop(now, c.s.shutdownDelay)
	}
}

// CellStopped stops the instance's metadata server.
func (c cellInstance) CellStopped(time.Time) { c.s.metadata.Stop(metadataKey(c.in.key)) }

// SetAgentDelay sets how long after they run the instances inserted from
// now on start their cell agents (Options.AgentDelay).
func (s *Server) SetAgentDelay(d time.Duration) { s.cells.SetAgentDelay(d) }

// SilenceAgents makes the next n instances inserted never start their
// cell agents: they run, with an address, and nothing answers there, as
// an instance whose image or startup script is broken. It needs a
// CellStarter that is an AgentStarter (localcells.LocalCells).
func (s *Server) SilenceAgents(n int) { s.cells.Silence(n) }

// CellTypes are the local cell sizes of machine types (for a CellStarter
// such as localcells.LocalCells, which sizes cells like the types the
// simulator launches), as ec2sim.CellTypes does for EC2's.
func CellTypes(types []MachineType) []simcells.InstanceType {
	out := make([]simcells.InstanceType, 0, len(types))
	for _, t := range types {
		out = append(out, simcells.InstanceType{Name: t.Name, VCPUs: int32(t.GuestCPUs), MemoryMiB: int64(t.MemoryMiB)}) //nolint:gosec // GCE's vCPU counts fit
	}
	return out
}
