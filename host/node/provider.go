package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// HealthChecker is an optional interface of Pods. Healthy returns an error
// only when the backend cannot run pods for the foreseeable future (a
// plugin in a crash loop, credentials rejected), never while it restarts:
// the node turns NotReady, and after tolerationSeconds Kubernetes evicts
// every pod on it, when Healthy has failed without interruption for
// Config.HealthGrace. It must answer quickly, from memory.
type HealthChecker interface {
	Healthy(ctx context.Context) error
}

// healthTimeout bounds one Healthy call; a call that times out counts as
// a failure (subject to the grace period like any other).
const healthTimeout = 5 * time.Second

// nodeProvider is virtual-kubelet's NodeProvider. Ping gates the node
// lease: a failed Ping stops its renewal and the node goes NotReady about
// a lease duration later (pitfall A4.10), so Ping fails only after the
// backend has been unhealthy for the whole grace period.
type nodeProvider struct {
	health HealthChecker // nil: always healthy
	grace  time.Duration
	log    *slog.Logger
	now    func() time.Time

	mu           sync.Mutex
	failingSince time.Time // zero while healthy
}

func newNodeProvider(pods Pods, grace time.Duration, log *slog.Logger) *nodeProvider {
	p := &nodeProvider{grace: grace, log: log, now: time.Now}
	if h, ok := pods.(HealthChecker); ok {
		p.health = h
	}
	return p
}

// Ping implements node.NodeProvider.
func (p *nodeProvider) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.health == nil {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	err := p.health.Healthy(hctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // shutting down, not unhealthy
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if err == nil {
		if !p.failingSince.IsZero() {
			p.log.Info("cell backend healthy again", "unhealthy_for", now.Sub(p.failingSince).Round(time.Second))
			p.failingSince = time.Time{}
		}
		return nil
	}
	if p.failingSince.IsZero() {
		p.failingSince = now
		p.log.Warn("cell backend unhealthy; the node stays Ready during the grace period", "error", err, "grace", p.grace)
	}
	if failing := now.Sub(p.failingSince); failing >= p.grace {
		return fmt.Errorf("cell backend unhealthy for %s: %w", failing.Round(time.Second), err)
	}
	return nil
}

// NotifyNodeStatus implements node.NodeProvider. The node's status comes
// from the configuration and does not change while kip runs; the periodic
// status update refreshes heartbeats.
func (p *nodeProvider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}
