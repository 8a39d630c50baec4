package cells

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/clusterip"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// Event reasons on pods.
const (
	ReasonLaunching      = "LaunchingCell"
	ReasonLaunchFailed   = "LaunchFailed"
	ReasonCellRunning    = "CellRunning"
	ReasonCellLost       = "CellLost"
	ReasonResolveFailed  = "CreateContainerConfigError"
	ReasonTerminating    = "TerminatingCell"
	ReasonCellTerminated = "CellTerminated"
	// ReasonCellBootFailed: the cell's instance ran but its agent did
	// not answer within Config.AgentTimeout; the instance was terminated
	// and the cell launched again, or the pod failed (boot.go).
	ReasonCellBootFailed = "CellBootFailed"
	// ReasonQuotaExceeded: an account quota covers an offering; the
	// offerings it covers are skipped for Config.UnavailableTTL and the
	// next candidate is tried.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// ReasonFailedMount is the Warning event of a running pod whose volumes
// could not be resolved again (a token refresh, a Secret gone); it runs on
// with the files it has, as on a kubelet.
const ReasonFailedMount = "FailedMount"

// ReasonLogsNotKept is the Warning event of a pod that ended when the log
// of one of its containers could not be read from the cell before the
// cell ended: kubectl logs will not show it.
const ReasonLogsNotKept = "LogsNotKept"

// instanceAPI is the part of the plugin a cell calls about its own
// instance; Terminate goes through the terminator, which retries it.
type instanceAPI interface {
	Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error)
	Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error)
	List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error)
	ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error)
}

// cellDeps is everything a cell uses beyond its own pod. The Manager
// builds one in New and hands it to every cell, so that a cell never
// reaches back into the Manager.
type cellDeps struct {
	// cfg is read, never written: the cell uses ClusterID, NodeName,
	// Image, the boot and retry timings, Backoff and Now.
	cfg        Config
	plugin     instanceAPI
	terminator terminator
	identity   Identity   // the cell's bootstrap, its join, the agent's client TLS
	placement  *placement // ranking, unavailable offerings, instance sizes
	// dial connects to a cell's agent; tests replace it.
	dial func(cellID, address string, tlsConfig *tls.Config) (*cellclient.Agent, error)
	// join joins a cell's agent before it is dialled (join.go); tests
	// replace it.
	join joinFunc
	// rejoin renews the expired certificate of a cell's agent (renew.go);
	// tests replace it.
	rejoin rejoinFunc
	// identityCheck asks the plugin about a joining cell's instance
	// identity.
	identityCheck *identityCheck
	// source reads what the pod refers to (secrets, config maps,
	// tokens): Fresh for a pod's first resolution and after it changed,
	// Cached for the unchanged pods' periodic refreshes.
	source *podrefs.Cache
	creds  *registryCreds // the cloud registry's credentials for the pod's images
	// volumeSource reads the pod's claims and volumes (WithVolumes); nil:
	// a pod with one waits with FailedAttachVolume. volumes attaches
	// them (the plugin).
	volumeSource volumes.Source
	volumes      volumeAPI
	// volumesChanged says that a cell's disks were attached or detached
	// (Manager.Volumes answers otherwise): host/node sends the Node's
	// status (Manager.NotifyNodeChanges).
	volumesChanged func()
	// services streams the cluster's ClusterIP services to the agent;
	// nil when the Manager has none (WithServices).
	services ServiceTable
	recorder record.EventRecorder
	log      *slog.Logger
	// watching reports whether the plugin's event stream is up
	// (eventWatch), when a booting cell may leave the looking to it.
	watching func() bool
	// statusChanged queues the pod's status for virtual-kubelet (notifier).
	statusChanged func(types.UID)
	// forget drops a deleted cell from the Manager's set (cellSet).
	forget func(*cell)
	// logs keeps the logs of pods that ended.
	logs podLogs
	// terminating tracks the goroutines that end cells (cell.end; a
	// deleted pod's aside), which Manager.Run waits for before it
	// returns.
	terminating sync.WaitGroup
	// pods is the node's pods as the API server has them (the conditions
	// others own, conditions.go); nil in tests that do without.
	pods corev1listers.PodLister
	// admission rejects the pods the node does not run (admit.go).
	admission admission
	// metrics is told of launches, placements and instances (metrics.go);
	// nil records nothing.
	metrics *metrics.Metrics
	// warm is the warm pool's standby cells (warm.go); nil without one.
	warm *warmPool
	// lists and describes share the plugin's List and Describe among the
	// cells calling them at once (lookup.go).
	lists     sharedList
	describes sharedDescribe
}

