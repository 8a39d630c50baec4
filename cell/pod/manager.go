package pod

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/nfs"
	"github.com/kipcell/kip/cell/runtime"
)

// Backoff is the restart and image-pull back-off.
type Backoff struct {
	// Initial is the first delay (kubelet: 10s); it doubles up to Max.
	Initial time.Duration
	// Max caps the delay (kubelet: 5m).
	Max time.Duration
	// Reset: a run that lasted this long resets the delay (kubelet: 10m).
	Reset time.Duration
}

// DefaultBackoff is the kubelet's.
var DefaultBackoff = Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute, Reset: 10 * time.Minute}

// Config is what a Manager needs.
type Config struct {
	Runtime runtime.Runtime
	Logs    *logs.Store
	// PodIP is the pod's address when it shares the cell's network
	// namespace (it has no address of its own, Desired.PodAddress, or asks
	// for hostNetwork): the cell's; HostIP the address the pod reports as
	// its host's, the cell's too.
	PodIP, HostIP string
	// NetNSPath is the cell's network namespace, which the containers of a
	// pod that shares it join.
	NetNSPath string
	// Network, when set, gives the pod its network before its first
	// container starts, and again when a restarted agent resumes it (so it
	// must be idempotent): called with the pod's own address (a pod with
	// Desired.PodAddress and without hostNetwork), it makes the pod a
	// namespace of its own with it and returns its path; called with "",
	// it readies the cell's own (NetNSPath) for the pod and returns that.
	// While it fails the manager retries, with a FailedCreatePodSandBox
	// event, as the kubelet retries a sandbox. Nil: every pod joins
	// NetNSPath, at the cell's address, and a pod sent with an address of
	// its own is refused (ErrNoPodNetwork).
	Network func(ctx context.Context, address string) (nsPath string, err error)
	// VolumesDir holds the pod's volumes (emptyDir, configMap, secret,
	// downwardAPI, projected), a directory per volume; it is removed on
	// Delete. Empty: only hostPath volumes work.
	VolumesDir string
	// DiskWait is how long the pod's start waits for the device of each
	// disk the host attached (Desired.Disks) to appear; zero:
	// DefaultDiskWait. A disk still missing then keeps the containers
	// from starting (CreateContainerConfigError) and is looked for again
	// at their retries.
	DiskWait time.Duration
	// DiskPathRoot, set, stands in for the instance's root where udev
	// makes the disks' device links: a disk's Path (/dev/disk/azure/
	// scsi1/lun0) is looked up as DiskPathRoot/dev/disk/azure/scsi1/lun0,
	// and only there, its symlinks followed (to /dev/loopN). It is what
	// the cloud simulators' cells use (test/cloudsim/simcells/localcells):
	// they share one machine's /dev, where two instances' disks may have
	// the same path, and where the machine's own disk may have it too
	// (a test run on that cloud), which must never be taken for the
	// pod's. Empty, on a real instance: Path as it is.
	DiskPathRoot string
	// NFS mounts the pod's NFS shares (its inline nfs volumes and
	// Desired.Shares); nil: none can be mounted, and such a volume keeps
	// the containers waiting with CreateContainerConfigError.
	NFS *nfs.Mounter
	// EtcDir holds the pod's hosts, hostname and resolv.conf files, which
	// every container gets at /etc (etcfiles.go); it is removed on Delete.
	// Empty: the containers keep their image's files.
	EtcDir string
	// TerminationDir holds the containers' termination message files
	// (terminationMessagePath); it is removed on Delete. Empty: no
	// termination messages.
	TerminationDir string
	// ResolvConf is the cell's own resolver configuration, which dnsPolicy
	// Default starts from (a kubelet's --resolv-conf). Empty: none, and
	// such a pod gets the local resolver (127.0.0.1), as on a kubelet with
	// --resolv-conf="".
	ResolvConf string
	// StatePath is the file where the manager keeps what a restarted
	// agent needs to resume the pod (Restore); empty: nothing is kept.
	StatePath string
	// HostsFile is the cell's own hosts file, which a hostNetwork pod's
	// /etc/hosts starts from; empty means /etc/hosts.
	HostsFile string
	// NoTmpfs is why a tmpfs the agent mounts would not be seen by the
	// container runtime (runtime.MountsShared), nil when it would. Then
	// secret and projected volumes and emptyDirs of medium Memory are
	// directories on disk, which the containers do see, and the pod gets
	// a Warning event (ReasonVolumeOnDisk) for each, saying why.
	NoTmpfs error
	// MakePodCgroup, when set, makes the pod's cgroup, which bounds the
	// pod as a whole, before its first container starts, and again when
	// a restarted agent resumes it (so it must be idempotent): called with
	// the pod's memory limit as the kubelet's pod cgroup has it
	// (podMemoryLimit), 0 when some container has none. An error is
	// logged; the pod runs on.
	MakePodCgroup func(memoryLimit int64) error
	// MemoryCapacity is the cell's memory, against which a Burstable
	// container's request sets its OOM score adjustment (the kubelet's
	// node capacity); zero: unknown, and the runtime's adjustment.
	MemoryCapacity int64
	Backoff        Backoff
	Logger         *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// EnvVar is one resolved environment variable.
type EnvVar struct{ Name, Value string }

// Desired is one ApplyPod: the pod and what the host resolved for it.
type Desired struct {
	Generation int64
	Pod        *corev1.Pod
	// Env is the resolved environment per container name; a container
	// missing here gets the literal values of its spec.
	Env map[string][]EnvVar
	// Volumes are the files of configMap, secret, downwardAPI and projected
	// volumes, by volume name.
	Volumes     map[string]VolumeFiles
	Credentials []runtime.Credential
	// DNS are the node's DNS settings, for the pod's /etc files.
	DNS ClusterDNS
	// PodAddress is the pod's own address, routed to the cell by its
	// cloud, which the host sends with the pod; empty: the pod shares the
	// cell's network and address (Config.PodIP). A manager without
	// Config.Network refuses it (ErrNoPodNetwork).
	PodAddress string
	// SeccompDefault gives a container that names no seccomp profile (nor
	// its pod) the runtime's default one, as the kubelet's seccompDefault:
	// the node's setting (kip's cells.seccompDefault), sent by the host.
	SeccompDefault bool
	// LogRotation is how the containers' logs are rotated, the node's
	// (kip's cells.containerLogMaxSize and containerLogMaxFiles); zero:
	// the store's own (logs.DefaultRotation, the kubelet's).
	LogRotation logs.Rotation
	// Disks are the disks the host attached for the pod's
	// persistentVolumeClaim and ephemeral volumes, by volume name
	// (disks.go).
	Disks map[string]Disk
	// Shares are the NFS shares the host resolved for the pod's claims,
	// by volume name (shares.go); inline nfs volumes are read from Pod.
	Shares map[string]Share
}

// ownAddress is the address of d's pod's own network namespace, or ""
// when the pod shares the cell's: it has none, or asks for hostNetwork.
func ownAddress(d *Desired) string {
	if d == nil || d.Pod == nil || d.Pod.Spec.HostNetwork {
		return ""
	}
	return d.PodAddress
}

// Errors of Apply.
var (
	ErrDeleted     = errors.New("pod is deleted")
	ErrAnotherPod  = errors.New("cell already runs another pod")
	ErrNoContainer = errors.New("no such container")
	// ErrNoPodNetwork refuses a pod sent with an address of its own
	// (Desired.PodAddress) to a manager that can give no pod a network
	// namespace of its own (Config.Network nil: a light cell's). The
	// host resolved the pod's downward API (status.podIP) for that
	// address; it sends the pod again without one, resolved for the
	// cell's, the address the pod will have.
	ErrNoPodNetwork = errors.New("this cell gives no pod a network namespace of its own")
)

// checkAddress refuses d when its pod comes with an address of its own
// that the manager cannot give it (ErrNoPodNetwork).
func (m *Manager) checkAddress(d *Desired) error {
	if d.PodAddress != "" && m.cfg.Network == nil {
		return fmt.Errorf("pod %s with address %s: %w", d.Pod.Name, d.PodAddress, ErrNoPodNetwork)
	}
	return nil
}

// Manager runs one pod.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	now  func() time.Time
	vols *volumes
	// imgVols are the pulls and mounts of the pod's image volumes.
	imgVols imageVolumes
	etc     *etcFiles
	// probeUnit is a probe's second (its delays and periods); tests
	// shorten it.
	probeUnit time.Duration

	mu        sync.Mutex
	desired   *Desired
	netns     string // the pod's own network namespace, once made (Config.Network)
	started   bool
	deleting  bool
	deleted   bool
	grace     time.Duration
	cancel    context.CancelFunc
	workers   sync.WaitGroup
	specCh    chan struct{} // closed and replaced when the desired pod changes
	startTime *metav1.Time
	inits     []*containerState
	apps      []*containerState
	// ephems are the ephemeral containers, in the order they came
	// (ephemeral.go).
	ephems []*containerState
	// runCtx is the pod's life's context (startWorkersLocked), which the
	// ephemeral containers run under; nil before.
	runCtx context.Context
	// sandboxUp is closed once the pod's network, volumes and disks are
	// there, before which no ephemeral container starts.
	sandboxUp chan struct{}
	initDone  bool
	initFail  bool
	// deadline is set once activeDeadlineSeconds passed: the pod is
	// Failed with reason DeadlineExceeded and its containers are stopped.
	deadline bool
	// evicted is the message of the pod's eviction (Evict): the pod is
	// Failed with reason Evicted and its containers are stopped.
	evicted string
	// networkUp is set once the pod's network is there (setupNetwork,
	// or an earlier agent's, Restore): its podIP is reported from then
	// on.
	networkUp bool

	// events wait here for the host (see Events).
	events eventLog

	// desiredJSON is the saved form of desired, savedJSON the state last
	// written to Config.StatePath (state.go).
	desiredJSON []byte
	savedJSON   []byte

	// Published status.
	status     corev1.PodStatus
	statusJSON []byte
	seq        uint64
	changed    chan struct{} // closed and replaced on every published change
}

