package cells

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/dispatch"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/pluginapi"
)

// Identity issues cell identities; host/pki's CA implements it.
type Identity interface {
	Bootstrap(cellID, clusterID, nodeName, podUID string) (*cellapi.Bootstrap, error)
	ClientTLSConfig(cellID string) (*tls.Config, error)
}

// Config tunes the Manager. Its fields with a koanf tag are the cells
// section of kip.yaml (config.go: DefaultConfig, Validate); the daemon
// sets the others, and tests shorten the intervals.
type Config struct {
	ClusterID string `koanf:"-"`
	NodeName  string `koanf:"-"`
	// Match tunes pod-to-instance matching (host/match).
	Match match.Config `koanf:"-"`
	// UnavailableTTL is how long an offering that ran out of capacity is
	// skipped; default match.DefaultUnavailableTTL (3 minutes).
	UnavailableTTL time.Duration `koanf:"unavailableTTL"`
	// CatalogTTL is how long the plugin's catalog is used before it is
	// fetched again; default 10 minutes.
	CatalogTTL time.Duration `koanf:"catalogTTL"`
	// RematchInterval is how often a pod nothing fits is matched again
	// (also whenever it changes); default 1 minute.
	RematchInterval time.Duration `koanf:"rematchInterval"`
	// RefusedRetry is the least wait after the plugin refuses a launch
	// (quota, bad request) before ranking again; default 30 s.
	RefusedRetry time.Duration `koanf:"-"`
	// Image is the cell image passed to Launch (plugin-specific; empty
	// means the plugin's default).
	Image string `koanf:"image"`
	// InsecureRegistries are registry hosts (host:port) cells pull from
	// over plain HTTP (loopback hosts always are); the daemon adds them to
	// every cell's bootstrap.
	InsecureRegistries []string `koanf:"insecureRegistries"`
	// BootPoll is the longest wait between two looks at a booting
	// instance; default 2 s.
	BootPoll time.Duration `koanf:"-"`
	// BootPollWatched replaces BootPoll while the plugin's event stream is
	// up: its running event ends the wait, so the looks are a safety net
	// and cost cloud API calls; default 10 s.
	BootPollWatched time.Duration `koanf:"-"`
	// BootTimeout bounds launch-to-agent-reachable; default 10 minutes.
	BootTimeout time.Duration `koanf:"-"`
	// GCInterval is how often cells of vanished pods and unknown instances
	// are looked for; default 30 s.
	GCInterval time.Duration `koanf:"-"`
	// Backoff returns the wait before retry n (n ≥ 1) of a transient
	// failure; default 250 ms doubling to 30 s.
	Backoff func(n int) time.Duration `koanf:"-"`
	// Now is the clock; default time.Now.
	Now func() time.Time `koanf:"-"`
}

