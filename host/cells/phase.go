package cells

import (
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
)

// cellPhase is where a cell is in its life: the state machine doc.go
// draws. The cell's goroutine (cell.run) moves it forward, one phase at
// each step; whoever ends the cell (a deletion, the pod's end, the
// instance's loss, an eviction) moves it to phaseEnding, and the
// termination to phaseEnded (enterLocked says which moves are allowed).
type cellPhase int

const (
	// phaseAdmitted: the cell was made for its pod (CreatePod, or
	// adoption after a restart); the pod is being admitted.
	phaseAdmitted cellPhase = iota
	// phasePlacing: the pod was admitted and its offerings are ranked; a
	// pod nothing fits, or whose choices are refused, stays here.
	phasePlacing
	// phaseLaunching: a Launch was issued (or a standby of the warm pool
	// taken) and no instance answered yet; a cell stays here while it
	// ranks again after a refusal, and comes back here when its instance
	// never booted and the pod's next cell is launched (bootFailed; an
	// adopted cell goes back to placing: this kip launched none).
	phaseLaunching
	// phaseBooting: the cell has its instance, which does not run yet
	// (awaitRunning).
	phaseBooting
	// phaseJoining: the instance runs; once it has an address too, its
	// agent is joined, dialled and sent the pod, within
	// Config.AgentTimeout (serveWithin).
	phaseJoining
	// phaseRunning: the agent answered; it serves the pod.
	phaseRunning
	// phaseEnding: the pod ended, failed or was deleted; the cell is
	// ending (end, terminate).
	phaseEnding
	// phaseEnded: the cell's instance was ended (or it never had one:
	// the pod was rejected); the pod's status is kept until the pod is
	// deleted.
	phaseEnded
)

var phaseNames = [...]string{"admitted", "placing", "launching", "booting", "joining", "running", "ending", "ended"}

func (p cellPhase) String() string { return phaseNames[p] }

// metric is the phase as kip_cells and /cells count it (metrics.CellPhases).
func (p cellPhase) metric() string {
	switch p {
	case phaseAdmitted, phasePlacing:
		return metrics.CellPending
	case phaseLaunching:
		return metrics.CellLaunching
	case phaseBooting:
		return metrics.CellBooting
	case phaseJoining:
		return metrics.CellConnecting
	case phaseRunning:
		return metrics.CellRunning
	case phaseEnding:
		return metrics.CellTerminating
	default:
		return metrics.CellGone
	}
}

// bootingPhase is the phase of a cell whose instance is inst and whose
// agent has not answered: booting until the cloud says the instance runs,
// joining from then on (awaitRunning may still wait for its address).
func bootingPhase(inst *pluginapi.Instance) cellPhase {
	if inst.State == pluginapi.StateRunning {
		return phaseJoining
	}
	return phaseBooting
}

// enterLocked moves the cell to phase p, and reports whether it moved;
// c.mu is held. Before phaseEnding any move is allowed (a cell whose
// instance never booted goes back to phaseLaunching); a cell ending only
// ends (phaseEnded), and one that ended stays so: the cell's goroutine,
// still running when a deletion ends the cell, moves it no further.
func (c *cell) enterLocked(p cellPhase) bool {
	switch {
	case c.phase == phaseEnded, c.phase == phaseEnding && p != phaseEnded:
		return false
	case c.phase != p:
		c.log().Debug("cell phase", "phase", p, "was", c.phase)
	}
	c.phase = p
	return true
}

// enter is enterLocked for a caller that does not hold c.mu.
func (c *cell) enter(p cellPhase) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enterLocked(p)
}