// New returns a Manager; nothing runs until the first Apply.
func New(cfg Config) *Manager {
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DiskWait <= 0 {
		cfg.DiskWait = DefaultDiskWait
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, now: now, specCh: make(chan struct{}), changed: make(chan struct{}), sandboxUp: make(chan struct{}), probeUnit: time.Second,
		vols: newVolumes(cfg.VolumesDir, cfg.NoTmpfs, cfg.DiskPathRoot, cfg.NFS, cfg.Logger),
		etc:  newEtcFiles(etcConfig{dir: cfg.EtcDir, resolvConf: cfg.ResolvConf, hostsFile: cfg.HostsFile, podIP: cfg.PodIP}, cfg.Logger)}
	m.publishLocked()
	return m
}

// Apply hands the manager a desired pod. It returns the generation the
// manager now works towards: d.Generation, or a higher one it already has
// (then d is ignored).
func (m *Manager) Apply(ctx context.Context, d Desired) (int64, error) {
	if d.Pod == nil {
		return 0, errors.New("applying pod: no pod")
	}
	if err := m.checkAddress(&d); err != nil {
		return 0, fmt.Errorf("applying pod: %w", err)
	}
	gen, accepted, err := m.accept(ctx, d)
	if err != nil || accepted == nil {
		return gen, err
	}
	// Volume files of the new generation are swapped in while the
	// containers run, as the kubelet does for configMaps and secrets; so
	// are the /etc files.
	m.syncVolumes(ctx, accepted)
	m.syncEtc(ctx, accepted)
	return gen, nil
}