// ServiceTable streams the cluster's ClusterIP services to a cell's agent
// for as long as the cell is served; host/clusterip's Table is one.
type ServiceTable interface {
	Sync(ctx context.Context, agent clusterip.Applier, opts clusterip.SyncOptions)
}

// cell is one pod's cell and the goroutine that drives it through its
// life: launch (launch.go), boot (boot.go), serve (serve.go) and
// terminate (terminate.go).
type cell struct {
	d *cellDeps
	// id is the cell's ID (cellIDAttempt of uid and attempt): written
	// under mu by the cell's goroutine only, when a cell that never booted
	// is launched again; other goroutines read it with cellID.
	id        string
	attempt   int
	uid       types.UID
	namespace string
	name      string
	key       string
	// logger is the cell's logger, its pod and its current ID (setID):
	// read with log.
	logger  atomic.Pointer[slog.Logger]
	adopted *pluginapi.Instance // set when re-adopted after a restart

	mu sync.Mutex
	// phase is where the cell is in its life (phase.go): moved by enter.
	phase      cellPhase
	desired    *corev1.Pod
	generation int64
	status     corev1.PodStatus
	// refusedEphemeral are the ephemeral containers the node does not
	// run (ephemeral.go), by name, with when they were refused.
	refusedEphemeral map[string]refusedContainer
	instance         *pluginapi.Instance
	agent            *cellclient.Agent
	// disks are the pod's disks (disks.go), resolved before every launch
	// (placeDisks), and at attach for an adopted cell, which this process
	// never placed; attached is what the agent gets of them once they are
	// attached.
	disks    []volumes.Disk
	attached map[string]cellapi.Disk
	// shares are the pod's NFS shares of its claims (shares.go), for the
	// agent, resolved with the disks.
	shares map[string]cellapi.Share
	// typeRefusals are the instance types the pod's disks refused
	// (disktype.go).
	typeRefusals typeRefusals
	// deleting is set once the pod was deleted (deletedEnd): the cell
	// ends and is forgotten, and keeps no logs.
	deleting bool
	applyCh  chan struct{} // a new desired pod to apply
	// cancel ends the goroutine's context; nil until start.
	cancel context.CancelFunc
	// stopped is set by stop, so that a start after it begins stopped.
	stopped    bool
	done       chan struct{}
	started    bool // start was called: done will be closed
	launchedAt time.Time
	placed     map[string]string // placement annotations, once launched
	// interrupted is the cloud's spot-interruption notice, if one came
	// (interrupt.go); rebalanced is set once a rebalance recommendation
	// was recorded.
	interrupted string
	rebalanced  bool
	// evicted is the message of the pod's eviction for the interruption,
	// which every status from the agent keeps (evictedStatus).
	evicted string
	// joinRefused is the last refusal of the cell's join, said once
	// (join.go), or of the renewal of its expired certificate (renew.go).
	joinRefused string
	// cert is the newest certificate the cell's agent was seen to serve
	// or was given (renew.go); certChanged wakes renewLoop when it is
	// set.
	cert        *x509.Certificate
	certChanged chan struct{}
	// stopWatch ends the current status stream so that serve checks the
	// instance at once (an event said it ended); nil between streams.
	stopWatch context.CancelFunc
	// booted wakes waitRunning early: an event said the instance runs.
	booted chan struct{}
	// answered is closed (and set to nil) once the agent first answers;
	// nil when nothing waits for it (serveWithin).
	answered chan struct{}
	// logsKept is set once the end of a pod that ended (finishedEnd,
	// evictedEnd) kept its logs (podLogs): from then on they are served
	// from there, not from the agent.
	logsKept bool
	// created is when this kip took the cell on; times are the moments
	// of its launch (metrics.go).
	created time.Time
	times   launchTimes
	// warmMissed is set once no standby of the warm pool fitted the pod
	// (counted once).
	warmMissed bool
	// launchUnanswered is set when a Launch of the cell returned an error
	// (a lost answer, a timeout, a cancellation): it may have created an
	// instance the cell does not know, which terminate must look for.
	launchUnanswered bool
}