func (c *Config) defaults() {
	if c.BootTimeout == 0 {
		c.BootTimeout = 10 * time.Minute
	}
	if c.BootPoll == 0 {
		c.BootPoll = 2 * time.Second
	}
	if c.BootPollWatched == 0 {
		c.BootPollWatched = 10 * time.Second
	}
	if c.UnavailableTTL == 0 {
		c.UnavailableTTL = match.DefaultUnavailableTTL
	}
	if c.CatalogTTL == 0 {
		c.CatalogTTL = 10 * time.Minute
	}
	if c.RematchInterval == 0 {
		c.RematchInterval = time.Minute
	}
	if c.RefusedRetry == 0 {
		c.RefusedRetry = 30 * time.Second
	}
	if c.GCInterval == 0 {
		c.GCInterval = 30 * time.Second
	}
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration {
			d := 250 * time.Millisecond << min(n-1, 7)
			return min(d, 30*time.Second)
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Manager is the cell lifecycle for one virtual node.
type Manager struct {
	cfg      Config
	plugin   pluginapi.Client
	identity Identity
	source   dispatch.Source
	recorder record.EventRecorder
	pods     corev1listers.PodLister
	log      *slog.Logger
	// dial connects to a cell's agent; tests replace it.
	dial func(cellID, address string, tlsConfig *tls.Config) (*dispatch.Agent, error)

	mu     sync.Mutex
	cells  map[types.UID]*cell
	byName map[string]types.UID
	notify func(*corev1.Pod)
	ctx    context.Context // the Manager's lifetime, set by Run

	unavailable   *match.Unavailable    // offerings that recently ran out of capacity
	registryCreds map[string]cachedCred // cloud registry credentials by registry host
	catMu         sync.Mutex            // guards cat, catAt and caps; held while fetching
	cat           *match.Catalog
	catAt         time.Time
	caps          []pluginapi.Capability // the plugin's, read with the catalog

	changed chan types.UID // statuses to push, coalesced by notifyLoop

	watching atomic.Bool // the plugin's event stream is up (watchEvents)
}

// New builds a Manager. pods lists the pods bound to the node (the pod
// controller's informer); recorder posts events on pods.
func New(cfg Config, plugin pluginapi.Client, identity Identity, source dispatch.Source,
	pods corev1listers.PodLister, recorder record.EventRecorder, log *slog.Logger,
) *Manager {
	cfg.defaults()
	return &Manager{
		cfg: cfg, plugin: plugin, identity: identity, source: source, pods: pods, recorder: recorder,
		log: log, dial: dispatch.Dial,
		cells: map[types.UID]*cell{}, byName: map[string]types.UID{},
		unavailable: match.NewUnavailable(cfg.UnavailableTTL, cfg.Now), registryCreds: map[string]cachedCred{},
		changed: make(chan types.UID, 1024),
		ctx:     context.Background(),
	}
}

// Run adopts the cells that survive from an earlier run, then pushes
// status changes and collects garbage until ctx ends. Call it before the
// pod controller starts, and wait for Adopted.
func (m *Manager) Run(ctx context.Context, adopted chan<- struct{}) error {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	if err := m.adopt(ctx); err != nil {
		m.log.Warn("adopting existing cells failed; the garbage collector will retry", "error", err)
	}
	if adopted != nil {
		close(adopted)
	}
	go m.notifyLoop(ctx)
	go m.watchEvents(ctx)
	tick := time.NewTicker(m.cfg.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			m.collectGarbage(ctx)
		}
	}
}

// Healthy reports whether the cloud plugin answers.
func (m *Manager) Healthy(ctx context.Context) error {
	_, err := m.plugin.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	return err
}

func key(namespace, name string) string { return namespace + "/" + name }

// CellID is the cell of pod UID uid: stable, a DNS label, at most 40
// characters.
func CellID(uid types.UID) string { return cellIDPrefix + string(uid) }

// cellIDPrefix starts every cell ID; the rest is the pod UID.
const cellIDPrefix = "kip-"

// CreatePod records the pod and starts its cell. Idempotent on the UID.
func (m *Manager) CreatePod(_ context.Context, pod *corev1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cells[pod.UID]; ok {
		c.setDesired(pod)
		return nil
	}
	c := newCell(m, pod)
	m.cells[pod.UID] = c
	m.byName[key(pod.Namespace, pod.Name)] = pod.UID
	c.log.Info("pod bound to the node")
	c.start(m.ctx)
	return nil
}

// UpdatePod records a new desired pod; a running cell gets it re-applied.
func (m *Manager) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	m.mu.Lock()
	c, ok := m.cells[pod.UID]
	m.mu.Unlock()
	if !ok {
		return m.CreatePod(ctx, pod)
	}
	c.setDesired(pod)
	return nil
}

// DeletePod starts terminating the pod's cell within its grace period.
// Idempotent; unknown pods are NotFound, as virtual-kubelet expects.
func (m *Manager) DeletePod(_ context.Context, pod *corev1.Pod) error {
	m.mu.Lock()
	c, ok := m.cells[pod.UID]
	m.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s (%s) has no cell", pod.Namespace, pod.Name, pod.UID)
	}
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	c.delete(grace, "pod deleted")
	return nil
}

// GetPod returns the pod with its current status.
func (m *Manager) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	c := m.byKey(namespace, name)
	if c == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return c.podWithStatus(), nil
}

// GetPodStatus returns the pod's current status.
func (m *Manager) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := m.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the Manager knows.
func (m *Manager) GetPods(context.Context) ([]*corev1.Pod, error) {
	m.mu.Lock()
	cells := make([]*cell, 0, len(m.cells))
	for _, c := range m.cells {
		cells = append(cells, c)
	}
	m.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(cells))
	for _, c := range cells {
		out = append(out, c.podWithStatus())
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's status callback.
func (m *Manager) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = cb
}

func (m *Manager) byKey(namespace, name string) *cell {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.byName[key(namespace, name)]
	if !ok {
		return nil
	}
	return m.cells[uid]
}