// syncVolumes sets up the volumes of d and tells of those on disk that
// are meant for memory.
func (m *Manager) syncVolumes(ctx context.Context, d *Desired) {
	for _, msg := range m.vols.sync(ctx, d) {
		m.emit(EventWarning, ReasonVolumeOnDisk, "", "%s", msg)
	}
}

// syncEtc writes the pod's /etc files of d and records the DNS warnings
// as the kubelet does.
func (m *Manager) syncEtc(ctx context.Context, d *Desired) {
	for _, w := range m.etc.sync(ctx, d) {
		m.emit(EventWarning, w.Reason, "", "%s", w.Message)
	}
}

// accept makes d the desired pod if it is newer and starts the pod on the
// first one. It returns the generation worked towards and, when d was
// taken, the stored copy.
func (m *Manager) accept(ctx context.Context, d Desired) (int64, *Desired, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleting {
		return 0, nil, fmt.Errorf("applying pod %s: %w", d.Pod.Name, ErrDeleted)
	}
	if m.desired != nil {
		if m.desired.Pod.UID != d.Pod.UID {
			return 0, nil, fmt.Errorf("applying pod %s (uid %s) over %s: %w", d.Pod.Name, d.Pod.UID, m.desired.Pod.UID, ErrAnotherPod)
		}
		if d.Generation <= m.desired.Generation {
			return m.desired.Generation, nil, nil
		}
	}
	dd := d
	m.setDesiredLocked(&dd)
	close(m.specCh)
	m.specCh = make(chan struct{})
	if !m.started {
		m.beginLocked(&dd)
		for _, w := range securityWarnings(d.Pod) {
			m.emitLocked(EventWarning, ReasonSecurityNotHonoured, "", "%s", w)
		}
		for _, w := range hostPortWarnings(d.Pod, ownAddress(&dd) != "") {
			m.emitLocked(EventWarning, ReasonHostPortNotMapped, "", "%s", w)
		}
		t := metav1.NewTime(m.now())
		m.startTime = &t
		m.startWorkersLocked(ctx)
	}
	if !m.deadline && m.evicted == "" {
		m.startEphemeralsLocked(&dd)
	}
	m.publishLocked()
	m.saveLocked()
	return d.Generation, &dd, nil
}