// newCell makes the cell of pod; adopted is its instance when the cell is
// re-adopted after a restart, else nil.
func newCell(d *cellDeps, pod *corev1.Pod, adopted *pluginapi.Instance) *cell {
	c := &cell{
		d: d, id: CellID(pod.UID), uid: pod.UID, namespace: pod.Namespace, name: pod.Name,
		key: key(pod.Namespace, pod.Name), adopted: adopted, desired: pod.DeepCopy(), generation: 1,
		applyCh: make(chan struct{}, 1), done: make(chan struct{}), booted: make(chan struct{}, 1),
		certChanged: make(chan struct{}, 1),
		created:     d.now(), times: newLaunchTimes(pod, adopted != nil, d.now()),
	}
	c.setID(c.id, 0)
	if adopted != nil {
		if _, n, ok := cellOf(adopted.CellID); ok {
			c.setID(adopted.CellID, n)
		} else if isWarmCellID(adopted.CellID) {
			c.setID(adopted.CellID, 0) // a standby cell the pod was given
		}
	}
	c.status = *pod.Status.DeepCopy()
	c.status.Phase = corev1.PodPending
	return c
}

// setID makes id (of attempt) the cell's ID, and the one its log lines
// name: the caller holds mu, or the cell is not yet shared.
func (c *cell) setID(id string, attempt int) {
	c.id, c.attempt = id, attempt
	c.logger.Store(c.d.log.With("pod", c.key, "cell", id))
}

// log is the cell's logger: its log lines name its pod and its current
// cell ID.
func (c *cell) log() *slog.Logger { return c.logger.Load() }

// start runs the cell's goroutine until ctx ends or stop is called.
func (c *cell) start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.cancel = cancel
	c.started = true
	if c.stopped {
		cancel()
	}
	c.mu.Unlock()
	go c.run(ctx)
}

// wait waits until the cell's goroutine, if it was started, has returned.
func (c *cell) wait() {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if started {
		<-c.done
	}
}

