package cells

import (
	"context"
	"crypto"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// Identity issues cell identities; host/pki's CA implements it. A cell's
// bootstrap carries a join token (for tokenTTL) and no key; the host joins
// the cell's agent (JoinTLSConfig, Join: it signs the certificate of the
// agent's own key) before it talks to it over ClientTLSConfig, and renews
// the agent's certificate (Renew) before it expires, or after, within
// the CA's grace, when the host was away (renew.go).
type Identity interface {
	Bootstrap(cellID, clusterID, nodeName, podUID string, tokenTTL time.Duration) (*cellapi.Bootstrap, error)
	ClientTLSConfig(cellID string) (*tls.Config, error)
	JoinTLSConfig(cellID string) (*tls.Config, error)
	Join(ctx context.Context, cellID string, req cellapi.JoinRequest, check func(context.Context) error) ([]byte, error)
	SawJoined(cellID string, pub crypto.PublicKey)
	Renew(ctx context.Context, cellID string, req cellapi.RenewRequest, check func(context.Context) error) ([]byte, error)
	CertPEM() []byte
}

// Config tunes the Manager. Its fields with a koanf tag are the cells
// section of kip.yaml (config.go: DefaultConfig, Validate); the daemon
// sets the others, and tests shorten the intervals.
type Config struct {
	ClusterID string `koanf:"-"`
	NodeName  string `koanf:"-"`
	// Match tunes pod-to-instance matching (host/match).
	Match match.Config `koanf:"-"`
	// Cluster is what the cells' pods see of the cluster, as on a kubelet:
	// the Services (their environment variables, the kube-dns address)
	// and the DNS settings (the node section's clusterDNS and
	// clusterDomain). The zero Cluster: no Service, no cluster DNS.
	Cluster podrefs.Cluster `koanf:"-"`
	// KeptLogsChanged, when set, is called whenever the kept logs of
	// ended pods (PodLogsDir) change: one kept, removed or pruned (the
	// daemon wakes the standbys' long polls with it, host/keptlogs).
	KeptLogsChanged func() `koanf:"-"`
	// UnavailableTTL is how long an offering that ran out of capacity is
	// skipped; default match.DefaultUnavailableTTL (3 minutes).
	UnavailableTTL time.Duration `koanf:"unavailableTTL"`
	// CatalogTTL is how long the plugin's catalog is used before it is
	// fetched again; default 10 minutes.
	CatalogTTL time.Duration `koanf:"catalogTTL"`
	// DetachTimeout bounds how long a cell's end waits for the pod's
	// disks to detach before it terminates the instance, which detaches
	// them too (docs/volumes.md); default 2 minutes.
	DetachTimeout time.Duration `koanf:"detachTimeout"`
	// Zone is the Kip node's zone (node.zone): every cell is launched in
	// it. Empty: any zone.
	Zone string `koanf:"-"`
	// RematchInterval is how often a pod nothing fits is matched again
	// (also whenever it changes); default 1 minute.
	RematchInterval time.Duration `koanf:"rematchInterval"`
	// VolumeRefreshInterval is how often the configMap, secret and
	// projected volumes of a running pod are resolved again, so that their
	// files follow their objects, as a kubelet's do (its sync period);
	// service account tokens are refreshed on their own schedule (at 80 %
	// of their lifetime, or after 24 hours), and the pod is looked at by
	// then whatever this says. The refreshes take the objects any
	// resolution read within half this interval (podrefs.Cache). Default
	// 1 minute.
	VolumeRefreshInterval time.Duration `koanf:"volumeRefreshInterval"`
	// RefusedRetry is the least wait after the plugin refuses a launch
	// (quota, bad request) before ranking again; default 30 s.
	RefusedRetry time.Duration `koanf:"-"`
	// StatsTimeout bounds how long PodStats waits for one cell's agent; a
	// cell that has not answered by then is left out. Default 5 s.
	StatsTimeout time.Duration `koanf:"-"`
	// WarmPool is the standby cells kept booted for pods that fit them
	// (warmconfig.go, warm.go); none by default.
	WarmPool WarmPoolConfig `koanf:"warmPool"`
	// WarmInterval is how often the warm pool is looked after (refilled,
	// aged standbys replaced) besides whenever a standby is taken or
	// ends; default 10 s.
	WarmInterval time.Duration `koanf:"-"`
	// Image is the cell image passed to Launch (plugin-specific; empty
	// means the plugin's default).
	Image string `koanf:"image"`
	// InsecureRegistries are registry hosts (host:port) cells pull from
	// over plain HTTP (loopback hosts always are); the daemon adds them to
	// every cell's bootstrap.
	InsecureRegistries []string `koanf:"insecureRegistries"`
	// PodLogsDir is where kip keeps the logs of pods that ended, read from
	// their cells before the cells end, until the pods are deleted (a
	// kubelet keeps them on the node). Default
	// $XDG_STATE_HOME/kip/pod-logs ($HOME/.local/state/kip/pod-logs).
	PodLogsDir string `koanf:"podLogsDir"`
	// PodLogsMaxBytes is how much of each container's log is kept once
	// its pod ended: the newest bytes, from a line's start. Default
	// 10 MiB, the kubelet's containerLogMaxSize.
	PodLogsMaxBytes int `koanf:"podLogsMaxBytes"`
	// PodLogsMaxTotalBytes bounds what PodLogsDir holds: past it the
	// oldest logs of the namespace that holds the most are removed (a
	// warning in kip's log names each), even before their pods are
	// deleted, so that one namespace's pods cannot evict the others'.
	// Default 1 GiB.
	PodLogsMaxTotalBytes int `koanf:"podLogsMaxTotalBytes"`
	// ContainerLogMaxBytes is the size past which a cell's agent rotates
	// a container's log file, and ContainerLogMaxFiles how many files it
	// keeps of each run of a container (the current one included): the
	// kubelet's containerLogMaxSize and containerLogMaxFiles, whose
	// defaults are theirs, 10 MiB and 5. A cell holds at most
	// ContainerLogMaxBytes × ContainerLogMaxFiles of a container's run on
	// its disk, twice for the previous run (kubectl logs --previous).
	ContainerLogMaxBytes int `koanf:"containerLogMaxBytes"`
	ContainerLogMaxFiles int `koanf:"containerLogMaxFiles"`
	// AllowPrivileged lets pods run privileged containers
	// (securityContext.privileged: every capability, the cell's devices,
	// no seccomp), as containerd's CRI runs them. Default false: such a pod
	// is rejected, as a kubelet rejects a pod it does not admit (phase
	// Failed, reason PrivilegedForbidden, a Warning event naming the
	// container and this setting).
	AllowPrivileged bool `koanf:"allowPrivileged"`
	// AllowedUnsafeSysctls are the sysctls pods may set beyond the
	// kubelet's safe set, as the kubelet's --allowed-unsafe-sysctls: names
	// or prefixes ending in "*" ("net.core.*", "kernel.msg*"), namespaced
	// ones only (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*).
	// A pod with another one is rejected with reason SysctlForbidden.
	AllowedUnsafeSysctls []string `koanf:"allowedUnsafeSysctls"`
	// AllowHostNetwork lets pods ask for hostNetwork: true, the instance's
	// network namespace: its addresses, routes and firewall, the path to
	// its metadata service, and the agent's port. Default false: such a
	// pod is rejected with reason HostNamespaceForbidden, as Pod Security's
	// baseline level refuses it. (hostPID and hostIPC are always
	// rejected: a cell does not give them.)
	AllowHostNetwork bool `koanf:"allowHostNetwork"`
	// AllowedHostPaths are the instance's directories (absolute, clean
	// paths) that pods may mount as hostPath volumes, each with what is
	// under it; with the local plugin they are this machine's. A pod with
	// another hostPath is rejected with reason HostPathForbidden. Default
	// none, as Pod Security's baseline level. A pod that may write into
	// one may also leave a symbolic link there that a later pod's hostPath
	// follows: allow directories pods only read, or that hold no links.
	AllowedHostPaths []string `koanf:"allowedHostPaths"`
	// AllowedCapabilities are the capabilities containers may add beyond
	// Pod Security baseline's list (BaselineCapabilities), as "NET_ADMIN"
	// (upper case, without CAP_; "ALL" for every one). A pod adding
	// another is rejected with reason CapabilityForbidden. Default none.
	// A capability is the container's in the cell's kernel: NET_ADMIN
	// changes the network namespace the pod is in.
	AllowedCapabilities []string `koanf:"allowedCapabilities"`
	// AllowProbeHosts lets a probe or lifecycle hook name a host
	// (httpGet.host, tcpSocket.host). The cell's agent sends probes and
	// hooks, from the instance's network, where the path to the instance's
	// metadata and role credentials is open; without a host they go to the
	// pod's own address. Default false: such a pod is rejected with reason
	// ProbeHostForbidden, as Pod Security's baseline level (1.34 and
	// later) refuses it.
	AllowProbeHosts bool `koanf:"allowProbeHosts"`
	// SeccompDefault runs every container that names no seccomp profile
	// (nor its pod) with the runtime's default profile (RuntimeDefault:
	// containerd's, which refuses system calls a container does not need,
	// such as keyctl, add_key, kexec_load and new user namespaces), as the
	// kubelet's seccompDefault: true.
	// Default true: a cell's kernel is all that stands between a pod and
	// its instance's agent and credentials (with the local plugin, this
	// machine), and the profile narrows what of it the pod can reach. The
	// kubelet's own default is false; set false for pods that need a
	// system call the profile refuses, or name Unconfined in those pods
	// (a profile a pod names is applied as named). Privileged containers
	// run without seccomp either way.
	SeccompDefault bool `koanf:"seccompDefault"`
	// Choices bounds, per namespace and ServiceAccount, what a pod may
	// choose about its instance beyond what its requests need: instance
	// types, capacity types, GPU kinds, instance profiles, security
	// groups, the root volume's size, and a ceiling on the price of a
	// named instance type (host/choices). None by default: a pod may
	// choose anything the plugin offers. A pod a rule refuses stays
	// Pending with reason ChoiceForbidden.
	Choices choices.Config `koanf:"choices"`
	// BootPoll is the longest wait between two looks at a booting
	// instance; default 2 s.
	BootPoll time.Duration `koanf:"-"`
	// BootPollWatched replaces BootPoll while the plugin's event stream is
	// up: its running event ends the wait, so the looks are a safety net
	// and cost cloud API calls; default 10 s.
	BootPollWatched time.Duration `koanf:"-"`
	// BootTimeout bounds the wait from launch until the cloud says the
	// instance runs and has an address; default 10 minutes.
	BootTimeout time.Duration `koanf:"-"`
	// AgentTimeout bounds the wait, once the instance runs, until its
	// cell agent answers (a cloud reports an instance running minutes
	// before its boot recipe has started the agent). When it passes, the
	// instance is terminated, the pod gets a CellBootFailed event with
	// the last lines of the instance's console output where the plugin
	// offers them (capability console-output), and the cell is launched
	// again after BootRetry (a new cell ID), up to BootAttempts launches,
	// or, for a pod with restartPolicy Never or after the last attempt,
	// the pod fails with reason CellBootFailed. Default 10 minutes.
	AgentTimeout time.Duration `koanf:"agentTimeout"`
	// BootAttempts is how many cells a pod gets whose agents never
	// answer before it fails (restartPolicy Never: 1); default 3.
	BootAttempts int `koanf:"-"`
	// BootRetry is the wait before the second launch after a boot failure,
	// doubling for each further one; default 30 s.
	BootRetry time.Duration `koanf:"bootRetry"`
	// AgentKeepalive is how often kip pings an idle connection to a
	// cell's agent, and AgentKeepaliveTimeout how long it waits for the
	// answer before it drops the connection and dials the agent again: a
	// cell gone silent (its packets dropped, no reset) is noticed within
	// their sum. Defaults 30 s and 15 s (45 s: inside the node controller's
	// 50 s); AgentKeepalive is at least 10 s, the agents' limit (an agent
	// closes a connection pinged more often).
	AgentKeepalive        time.Duration `koanf:"agentKeepalive"`
	AgentKeepaliveTimeout time.Duration `koanf:"agentKeepaliveTimeout"`
	// JoinTokenTTL is the lifetime of the join token in a cell's
	// bootstrap (its user data): the host joins the cell's agent within
	// it, after which the token is worth nothing to whoever reads the user
	// data. Default BootTimeout plus AgentTimeout plus 5 minutes: the
	// longest a launched cell may take to boot and start its agent
	// before kip gives up on it. A cell still waiting to be launched
	// (no capacity, a refusal) gets a fresh token once half of it
	// has passed.
	JoinTokenTTL time.Duration `koanf:"joinTokenTTL"`
	// RenewalCheck is the longest a cell's certificate renewal waits
	// before it looks at the clock again (renew.go): a renewal is due at
	// about two thirds of the certificate's life, and the wait until then
	// is cut short so that a clock that jumps is noticed. Default 10
	// minutes.
	RenewalCheck time.Duration `koanf:"-"`
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
	c.WarmPool.defaults()
	if c.WarmInterval == 0 {
		c.WarmInterval = 10 * time.Second
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 10 * time.Minute
	}
	if c.AgentTimeout == 0 {
		c.AgentTimeout = 10 * time.Minute
	}
	if c.BootAttempts == 0 {
		c.BootAttempts = 3
	}
	if c.BootRetry == 0 {
		c.BootRetry = 30 * time.Second
	}
	if c.AgentKeepalive == 0 {
		c.AgentKeepalive = cellclient.DefaultKeepalive.Time
	}
	if c.AgentKeepaliveTimeout == 0 {
		c.AgentKeepaliveTimeout = cellclient.DefaultKeepalive.Timeout
	}
	if c.JoinTokenTTL == 0 {
		c.JoinTokenTTL = c.BootTimeout + c.AgentTimeout + 5*time.Minute
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
	if c.DetachTimeout == 0 {
		c.DetachTimeout = 2 * time.Minute
	}
	if c.RematchInterval == 0 {
		c.RematchInterval = time.Minute
	}
	if c.VolumeRefreshInterval == 0 {
		c.VolumeRefreshInterval = time.Minute
	}
	if c.RefusedRetry == 0 {
		c.RefusedRetry = 30 * time.Second
	}
	if c.StatsTimeout == 0 {
		c.StatsTimeout = 5 * time.Second
	}
	if c.RenewalCheck == 0 {
		c.RenewalCheck = 10 * time.Minute
	}
	if c.GCInterval == 0 {
		c.GCInterval = 30 * time.Second
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = filepath.Join(stateHome(), "kip", "pod-logs")
	}
	if c.PodLogsMaxBytes == 0 {
		c.PodLogsMaxBytes = 10 << 20
	}
	if c.PodLogsMaxTotalBytes == 0 {
		c.PodLogsMaxTotalBytes = 1 << 30
	}
	if c.ContainerLogMaxBytes == 0 {
		c.ContainerLogMaxBytes = int(logs.DefaultRotation.MaxSize)
	}
	if c.ContainerLogMaxFiles == 0 {
		c.ContainerLogMaxFiles = logs.DefaultRotation.MaxFiles
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

// Manager is the cell lifecycle for one virtual node. It wires the parts
// below, each in its own file, and implements host/node.Pods (pods.go,
// streams.go) over them.
type Manager struct {
	plugin    pluginapi.Client // asked by Healthy
	log       *slog.Logger
	cells     *cellSet      // the node's cells (cellset.go)
	deps      *cellDeps     // what every cell is handed (cell.go)
	catalog   *catalogCache // the plugin's catalog and capabilities (catalog.go)
	notifier  *notifier     // statuses to virtual-kubelet (notify.go)
	watch     *eventWatch   // the plugin's instance events (events.go)
	collector *collector    // adoption and garbage collection (gc.go)
	// nodeChanged is host/node's callback (NotifyNodeChanges).
	nodeChanged *nodeSignal
}

// Option adds an optional part to a Manager.
type Option func(*cellDeps)

// WithServices makes every served cell get the cluster's ClusterIP
// services from table before its pod is applied, and every change after.
func WithServices(table ServiceTable) Option {
	return func(d *cellDeps) { d.services = table }
}

// WithVolumes makes the cells resolve their pods' persistent volumes
// from src and attach their disks through the plugin (disks.go).
func WithVolumes(src volumes.Source) Option {
	return func(d *cellDeps) { d.volumeSource = src }
}

// New builds a Manager. pods lists the pods bound to the node (the pod
// controller's informer); recorder posts events on pods.
func New(cfg Config, plugin pluginapi.Client, identity Identity, source podrefs.Source,
	pods corev1listers.PodLister, recorder record.EventRecorder, log *slog.Logger, opts ...Option,
) *Manager {
	cfg.defaults()
	cells := newCellSet()
	notifier := newNotifier(cells)
	catalog := &catalogCache{plugin: plugin, ttl: cfg.CatalogTTL, now: cfg.Now, log: log}
	watch := &eventWatch{plugin: plugin, catalog: catalog, cells: cells, backoff: cfg.Backoff, now: cfg.Now, log: log}
	term := terminator{plugin: plugin, backoff: cfg.Backoff, log: log, now: cfg.Now}
	nodeChanged := &nodeSignal{}
	deps := &cellDeps{
		volumesChanged: nodeChanged.notify,
		cfg:            cfg,
		plugin:         plugin,
		volumes:        plugin,
		terminator:     term,
		identity:       identity,
		placement: &placement{catalog: catalog, unavailable: match.NewUnavailable(cfg.UnavailableTTL, cfg.Now), match: cfg.Match, choices: cfg.Choices,
			ttl: cfg.UnavailableTTL, now: cfg.Now},
		dial: func(cellID, address string, tlsConfig *tls.Config) (*cellclient.Agent, error) {
			return cellclient.DialKeepalive(cellID, address, tlsConfig, cellclient.Keepalive{Time: cfg.AgentKeepalive, Timeout: cfg.AgentKeepaliveTimeout})
		},
		join:          cellclient.Join,
		rejoin:        cellclient.Rejoin,
		identityCheck: &identityCheck{plugin: plugin, catalog: catalog, log: log},
		source:        podrefs.NewCache(source, cfg.VolumeRefreshInterval/2, cfg.Now),
		creds:         &registryCreds{plugin: plugin, catalog: catalog, now: cfg.Now, log: log, byHost: map[string]cachedCred{}},
		recorder:      recorder,
		log:           log,
		watching:      watch.watching,
		statusChanged: notifier.statusChanged,
		forget:        cells.remove,
		logs:          podLogs{dir: cfg.PodLogsDir, maxBytes: int64(cfg.PodLogsMaxBytes), maxTotal: int64(cfg.PodLogsMaxTotalBytes), log: log, changed: cfg.KeptLogsChanged},
		pods:          pods,
		admission:     newAdmission(cfg),
	}
	for _, opt := range opts {
		opt(deps)
	}
	deps.placement.metrics, deps.terminator.metrics = deps.metrics, deps.metrics
	deps.warm = newWarmPool(deps, cfg)
	if deps.warm != nil {
		watch.standbys = deps.warm.event
	}
	m := &Manager{
		plugin: plugin, log: log, cells: cells, deps: deps, catalog: catalog, notifier: notifier, watch: watch, nodeChanged: nodeChanged,
		collector: &collector{nodeName: cfg.NodeName, interval: cfg.GCInterval, plugin: plugin, pods: pods,
			cells: cells, deps: deps, terminator: deps.terminator, log: log},
	}
	deps.metrics.SetCells(m.Cells)
	return m
}

// Run adopts the cells that survive from an earlier run, then pushes
// status changes and collects garbage until ctx ends, when every cell's
// goroutine stops (a termination under way finishes). Call it before the
// pod controller starts, and wait for adopted.
func (m *Manager) Run(ctx context.Context, adopted chan<- struct{}) error {
	defer func() {
		m.cells.stopAll()
		for _, c := range m.cells.all() {
			c.wait()
		}
		// A pod that ended is having its logs kept and its cell ended.
		m.deps.terminating.Wait()
	}()
	if err := m.collector.adopt(ctx); err != nil {
		m.log.Warn("adopting existing cells failed; the garbage collector will retry", "error", err)
	}
	if adopted != nil {
		close(adopted)
	}
	go m.notifier.run(ctx)
	go m.watch.run(ctx)
	warmDone := make(chan struct{})
	go func() {
		defer close(warmDone)
		m.deps.warm.run(ctx)
	}()
	defer func() { <-warmDone }()
	m.collector.run(ctx)
	return nil
}

// Healthy reports whether the cloud plugin answers.
func (m *Manager) Healthy(ctx context.Context) error {
	_, err := m.plugin.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	return err
}

// RefreshCatalog makes the next placement fetch the plugin's catalog and
// capabilities again, whatever their age: after a plugin swap, whose new
// version or configuration may offer other types, prices or capabilities.
func (m *Manager) RefreshCatalog() {
	m.catalog.refresh()
	// A new plugin process may attach other drivers, or offer other
	// extended resources: host/node asks again.
	m.nodeChanged.notify()
}

// NotifyNodeChanges implements host/node.NodeChangeNotifier: changed is
// called whenever what the Node's status reports of the cells may have
// changed (a disk attached or detached: Volumes; the plugin swapped:
// VolumeDrivers, ExtendedResources). It must not block.
func (m *Manager) NotifyNodeChanges(changed func()) { m.nodeChanged.set(changed) }

// nodeSignal calls host/node's callback, once it has one.
type nodeSignal struct{ f atomic.Pointer[func()] }

func (s *nodeSignal) set(f func()) { s.f.Store(&f) }

func (s *nodeSignal) notify() {
	if f := s.f.Load(); f != nil {
		(*f)()
	}
}

func key(namespace, name string) string { return namespace + "/" + name }

// CellID is the first cell of pod UID uid: stable, a DNS label, at most 40
// characters. A pod whose cell never booted gets another cell, with
// another ID (cellIDAttempt), since a cell ID names one instance for good.
func CellID(uid types.UID) string { return cellIDAttempt(uid, 0) }

// cellIDAttempt is the cell ID of launch attempt n (0 first) of pod UID
// uid: "kip-<uid>", then "kip-<uid>-r<n>" (at most 46 characters: a pod
// UID is 36), derived, never stored, so that a restarted kip finds it
// again (cellOf).
func cellIDAttempt(uid types.UID, n int) string {
	if n == 0 {
		return cellIDPrefix + string(uid)
	}
	return cellIDPrefix + string(uid) + cellIDAttemptSep + strconv.Itoa(n)
}

// cellOf parses a cell ID into its pod UID and attempt; ok is false for an
// ID kip did not make.
func cellOf(cellID string) (uid types.UID, attempt int, ok bool) {
	rest, ok := strings.CutPrefix(cellID, cellIDPrefix)
	if !ok || rest == "" || isWarmCellID(cellID) {
		return "", 0, false
	}
	if i := strings.LastIndex(rest, cellIDAttemptSep); i > 0 {
		if n, err := strconv.Atoi(rest[i+len(cellIDAttemptSep):]); err == nil && n > 0 {
			return types.UID(rest[:i]), n, true
		}
	}
	return types.UID(rest), 0, true
}

// cellIDPrefix starts every cell ID; then comes the pod UID and, from the
// second launch attempt, cellIDAttemptSep and the attempt (an "r" is in no
// UID's hexadecimal).
const (
	cellIDPrefix     = "kip-"
	cellIDAttemptSep = "-r"
)

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

// stateHome is $XDG_STATE_HOME, else $HOME/.local/state, else the
// temporary directory.
func stateHome() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state")
	}
	return os.TempDir()
}
