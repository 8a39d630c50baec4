// Package lightcell is a cell agent without containers, for load tests
// that need many cells on one machine: it speaks the real cell/api over
// mutual TLS, keeps the ClusterIP services the host sends through the
// real cell/services Proxy (the agent's own ApplyServices, cell/agent),
// and only counts what it would program; a pod applied to it is Running
// at once and never starts a process.
//
// Agent.Serve runs one for a bootstrap; test/cmd/kip-light-cells runs
// many in a process of their own, so that a benchmark measures the host's
// CPU apart from its cells'.
//
// It imports cell/agent, cell/api, cell/services and the Kubernetes API
// types; only tests and test commands import it.
package lightcell

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/agent"
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/services"
)

// Agent is a light cell agent: the real agent's ApplyServices over a
// counting Programmer, and a pod that is Running as soon as it is applied.
type Agent struct {
	*agent.Server
	prog *counter
}

// New returns a light agent.
func New() *Agent {
	prog := &counter{}
	return &Agent{Server: agent.New(agent.Config{Services: services.New(prog)}), prog: prog}
}

// Programmed is how many tables the agent has programmed (whole or
// delta) and how many services the last one held.
func (a *Agent) Programmed() (syncs, services int64) {
	return a.prog.syncs.Load(), a.prog.services.Load()
}

// counter is a Programmer that only counts.
type counter struct {
	syncs, services atomic.Int64
}

func (c *counter) Program(_ context.Context, s []services.Service) error {
	c.syncs.Add(1)
	c.services.Store(int64(len(s)))
	return nil
}

// ApplyPod accepts any pod.
func (a *Agent) ApplyPod(_ context.Context, req *cellv1.ApplyPodRequest) (*cellv1.ApplyPodResponse, error) {
	return &cellv1.ApplyPodResponse{Generation: req.GetGeneration()}, nil
}

// WatchStatus reports the pod Running, then nothing until the host goes.
func (a *Agent) WatchStatus(_ *cellv1.WatchStatusRequest, stream cellv1.Cell_WatchStatusServer) error {
	data, err := json.Marshal(corev1.PodStatus{Phase: corev1.PodRunning})
	if err != nil {
		return err
	}
	if err := stream.Send(&cellv1.PodStatusUpdate{StatusJson: data, Seq: 1}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// Logs, Exec, Attach, PortForward and Stats: a light cell runs nothing.

func (a *Agent) Logs(*cellv1.LogsRequest, cellv1.Cell_LogsServer) error { return errNoPod }
func (a *Agent) Exec(cellv1.Cell_ExecServer) error                      { return errNoPod }
func (a *Agent) Attach(cellv1.Cell_AttachServer) error                  { return errNoPod }
func (a *Agent) PortForward(cellv1.Cell_PortForwardServer) error        { return errNoPod }
func (a *Agent) Stats(context.Context, *cellv1.StatsRequest) (*cellv1.StatsResponse, error) {
	return nil, errNoPod
}

var errNoPod = status.Error(codes.Unimplemented, "a light cell runs no containers")

// DeletePod has nothing to stop.
func (a *Agent) DeletePod(context.Context, *cellv1.DeletePodRequest) (*cellv1.DeletePodResponse, error) {
	return &cellv1.DeletePodResponse{}, nil
}

// Serve serves the agent as the cell of b on b.ListenAddress (all
// addresses on the agent port when empty) until ctx ends, keeping its key
// and certificate in identityDir: it waits to be joined, as a real agent
// does (agent.Identity). listening, if set, is called once it accepts
// connections.
func (a *Agent) Serve(ctx context.Context, b *cellapi.Bootstrap, identityDir string, listening func()) error {
	id, err := agent.LoadIdentity(identityDir, b, nil, nil)
	if err != nil {
		return fmt.Errorf("serving light cell %s: %w", b.CellID, err)
	}
	addr := b.ListenAddress
	if addr == "" {
		addr = fmt.Sprintf(":%d", cellapi.Port)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving light cell %s: %w", b.CellID, err)
	}
	if listening != nil {
		listening()
	}
	return agent.Serve(ctx, lis, id, a)
}