// stop ends the cell's goroutine, or makes it end at once if it has not
// started; done is closed once it has returned.
func (c *cell) stop() {
	c.mu.Lock()
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// run drives the cell from launch to a running pod and keeps it in step
// with the desired pod until the pod ends or is deleted.
func (c *cell) run(ctx context.Context) {
	defer close(c.done)
	if c.adopted == nil {
		c.mu.Lock()
		reason, message, ok := c.d.admission.admit(c.desired)
		c.mu.Unlock()
		if !ok {
			c.reject(reason, message)
			<-ctx.Done()
			return
		}
		c.enter(phasePlacing)
	}
	// The cell's phases (phase.go), one step each: launch moves it to
	// phaseLaunching once it issues a Launch (an adopted cell has its
	// instance), serve to phaseRunning once the agent answers, bootFailed
	// back to phaseLaunching.
	for {
		inst, err := c.launch(ctx)
		if err != nil {
			return // deleted, or a failure already reported on the pod
		}
		c.enter(bootingPhase(inst))
		inst, err = c.waitRunning(ctx, inst)
		if err != nil {
			return
		}
		c.enter(phaseJoining)
		c.instanceRunning()
		if c.serveWithin(ctx, inst) {
			if c.replaceForDiskType(ctx, inst) {
				continue // placed again, on another instance type
			}
			return
		}
		if !c.bootFailed(ctx, inst) {
			return
		}
	}
}

// setDesired records a new desired pod and, if what the agent acts on
// changed (spec, labels, annotations), asks for it to be applied under a
// new generation. virtual-kubelet's resyncs repeat unchanged pods.
func (c *cell) setDesired(pod *corev1.Pod) {
	c.mu.Lock()
	changed := !equality.Semantic.DeepEqual(c.desired.Spec, pod.Spec) ||
		!equality.Semantic.DeepEqual(c.desired.Labels, pod.Labels) ||
		!equality.Semantic.DeepEqual(withoutPlaced(c.desired.Annotations), withoutPlaced(pod.Annotations))
	newGeneration := c.desired.Generation != pod.Generation
	c.desired = pod.DeepCopy()
	if changed {
		c.generation++
	}
	c.mu.Unlock()
	if newGeneration && c.d.statusChanged != nil {
		// The status reports the generation seen (observedGeneration),
		// even when nothing the cell acts on changed.
		c.d.statusChanged(c.uid)
	}
	if !changed {
		return
	}
	select {
	case c.applyCh <- struct{}{}:
	default:
	}
}

// podWithStatus is the latest desired pod with the cell's status.
func (c *cell) podWithStatus() *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	pod := c.desired.DeepCopy()
	pod.Status = *c.status.DeepCopy()
	c.addRefusedEphemeralLocked(pod)
	if c.d.pods != nil {
		if api, err := c.d.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && api.UID == pod.UID {
			mergeConditions(&pod.Status, api)
		}
	}
	// The kubelet reports the generation it acted on (GA in v1.35), on the
	// pod and on its conditions. (The labels, annotations and finalizers
	// stay the desired pod's: virtual-kubelet compares them with the API's
	// to see a change; host/node writes the API's with a status.)
	pod.Status.ObservedGeneration = pod.Generation
	for i := range pod.Status.Conditions {
		if t := pod.Status.Conditions[i].Type; kubeletCondition(t) && t != corev1.PodScheduled {
			pod.Status.Conditions[i].ObservedGeneration = pod.Generation
		}
	}
	if len(c.placed) > 0 {
		// virtual-kubelet sends the whole pod with its status, and the
		// API server keeps a node's annotation changes on pods/status:
		// that is how the placement reaches the pod.
		if pod.Annotations == nil {
			pod.Annotations = make(map[string]string, len(c.placed))
		}
		for k, v := range c.placed {
			pod.Annotations[k] = v
		}
	}
	return pod
}

// cellID is the cell's current ID, for goroutines other than the cell's.
func (c *cell) cellID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// instanceID is the ID of the cell's instance, once known.
func (c *cell) instanceID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instance == nil {
		return ""
	}
	return c.instance.ID
}

// connectedAgent is the cell's agent, or nil before serve has dialled it.
func (c *cell) connectedAgent() *cellclient.Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agent
}

// setStatus replaces the status the cell reports and pushes it.
func (c *cell) setStatus(mutate func(*corev1.PodStatus)) {
	c.mu.Lock()
	mutate(&c.status)
	c.mu.Unlock()
	c.d.statusChanged(c.uid)
}

// waiting reports every container as waiting for reason, with the pod Pending.
func (c *cell) waiting(reason, message string) {
	if reason == "ContainerCreating" && len(c.desired.Spec.InitContainers) > 0 {
		// The kubelet's word for every container of a pod with init
		// containers that has not started (convertToAPIContainerStatuses).
		reason = "PodInitializing"
	}
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Reason, st.Message = "", ""
		st.ContainerStatuses = waitingStatuses(c.desired.Spec.Containers, reason, message)
		st.InitContainerStatuses = waitingStatuses(c.desired.Spec.InitContainers, reason, message)
	})
}

func waitingStatuses(containers []corev1.Container, reason, message string) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(containers))
	for _, ctr := range containers {
		out = append(out, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		})
	}
	return out
}

func (c *cell) event(kind, reason, format string, args ...any) {
	c.mu.Lock()
	pod := c.desired.DeepCopy()
	c.mu.Unlock()
	c.d.recorder.Eventf(pod, kind, reason, format, args...)
}
