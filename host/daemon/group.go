package daemon

import (
	"context"
	"log/slog"
	"time"
)

// group runs kip's components, each until the group's context ends, as
// one: the first component to return ends them all (its error is the
// group's), and a group that drains waits, at most drainTimeout, for every
// component to return, so that a leader releases its Lease only after its
// components' last action (election.go).
type group struct {
	ctx     context.Context
	cancel  context.CancelFunc
	results chan result
	running int
	first   *result
	log     *slog.Logger
	// drainTimeout bounds Wait's drain (drainTimeout; tests shorten it).
	drainTimeout time.Duration
}

// result is how a component of a group returned.
type result struct {
	name string
	err  error
}

// newGroup returns a group whose components run until ctx ends or one of
// them returns.
func newGroup(ctx context.Context, log *slog.Logger) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel, results: make(chan result, 16), log: log, drainTimeout: drainTimeout}
}

// Go runs the component name: run blocks until its context ends. Its
// return ends the group.
func (g *group) Go(name string, run func(context.Context) error) {
	g.running++
	go func() {
		err := run(g.ctx)
		g.results <- result{name: name, err: err}
	}()
}

// Background runs the component name, whose return, logged if it failed,
// does not end the group (the ClusterIP table: its cells keep the last
// table they had).
func (g *group) Background(name string, run func(context.Context) error) {
	g.Go(name, func(ctx context.Context) error {
		if err := run(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("component stopped", "component", name, "error", err)
		}
		<-ctx.Done()
		return nil
	})
}

// Ready waits until ready closes, for the next components to start after
// it: false when the group's context ended or a component returned first
// (then Wait says why).
func (g *group) Ready(ready <-chan struct{}) bool {
	select {
	case <-ready:
		return true
	case <-g.ctx.Done():
		return false
	case r := <-g.results:
		g.running--
		g.first = &r
		return false
	}
}

// Wait waits for the first component to return (or the group's context
// to end), stops the others, and returns that component's error; with
// drain, it returns only once every component has returned, or after
// drainTimeout.
func (g *group) Wait(drain bool) error {
	if g.first == nil {
		select {
		case r := <-g.results:
			g.running--
			g.first = &r
		case <-g.ctx.Done():
		}
	}
	g.cancel()
	if drain {
		g.drain()
	}
	if g.first == nil {
		return nil
	}
	return g.first.err
}

// drain waits for the components still running, at most drainTimeout.
func (g *group) drain() {
	timeout := time.After(g.drainTimeout)
	for ; g.running > 0; g.running-- {
		select {
		case r := <-g.results:
			if r.err != nil {
				g.log.Warn("stopping", "component", r.name, "error", r.err)
			}
		case <-timeout:
			g.log.Warn("stopping: components still running; releasing the lease anyway", "running", g.running, "waited", g.drainTimeout)
			return
		}
	}
}