// beginLocked marks the pod started and makes the state of its
// containers.
func (m *Manager) beginLocked(d *Desired) {
	m.started = true
	// Set once, before any worker reads it.
	m.log = m.cfg.Logger.With("pod", d.Pod.Namespace+"/"+d.Pod.Name)
	for _, c := range d.Pod.Spec.InitContainers {
		cs := newContainerState(c.Name, c.Image, true, false)
		cs.sidecar = c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		m.inits = append(m.inits, cs)
	}
	for _, c := range d.Pod.Spec.Containers {
		m.apps = append(m.apps, newContainerState(c.Name, c.Image, false, len(d.Pod.Spec.InitContainers) > 0))
	}
}

// startWorkersLocked starts the pod's life (run) and its deadline.
func (m *Manager) startWorkersLocked(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel, m.runCtx = cancel, runCtx
	m.workers.Add(2)
	go func() {
		defer m.workers.Done()
		m.run(runCtx)
	}()
	go func() {
		defer m.workers.Done()
		m.watchDeadline(runCtx)
	}()
}

// Delete stops the pod's containers, giving each grace between its stop
// signal and SIGKILL (nil: the pod's terminationGracePeriodSeconds), and
// removes everything from the runtime. It returns once all is gone.
func (m *Manager) Delete(ctx context.Context, grace *time.Duration) error {
	m.mu.Lock()
	if !m.deleting {
		m.deleting = true
		m.grace = 30 * time.Second
		if grace != nil {
			m.grace = max(*grace, 0)
		} else if m.desired != nil && m.desired.Pod.Spec.TerminationGracePeriodSeconds != nil {
			m.grace = time.Duration(*m.desired.Pod.Spec.TerminationGracePeriodSeconds) * time.Second
		}
		if m.cancel != nil {
			m.cancel()
		}
		// An agent that dies while the pod is being deleted must not have
		// the next one resume it: without state it cleans up.
		if err := m.removeStateLocked(); err != nil {
			m.log.WarnContext(ctx, "removing the state file at deletion", "error", err)
		}
	}
	grace2, log := m.grace, m.log
	m.mu.Unlock()
	log.InfoContext(ctx, "deleting pod", "grace", grace2)

	done := make(chan struct{})
	go func() { m.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("deleting pod: %w", ctx.Err())
	}
	if err := m.releaseImageVolumes(ctx); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	if err := m.cfg.Runtime.Cleanup(ctx); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	// The host detaches the disks once Delete returns: each must be
	// unmounted and free by then.
	if err := m.vols.releaseDisks(ctx); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	if err := m.vols.cleanup(); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	if err := m.etc.cleanup(); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	if m.cfg.TerminationDir != "" {
		if err := os.RemoveAll(m.cfg.TerminationDir); err != nil {
			return fmt.Errorf("deleting pod: removing termination messages: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted = true
	m.publishLocked()
	// A later agent of the cell has nothing to resume.
	if err := m.removeStateLocked(); err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	return nil
}

// Status returns the current status, the generation it reflects, its
// sequence number and a channel closed at the next change.
func (m *Manager) Status() (status []byte, generation int64, seq uint64, changed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gen int64
	if m.desired != nil {
		gen = m.desired.Generation
	}
	return m.statusJSON, gen, m.seq, m.changed
}

// PodUID is the UID of the pod the manager runs: the first Apply's (or
// the restored one's), for good; empty before the first.
func (m *Manager) PodUID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.desired == nil || m.desired.Pod == nil {
		return ""
	}
	return string(m.desired.Pod.UID)
}

// Spec returns the pod the manager runs (the last desired), nil before
// the first Apply; the caller must not change it.
func (m *Manager) Spec() *corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.desired == nil {
		return nil
	}
	return m.desired.Pod
}

// PodStatus returns a copy of the current status.
func (m *Manager) PodStatus() corev1.PodStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return *m.status.DeepCopy()
}

