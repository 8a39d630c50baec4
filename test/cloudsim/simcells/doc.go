// Package simcells is what the cloud simulators of test/cloudsim (ec2sim,
// gcesim) share to make every simulated instance a real cell: the
// CellStarter and AgentStarter interfaces a simulator starts cells
// through (test/cloudsim/simcells/localcells implements them with the
// real local plugin), IMDSLocator, the InstanceType sizes a CellStarter
// sizes cells like, and the Lifecycle that starts and stops an instance's
// cell and agent in the background, with the instance's bookkeeping
// (Cell) behind a small interface (Instance) each simulator implements
// on its own instance record.
//
// A simulator gives its Lifecycle the lock that guards its instances;
// the Lifecycle changes a Cell only under it, so the simulator reads an
// instance's cell as consistently as the rest of it. Agent delays are
// measured from the instance's ReadyAt by the simulator's clock, so tests
// that move an injected clock start agents (AgentDueLocked) without
// sleeping.
//
// The simulators' tests share a manual clock and recording CellStarter
// fakes from test/cloudsim/simcells/cellstest.
//
// This package is test support: it imports only the standard library.
package simcells