func (m *Manager) forget(c *cell) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cells[c.uid] == c {
		delete(m.cells, c.uid)
	}
	if m.byName[c.key] == c.uid {
		delete(m.byName, c.key)
	}
}

// statusChanged queues c's status for virtual-kubelet.
func (m *Manager) statusChanged(c *cell) {
	select {
	case m.changed <- c.uid:
	default:
		// Queue full: the loop is behind; it will catch up and the
		// latest status is what it sends anyway.
		go func() { m.changed <- c.uid }()
	}
}

// notifyLoop pushes statuses to virtual-kubelet, one at a time (its
// callback may block for seconds), coalescing repeats of a pod.
func (m *Manager) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case uid := <-m.changed:
			pending := map[types.UID]bool{uid: true}
		drain:
			for {
				select {
				case more := <-m.changed:
					pending[more] = true
				default:
					break drain
				}
			}
			for uid := range pending {
				m.mu.Lock()
				c, cb := m.cells[uid], m.notify
				m.mu.Unlock()
				if c != nil && cb != nil {
					cb(c.podWithStatus())
				}
			}
		}
	}
}

// adopt finds this node's instances left by an earlier run: those whose
// pod still exists get their cell back (reconnected, not relaunched); the
// rest are terminated.
func (m *Manager) adopt(ctx context.Context) error {
	list, err := m.plugin.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	pods, err := m.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	byUID := map[string]*corev1.Pod{}
	for _, p := range pods {
		byUID[string(p.UID)] = p
	}
	for i := range list.Instances {
		inst := list.Instances[i]
		if inst.Tags[pluginapi.TagNode] != m.cfg.NodeName || inst.State == pluginapi.StateTerminated {
			continue
		}
		pod := byUID[inst.Tags[pluginapi.TagPodUID]]
		if pod == nil || pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) || CellID(pod.UID) != inst.CellID {
			m.log.Info("terminating an instance no pod needs", "instance", inst.ID, "cell", inst.CellID)
			go m.terminateInstance(ctx, inst.ID, inst.CellID)
			continue
		}
		m.mu.Lock()
		if _, ok := m.cells[pod.UID]; !ok {
			c := newCell(m, pod)
			c.adopted = &inst
			m.cells[pod.UID] = c
			m.byName[key(pod.Namespace, pod.Name)] = pod.UID
			m.log.Info("adopting running cell", "pod", key(pod.Namespace, pod.Name), "cell", c.id, "instance", inst.ID)
			c.start(ctx)
		}
		m.mu.Unlock()
	}
	return nil
}

// collectGarbage terminates cells whose pod is gone (virtual-kubelet
// force-deletes pods that never ran without calling DeletePod) and
// instances of this node that no cell owns.
func (m *Manager) collectGarbage(ctx context.Context) {
	m.mu.Lock()
	cells := make([]*cell, 0, len(m.cells))
	for _, c := range m.cells {
		cells = append(cells, c)
	}
	m.mu.Unlock()
	for _, c := range cells {
		pod, err := m.pods.Pods(c.namespace).Get(c.name)
		if (err == nil && pod.UID != c.uid) || isNotFound(err) {
			c.delete(0, "pod no longer exists")
		}
	}
	list, err := m.plugin.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		m.log.Warn("listing instances for garbage collection", "error", err)
		return
	}
	m.mu.Lock()
	known := map[string]bool{}
	for _, c := range m.cells {
		known[c.id] = true
	}
	m.mu.Unlock()
	for _, inst := range list.Instances {
		// An instance already on its way out (terminating) needs no
		// second TerminateInstances.
		if inst.Tags[pluginapi.TagNode] != m.cfg.NodeName || known[inst.CellID] ||
			inst.State == pluginapi.StateTerminated || inst.State == pluginapi.StateTerminating {
			continue
		}
		m.log.Info("terminating orphaned instance", "instance", inst.ID, "cell", inst.CellID)
		go m.terminateInstance(ctx, inst.ID, inst.CellID)
	}
}

// terminateInstance ends an instance, retrying transient failures, until
// it is gone or terminating.
func (m *Manager) terminateInstance(ctx context.Context, id, cellID string) {
	for n := 1; ; n++ {
		_, err := m.plugin.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
		if err == nil || pluginapi.IsNotFound(err) {
			return
		}
		m.log.Warn("terminating instance", "instance", id, "cell", cellID, "attempt", n, "error", err)
		if !sleep(ctx, m.cfg.Backoff(n)) {
			return
		}
	}
}

func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

var errDeleted = errors.New("cell deleted")
