package cells

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// virtual-kubelet's context ends with each call; the cell it starts and
// the termination it asks for go on.
func TestCellsOutliveTheContextsOfTheCalls(t *testing.T) {
	h := newHarnessSetup(t, setup{
		wrap: func(p *pluginfake.Provider) pluginapi.Client { return remote{p} },
		// The garbage collector would end a forgotten instance too.
		config: func(c *Config) { c.GCInterval = time.Hour },
	})
	h.start(t)
	pod := newPod("web", "uid-calls")
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.m.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cancel()
	h.waitNotified(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	ctx, cancel = context.WithCancel(t.Context())
	if err := h.m.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cancel()
	eventually(t, "instance terminated and pod forgotten", func() bool {
		_, err := h.m.GetPod(t.Context(), "default", "web")
		return len(h.plugin.Store().Instances()) == 0 && err != nil
	})
}

// remote is the fake plugin answering as one over gRPC does: not at all
// once the call's context has ended.
type remote struct{ pluginapi.Client }

func (r remote) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	return unlessEnded(ctx, req, r.Client.Launch)
}

func (r remote) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	return unlessEnded(ctx, req, r.Client.Describe)
}

func (r remote) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	return unlessEnded(ctx, req, r.Client.List)
}

func (r remote) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	return unlessEnded(ctx, req, r.Client.Terminate)
}

// unlessEnded makes call unless ctx has ended.
func unlessEnded[Req, Resp any](ctx context.Context, req Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	if err := ctx.Err(); err != nil {
		var zero Resp
		return zero, err
	}
	return call(ctx, req)
}

// When Run ends, every cell's goroutine stops, and a cell made afterwards
// stops at once without launching.
func TestRunEndStopsTheCells(t *testing.T) {
	h := newHarnessDeferred(t, pluginfake.WithBootDelay(time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	adopted, ran := make(chan struct{}), make(chan struct{})
	go func() {
		_ = h.m.Run(ctx, adopted)
		close(ran)
	}()
	<-adopted
	booting := newPod("booting", "uid-run-1")
	if err := h.indexer.Add(booting); err != nil {
		t.Fatal(err)
	}
	_ = h.m.CreatePod(t.Context(), booting)
	eventually(t, "the launch", func() bool { return h.plugin.Calls("Launch") == 1 })

	cancel()
	<-ran
	eventually(t, "the booting cell stopped", closed(h.m.cells.get(booting.UID).done))

	late := newPod("late", "uid-run-2")
	_ = h.m.CreatePod(t.Context(), late)
	eventually(t, "the late cell stopped", closed(h.m.cells.get(late.UID).done))
	if n := h.plugin.Calls("Launch"); n != 1 {
		t.Errorf("Launch called %d times, want 1: a cell made after Run ended launched", n)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}