// Task returns the running task of a container.
func (m *Manager) Task(container string) (runtime.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.findLocked(container)
	if cs == nil {
		return nil, fmt.Errorf("container %q: %w", container, ErrNoContainer)
	}
	if cs.task == nil {
		return nil, fmt.Errorf("container %q is not running", container)
	}
	return cs.task, nil
}

// Tasks returns the running tasks by container name.
func (m *Manager) Tasks() map[string]runtime.Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]runtime.Task{}
	for _, cs := range append(m.containersLocked(), m.ephems...) {
		if cs.task != nil {
			out[cs.name] = cs.task
		}
	}
	return out
}

// LogPath returns the log file of a container's latest attempt, or of the
// one before with previous.
func (m *Manager) LogPath(container string, previous bool) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.findLocked(container)
	if cs == nil {
		return "", fmt.Errorf("container %q: %w", container, ErrNoContainer)
	}
	attempt := cs.attempts - 1
	if previous {
		attempt--
	}
	if attempt < 0 {
		if previous {
			return "", fmt.Errorf("previous terminated container %q not found", container)
		}
		return "", fmt.Errorf("container %q has not started yet", container)
	}
	return m.cfg.Logs.Path(container, attempt), nil
}

// DefaultContainer returns the pod's first app container, for requests
// that name none.
func (m *Manager) DefaultContainer() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.apps) == 0 {
		return ""
	}
	return m.apps[0].name
}

func (m *Manager) findLocked(name string) *containerState {
	for _, cs := range append(m.containersLocked(), m.ephems...) {
		if cs.name == name {
			return cs
		}
	}
	return nil
}

// run is the pod's life: init containers in order, then app containers.
func (m *Manager) run(ctx context.Context) {
	m.mu.Lock()
	d := m.desired
	m.mu.Unlock()
	if !m.setupNetwork(ctx, d) {
		return
	}
	if m.cfg.MakePodCgroup != nil {
		if err := m.cfg.MakePodCgroup(podMemoryLimit(d.Pod)); err != nil {
			m.log.WarnContext(ctx, "the pod has no cgroup limit of its own", "error", err)
		}
	}
	m.syncVolumes(ctx, d)
	m.syncEtc(ctx, d)
	// The disks before any container, as the kubelet waits for a pod's
	// volumes to attach and mount before it starts its containers; the
	// containers wait meanwhile (ContainerCreating).
	m.mountDisks(ctx, d, m.cfg.DiskWait, false)
	// Then the image volumes' images, each once; a container that mounts
	// one that failed retries it (runContainer).
	m.pullImageVolumes(ctx, d)
	if ctx.Err() != nil {
		return
	}
	close(m.sandboxUp)
	// Sidecars run until the app containers have ended (or the pod is
	// deleted); then they are stopped, after the app containers, as by
	// the kubelet.
	sidecarCtx, stopSidecars := context.WithCancel(context.WithoutCancel(ctx))
	var sidecars sync.WaitGroup
	defer func() {
		stopSidecars()
		sidecars.Wait()
	}()
	m.mu.Lock()
	failed := m.initFail
	m.mu.Unlock()
	if failed {
		return // resumed (Restore) after an init container failed the pod
	}
	for _, cs := range m.inits {
		if cs.succeeded && !cs.sidecar {
			continue // resumed (Restore) after it completed
		}
		if !cs.sidecar {
			if !m.runContainer(ctx, cs) {
				return
			}
			continue
		}
		sidecars.Add(1)
		go func() {
			defer sidecars.Done()
			m.runContainer(sidecarCtx, cs)
		}()
		// The next init container starts once the sidecar has started
		// (its startup probe, if any, succeeded).
		if !m.waitFor(ctx, func() bool { return cs.status.Started != nil && *cs.status.Started }) {
			return
		}
	}
	m.mu.Lock()
	m.initDone = true
	m.publishLocked()
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, cs := range m.apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.runContainer(ctx, cs)
		}()
	}
	wg.Wait()
}

