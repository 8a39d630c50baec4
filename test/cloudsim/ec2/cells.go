package ec2sim

import (
	"context"
	"time"
)

// CellStarter starts and stops the cell behind each simulated instance.
//
// Start is called once per instance, in the background after RunInstances
// answered; the instance stays pending until it returns, and becomes
// running with the returned address (its privateIpAddress) once the boot
// delay has passed. If Start fails the instance goes to terminated with
// stateReason Server.InternalError. Stop is called once the instance is
// shutting down (terminated or interrupted) or its Start failed, always
// after Start has returned; it must be idempotent, and a cell it does not
// know is already stopped.
type CellStarter interface {
	Start(ctx context.Context, instanceID, instanceType string, bootstrap []byte) (address string, err error)
	Stop(ctx context.Context, instanceID string) error
}

// AgentStarter is a CellStarter that starts a cell's agent apart from the
// cell: Start brings up the instance's machine (its address) with the
// agent held back, and StartAgent lets it start. The simulator calls it
// Options.AgentDelay after the instance runs, and never for an instance
// whose agent is silenced (SilenceAgents). It must be idempotent.
type AgentStarter interface {
	CellStarter
	StartAgent(ctx context.Context, instanceID string) error
}

// stopTimeout bounds one Stop of a cell.
const stopTimeout = time.Minute

// startCell brings up the cell of a new instance: at once without a
// CellStarter (an address from the subnet), in the background with one.
// The caller holds s.mu.
func (s *Server) startCell(in *instance) {
	s.startIMDS(in)
	if s.opts.Cells == nil {
		if a, ok := in.subnet.allocate(); ok {
			in.subnetAddr, in.address = a, a.String()
		}
		in.cellStarted = true
		return
	}
	in.cellStarting = true
	if s.silentAgents > 0 {
		s.silentAgents--
		in.silent = true
	}
	in.agentDelay = s.agentDelay
	id, typ, bootstrap := in.id, in.itype.Name, in.bootstrap
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.CellStartTimeout)
		addr, err := s.opts.Cells.Start(ctx, id, typ, bootstrap)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		in.cellStarting = false
		if err != nil {
			s.log.Error("starting cell failed; instance terminated", "instance", id, "cell", in.cellAttr(), "error", err)
			if in.state == statePending {
				in.state, in.reason, in.terminatedAt = stateTerminated, ReasonInternalError, s.now()
			}
			// A failed Start may have left part of a cell behind.
			in.stopRequested = true
			s.stopCellLocked(in)
			return
		}
		in.cellStarted, in.address = true, addr
		s.log.Info("cell started", "instance", id, "cell", in.cellAttr(), "address", addr)
		if in.stopRequested {
			s.stopCellLocked(in)
			return
		}
		s.startAgentLocked(in)
	}()
}

// startAgentLocked arranges for the agent of an instance whose cell
// started to start s.agentDelay after the instance runs, where the
// CellStarter holds agents back (AgentStarter) and the agent is not
// silenced: at that time by the wall clock, or when the instance is read
// past it by the injected one (advance). The caller holds s.mu.
func (s *Server) startAgentLocked(in *instance) {
	if _, ok := s.opts.Cells.(AgentStarter); !ok {
		in.agentStarted = true // it started with the cell
		return
	}
	if in.silent {
		s.log.Info("cell agent silenced: it never starts", "instance", in.id, "cell", in.cellAttr())
		return
	}
	s.agentDueLocked(in, s.now())
	wait := in.readyAt.Add(in.agentDelay).Sub(s.now())
	if in.agentStarting || wait <= 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.agentDueLocked(in, s.now())
	}()
}

// agentDueLocked starts the agent of an instance, in the background, once
// it is due (its cell started, the instance ran agentDelay ago, not
// silenced, not shutting down) and not started yet. The caller holds s.mu.
func (s *Server) agentDueLocked(in *instance, now time.Time) {
	starter, ok := s.opts.Cells.(AgentStarter)
	if !ok || in.silent || in.agentStarting || in.agentStarted || !in.cellStarted || in.stopRequested ||
		in.state != stateRunning && now.Before(in.readyAt) || now.Before(in.readyAt.Add(in.agentDelay)) {
		return
	}
	in.agentStarting = true
	id := in.id
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.CellStartTimeout)
		err := starter.StartAgent(ctx, id)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		in.agentStarting = false
		if err != nil {
			s.log.Error("starting cell agent failed", "instance", id, "cell", in.cellAttr(), "error", err)
			return
		}
		in.agentStarted = true
		s.log.Info("cell agent started", "instance", id, "cell", in.cellAttr())
	}()
}

// stopCell stops the cell of an instance that is shutting down, at once
// without a CellStarter, in the background with one (after its Start
// returned). The caller holds s.mu.
func (s *Server) stopCell(in *instance) {
	if in.stopRequested {
		return
	}
	in.stopRequested = true
	switch {
	case s.opts.Cells == nil:
		if in.subnetAddr.IsValid() {
			delete(in.subnet.used, in.subnetAddr)
		}
		in.cellStopped, in.stoppedAt = true, s.now()
		s.stopIMDS(in.id)
	case in.cellStarting:
		// The start goroutine stops it when Start returns.
	case in.cellStarted:
		s.stopCellLocked(in)
	default:
		in.cellStopped, in.stoppedAt = true, s.now()
		s.stopIMDS(in.id)
	}
}

// stopCellLocked runs CellStarter.Stop in the background. The caller holds
// s.mu.
func (s *Server) stopCellLocked(in *instance) {
	id := in.id
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// Stopping must finish even when the server is closing.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), stopTimeout)
		defer cancel()
		err := s.opts.Cells.Stop(ctx, id)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			// EC2 always terminates; the simulator says so and logs the
			// cell it may have leaked.
			s.log.Error("stopping cell failed; it may still run", "instance", id, "cell", in.cellAttr(), "error", err)
		} else {
			s.log.Info("cell stopped", "instance", id, "cell", in.cellAttr())
		}
		in.cellStopped, in.stoppedAt = true, s.now()
		s.stopIMDS(id)
	}()
}
