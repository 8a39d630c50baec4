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

// VolumeDriverReporter is an optional interface of Pods: the CSI drivers
// whose volumes the cells attach now (the plugin's
// GetInfoResponse.VolumeDrivers). The Node's zone labels (ZoneKey) and
// its CSINode follow them: a plugin swapped on SIGHUP may attach others,
// and a driver dropped leaves both. Asked at every status update and
// whenever a NodeChangeNotifier says so; until its first answer the node
// has Config.VolumeDrivers. It must answer quickly.
type VolumeDriverReporter interface {
	VolumeDrivers(ctx context.Context) ([]string, error)
}

// NodeChangeNotifier is an optional interface of Pods, as
// virtual-kubelet's PodNotifier is for pods: Run hands it changed, which
// Pods calls whenever what its reporters (VolumeReporter,
// VolumeDriverReporter, ResourceReporter) answer may have changed: a
// disk attached or detached, the plugin swapped. changed returns at once;
// the node then asks the reporters and sends the status if it changed, so
// that volumesAttached follows an attach without waiting for
// Config.StatusUpdateInterval. Calls while an update is under way make
// one more update, not one each.
type NodeChangeNotifier interface {
	NotifyNodeChanges(changed func())
}

// healthTimeout bounds one Healthy call; a call that times out counts as
// a failure (subject to the grace period like any other).
const healthTimeout = 5 * time.Second

// nodeProvider is virtual-kubelet's NodeProvider. Ping gates the node
// lease: a failed Ping stops its renewal and the node goes NotReady about
// a lease duration later (pitfall A4.10), so Ping fails only after the
// backend has been unhealthy for the whole grace period.
type nodeProvider struct {
	health    HealthChecker        // nil: always healthy
	resources ResourceReporter     // nil: no extended resources
	volumes   VolumeReporter       // nil: no disks
	drivers   VolumeDriverReporter // nil: Config.VolumeDrivers for good
	grace     time.Duration
	log       *slog.Logger
	now       func() time.Time
	// node builds the Node's status; interval is how often the extended
	// resources are asked for.
	node     func(nodeState) *corev1.Node
	interval time.Duration

	// kick asks the status loop to look at the state now (the reporters
	// and Ready) and send it if it changed.
	kick chan struct{}
	// driversChanged, if set, is called when the volume drivers changed
	// (the CSINode is written again).
	driversChanged func()
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
	volDrivers   []string // sorted
	// resend: the next look sends the status even if unchanged (resend).
	resend bool
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
	if d, ok := pods.(VolumeDriverReporter); ok {
		p.drivers = d
	}
	if n, ok := pods.(NodeChangeNotifier); ok {
		n.NotifyNodeChanges(p.poke)
	}
	return p
}

// poke asks the status loop to look at the state now; pokes while it
// looks make one more look.
func (p *nodeProvider) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
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
	p.poke()
}

// NotifyNodeStatus implements node.NodeProvider. The node's status comes
// from the configuration, but for what changes while kip runs
// (nodeState): the extended resources the backend offers, the disks
// attached and in use, the volume drivers (the zone labels), the address
// and the Ready condition (Ping). They are looked at once at the start,
// every interval and whenever something pokes the loop (Ping's verdict
// changed, Pods said its answers changed: NodeChangeNotifier); a state
// other than the last sent is sent. The periodic status update refreshes
// heartbeats.
func (p *nodeProvider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	if p.node == nil {
		return
	}
	go func() {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		sent := p.state()
		p.sendAgain()
		for {
			p.refreshResources(ctx)
			p.refreshVolumes()
			p.refreshDrivers(ctx)
			p.refreshAddressNow()
			p.mu.Lock()
			resend := p.resend
			p.resend = false
			p.mu.Unlock()
			if st := p.state(); resend || !st.equal(sent) {
				cb(p.node(st))
				sent = st
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-p.kick:
			}
		}
	}()
}

// sendAgain has the next look send the status even if unchanged. A
// Node registered by a Create (at start, or again after a deletion)
// carries none of the last-applied annotations virtual-kubelet's
// three-way status patch diffs from, and a patch without them adds
// labels but removes none: the status sent at once records them, so that
// a label dropped later (a volume driver's zone key) is removed.
func (p *nodeProvider) sendAgain() {
	p.mu.Lock()
	p.resend = true
	p.mu.Unlock()
	p.poke()
}

// nodeState is what of the Node's status changes while kip runs.
type nodeState struct {
	extended []corev1.ResourceName
	notReady string
	address  string
	attached []corev1.AttachedVolume
	inUse    []corev1.UniqueVolumeName
	// drivers are the CSI drivers the cells attach, sorted: the zone
	// labels and the CSINode list them.
	drivers []string
}

func (p *nodeProvider) state() nodeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nodeState{extended: slices.Clone(p.extended), notReady: p.notReady, address: p.address,
		attached: slices.Clone(p.attached), inUse: slices.Clone(p.inUse), drivers: slices.Clone(p.volDrivers)}
}

// equal reports whether s and o make the same Node status.
func (s nodeState) equal(o nodeState) bool {
	return slices.Equal(s.extended, o.extended) && s.notReady == o.notReady && s.address == o.address &&
		slices.Equal(s.attached, o.attached) && slices.Equal(s.inUse, o.inUse) && slices.Equal(s.drivers, o.drivers)
}

// refreshDrivers asks for the volume drivers; when they changed, the
// CSINode is written again (driversChanged).
func (p *nodeProvider) refreshDrivers(ctx context.Context) {
	if p.drivers == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, healthTimeout)
	got, err := p.drivers.VolumeDrivers(rctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("asking the cell backend which volume drivers it attaches", "error", err)
		}
		return
	}
	got = slices.Sorted(slices.Values(got))
	p.mu.Lock()
	old := p.volDrivers
	changed := !slices.Equal(got, old)
	p.volDrivers = got
	p.mu.Unlock()
	if !changed {
		return
	}
	p.log.Info("the volume drivers changed; the zone labels and the CSINode follow", "drivers", got, "before", old)
	if p.driversChanged != nil {
		p.driversChanged()
	}
}

// refreshAddressNow looks at the node's address again.
func (p *nodeProvider) refreshAddressNow() {
	if p.refreshAddress == nil {
		return
	}
	addr := p.refreshAddress()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.address = addr
}

// refreshVolumes asks for the disks attached and in use.
func (p *nodeProvider) refreshVolumes() {
	if p.volumes == nil {
		return
	}
	attached, inUse := p.volumes.Volumes()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attached, p.inUse = attached, inUse
}

// refreshResources asks for the extended resources.
func (p *nodeProvider) refreshResources(ctx context.Context) {
	if p.resources == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, healthTimeout)
	got, err := p.resources.ExtendedResources(rctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("asking the cell backend which extended resources it offers", "error", err)
		}
		return
	}
	slices.Sort(got)
	p.mu.Lock()
	changed := !slices.Equal(got, p.extended)
	p.extended = got
	p.mu.Unlock()
	if changed {
		p.log.Info("the node offers extended resources", "resources", got)
	}
}