// waitFor waits until cond, called under the lock, holds or ctx ends; it
// reports whether cond held.
func (m *Manager) waitFor(ctx context.Context, cond func() bool) bool {
	for {
		m.mu.Lock()
		ok, changed := cond(), m.changed
		m.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// Reason and message of a pod past its activeDeadlineSeconds (the
// kubelet's active_deadline.go).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// watchDeadline fails the pod once it has been active longer than its
// activeDeadlineSeconds, counted from its start time; a later generation
// may change the deadline (the API server allows shortening it).
func (m *Manager) watchDeadline(ctx context.Context) {
	for {
		m.mu.Lock()
		secs, start, changed := m.desired.Pod.Spec.ActiveDeadlineSeconds, m.startTime.Time, m.specCh
		m.mu.Unlock()
		var (
			expired <-chan time.Time
			timer   *time.Timer
		)
		if secs != nil {
			timer = time.NewTimer(start.Add(time.Duration(*secs) * time.Second).Sub(m.now()))
			expired = timer.C
		}
		fired := false
		select {
		case <-ctx.Done():
		case <-changed:
		case <-expired:
			fired = true
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if !fired {
			continue
		}
		m.mu.Lock()
		phase := m.status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed || m.deleting || m.evicted != "" {
			m.mu.Unlock()
			return
		}
		m.deadline = true
		m.emitLocked(EventNormal, ReasonDeadlineExceeded, "", "%s", messageDeadlineExceeded)
		m.publishLocked()
		cancel := m.cancel
		m.mu.Unlock()
		m.log.InfoContext(ctx, "pod passed its active deadline; stopping its containers", "active_deadline_seconds", *secs)
		cancel()
		return
	}
}

// update changes a container's status under the lock and publishes.
func (m *Manager) update(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.publishLocked()
}

// publishLocked recomputes the status and tells watchers if it changed.
func (m *Manager) publishLocked() {
	st := m.computeStatusLocked()
	data, err := json.Marshal(st)
	if err != nil {
		m.log.Error("encoding pod status", "error", err)
		return
	}
	if string(data) == string(m.statusJSON) {
		return
	}
	m.status, m.statusJSON = st, data
	m.seq++
	close(m.changed)
	m.changed = make(chan struct{})
	m.saveLocked()
}

// NetNS is the network namespace the pod's containers join: the pod's
// own once Config.Network has made it, else the cell's (Config.NetNSPath).
func (m *Manager) NetNS() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cmp.Or(m.netns, m.cfg.NetNSPath)
}

// podIPLocked is the pod's IP as its status reports it, "" while it has
// none. As the kubelet's (kubelet_pods.go of v1.36): a hostNetwork pod
// has the cell's at once (generateAPIPodStatus gives it the node's); any
// other pod only once its network is up (convertStatusToAPIStatus takes
// the IPs of the pod's sandbox): its own address, or the cell's.
func (m *Manager) podIPLocked() string {
	switch {
	case m.desired == nil:
		return ""
	case m.desired.Pod.Spec.HostNetwork:
		return m.cfg.PodIP
	case !m.networkUp:
		return ""
	}
	return cmp.Or(ownAddress(m.desired), m.cfg.PodIP)
}

// ReasonFailedCreatePodSandBox is the kubelet's Warning event when the
// pod's sandbox, here its network, cannot be made.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// setupNetwork gives the pod of d its network (Config.Network), retrying
// after the restart back-off while that fails; false when ctx ended
// first.
func (m *Manager) setupNetwork(ctx context.Context, d *Desired) bool {
	if m.cfg.Network == nil {
		// The cell's namespace, there all along.
		m.update(func() { m.networkUp = true })
		return true
	}
	var delay time.Duration
	for {
		delay = m.nextDelay(delay)
		path, err := m.cfg.Network(ctx, ownAddress(d))
		if err == nil {
			m.update(func() { m.netns, m.networkUp = path, true })
			return true
		}
		m.log.WarnContext(ctx, "setting up the pod's network", "error", err, "retry_in", delay)
		m.emit(EventWarning, ReasonFailedCreatePodSandBox, "", "Failed to create pod sandbox: %v", err)
		if !sleep(ctx, delay) {
			return false
		}
	}
}
