package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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

// ResourceReporter is an optional interface of Pods: the extended
// resources the cells can offer (the GPU resources, when the plugin's
// catalog has GPU instance types). The Node's capacity lists each
// (Config.Capacity.GPUs), or the scheduler would never place a pod that
// requests one here; it is asked again every status update, so a plugin
// swap or a new catalog shows. It must answer quickly.
type ResourceReporter interface {
	ExtendedResources(ctx context.Context) ([]corev1.ResourceName, error)
}

// VolumeReporter is an optional interface of Pods: the disks attached to
// the node's cells and those their pods use, which the Node's status
// lists (volumesAttached, as the attach-detach controller writes it;
// volumesInUse, as a kubelet does), so that kubectl describe node tells
// the truth. Asked at every status update.
type VolumeReporter interface {
	Volumes() (attached []corev1.AttachedVolume, inUse []corev1.UniqueVolumeName)
}

// healthTimeout bounds one Healthy call; a call that times out counts as
// a failure (subject to the grace period like any other).
const healthTimeout = 5 * time.Second

// nodeProvider is virtual-kubelet's NodeProvider. Ping gates the node
// lease: a failed Ping stops its renewal and the node goes NotReady about
// a lease duration later (pitfall A4.10), so Ping fails only after the
// backend has been unhealthy for the whole grace period.
type nodeProvider struct {
	health    HealthChecker    // nil: always healthy
	resources ResourceReporter // nil: no extended resources
	volumes   VolumeReporter   // nil: no disks
	grace     time.Duration
	log       *slog.Logger
	now       func() time.Time
	// node builds the Node's status; interval is how often the extended
	// resources are asked for.
	node     func(nodeState) *corev1.Node
	interval time.Duration

	// kick asks the status loop to send the status now.
	kick chan struct{}
	// refreshAddress returns the node's current address (picked again
	// when none is configured); nil: it does not change.
	refreshAddress func() string

	mu           sync.Mutex
	failingSince time.Time // zero while healthy
	notReady     string    // why the node is not Ready; "" while it is
	address      string    // the node's InternalIP
	extended     []corev1.ResourceName
	attached     []corev1.AttachedVolume
	inUse        []corev1.UniqueVolumeName
}

func newNodeProvider(pods Pods, grace time.Duration, log *slog.Logger) *nodeProvider {
	p := &nodeProvider{grace: grace, log: log, now: time.Now, kick: make(chan struct{}, 1)}
	if h, ok := pods.(HealthChecker); ok {
		p.health = h
	}
	if r, ok := pods.(ResourceReporter); ok {
		p.resources = r
	}
	if v, ok := pods.(VolumeReporter); ok {
		p.volumes = v
	}
	return p
}

// Ping implements node.NodeProvider. It fails only when ctx has ended: a
// failed Ping stops the Lease's renewal, and kip itself is alive. The cell
// backend's health goes into the Ready condition instead, as a kubelet
// reports a broken container runtime: once Healthy has failed without
// interruption for the grace period, Ready turns False (KubeletNotReady,
// saying why) and the status is sent; it turns True again with the first
// success.
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
		p.setNotReadyLocked("")
		return nil
	}
	if p.failingSince.IsZero() {
		p.failingSince = now
		p.log.Warn("cell backend unhealthy; the node stays Ready during the grace period", "error", err, "grace", p.grace)
	}
	if failing := now.Sub(p.failingSince); failing >= p.grace && p.notReady == "" {
		p.log.Error("cell backend unhealthy for the whole grace period; the node is NotReady", "error", err, "unhealthy_for", failing.Round(time.Second))
		p.setNotReadyLocked(fmt.Sprintf("cell backend unhealthy since %s: %v", p.failingSince.UTC().Format(time.RFC3339), err))
	}
	return nil
}

// setNotReadyLocked records why the node is not ready ("" when it is) and,
// when that changed, asks for the status to be sent.
func (p *nodeProvider) setNotReadyLocked(why string) {
	if why == p.notReady {
		return
	}
	p.notReady = why
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// NotifyNodeStatus implements node.NodeProvider. The node's status comes
// from the configuration, but for the extended resources the backend
// offers (asked for at once and every interval) and the Ready condition
// (Ping): a change of either is sent as a new status. The periodic status
// update refreshes heartbeats.
func (p *nodeProvider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	if p.node == nil {
		return
	}
	go func() {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			changed := p.refreshResources(ctx)
			if p.refreshVolumes() {
				changed = true
			}
			if p.refreshAddressChanged() || changed {
				cb(p.node(p.state()))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-p.kick:
				cb(p.node(p.state()))
			}
		}
	}()
}

// nodeState is what of the Node's status changes while kip runs.
type nodeState struct {
	extended []corev1.ResourceName
	notReady string
	address  string
	attached []corev1.AttachedVolume
	inUse    []corev1.UniqueVolumeName
}

func (p *nodeProvider) state() nodeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nodeState{extended: slices.Clone(p.extended), notReady: p.notReady, address: p.address,
		attached: slices.Clone(p.attached), inUse: slices.Clone(p.inUse)}
}

// refreshAddressChanged looks at the node's address again and reports
// whether it changed.
func (p *nodeProvider) refreshAddressChanged() bool {
	if p.refreshAddress == nil {
		return false
	}
	addr := p.refreshAddress()
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := addr != p.address
	p.address = addr
	return changed
}

// refreshVolumes asks for the disks attached and in use and reports
// whether they changed.
func (p *nodeProvider) refreshVolumes() bool {
	if p.volumes == nil {
		return false
	}
	attached, inUse := p.volumes.Volumes()
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(attached, p.attached) && slices.Equal(inUse, p.inUse) {
		return false
	}
	p.attached, p.inUse = attached, inUse
	return true
}

// refreshResources asks for the extended resources and reports whether
// they changed.
func (p *nodeProvider) refreshResources(ctx context.Context) bool {
	if p.resources == nil {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, healthTimeout)
	got, err := p.resources.ExtendedResources(rctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("asking the cell backend which extended resources it offers", "error", err)
		}
		return false
	}
	slices.Sort(got)
	p.mu.Lock()
	changed := !slices.Equal(got, p.extended)
	p.extended = got
	p.mu.Unlock()
	if changed {
		p.log.Info("the node offers extended resources", "resources", got)
	}
	return changed
}
