// Package cellstest holds what the simulators' tests share: a manual
// clock for their Options.Now and recording fakes of
// simcells.CellStarter, simcells.AgentStarter and simcells.DiskStarter
// (DiskCells, disks.go, which also injects errors).
//
// It imports only the standard library, simcells and test/fakeclock.
package cellstest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
	"github.com/kipcell/kip/test/fakeclock"
)

// Clock is a manual clock; tests move it instead of sleeping.
type Clock = fakeclock.Clock

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return fakeclock.New(t) }

// FakeCells is a CellStarter that records calls and gives the n-th cell
// the address 127.77.0.<n+1> and the pod address 127.78.0.<n+1>. With a Gate, Start blocks until it is
// closed; FailStart makes Start fail.
type FakeCells struct {
	Gate      chan struct{}
	FailStart error

	mu         sync.Mutex
	n          int
	started    map[string]string // instance → address
	types      map[string]string
	bootstraps map[string][]byte
	stopped    map[string]int
}

// NewFakeCells returns a FakeCells without gate or failure.
func NewFakeCells() *FakeCells {
	return &FakeCells{started: map[string]string{}, types: map[string]string{}, bootstraps: map[string][]byte{}, stopped: map[string]int{}}
}

// Start records the cell and returns its addresses.
func (f *FakeCells) Start(ctx context.Context, instanceID, instanceType string, bootstrap []byte) (simcells.Addresses, error) {
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-ctx.Done():
			return simcells.Addresses{}, ctx.Err()
		}
	}
	if f.FailStart != nil {
		return simcells.Addresses{}, f.FailStart
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	addr := fmt.Sprintf("127.77.0.%d", f.n+1)
	f.started[instanceID], f.types[instanceID], f.bootstraps[instanceID] = addr, instanceType, bootstrap
	return simcells.Addresses{Private: addr, Pod: fmt.Sprintf("127.78.0.%d", f.n+1)}, nil
}

// Stop counts the stop.
func (f *FakeCells) Stop(_ context.Context, instanceID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped[instanceID]++
	return nil
}

// IsStarted reports whether the instance's cell started.
func (f *FakeCells) IsStarted(id string) bool {
	_, ok := f.Started(id)
	return ok
}

// Started returns the address, type and bootstrap the instance's cell
// started with.
func (f *FakeCells) Started(id string) (Started, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr, ok := f.started[id]
	return Started{Address: addr, Type: f.types[id], Bootstrap: string(f.bootstraps[id])}, ok
}

// Started is what a cell started with.
type Started struct{ Address, Type, Bootstrap string }

// Address is the address of the instance's cell, or "".
func (f *FakeCells) Address(id string) string {
	s, _ := f.Started(id)
	return s.Address
}

// Type is the instance type the instance's cell started with.
func (f *FakeCells) Type(id string) string {
	s, _ := f.Started(id)
	return s.Type
}

// Bootstrap is the bootstrap the instance's cell started with.
func (f *FakeCells) Bootstrap(id string) string {
	s, _ := f.Started(id)
	return s.Bootstrap
}

// Stops is how many times the instance's cell was stopped.
func (f *FakeCells) Stops(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped[id]
}

// AgentCells is a FakeCells whose agents start apart (an AgentStarter).
type AgentCells struct {
	*FakeCells
	mu     sync.Mutex
	agents map[string]bool
}

// NewAgentCells returns an AgentCells.
func NewAgentCells() *AgentCells {
	return &AgentCells{FakeCells: NewFakeCells(), agents: map[string]bool{}}
}

// StartAgent records the agent's start.
func (a *AgentCells) StartAgent(_ context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.agents[id] = true
	return nil
}

// AgentStarted reports whether the instance's agent started.
func (a *AgentCells) AgentStarted(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agents[id]
}
