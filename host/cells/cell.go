package cells

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/host/dispatch"
	"github.com/kipcell/kip/host/match"
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
)

// cell is one pod's cell and the goroutine that drives it.
type cell struct {
	m         *Manager
	id        string
	uid       types.UID
	namespace string
	name      string
	key       string
	log       *slog.Logger
	adopted   *pluginapi.Instance // set when re-adopted after a restart

	mu         sync.Mutex
	desired    *corev1.Pod
	generation int64
	status     corev1.PodStatus
	instance   *pluginapi.Instance
	agent      *dispatch.Agent
	deleting   bool
	applyCh    chan struct{} // a new desired pod to apply
	cancel     context.CancelFunc
	done       chan struct{}
	launchedAt time.Time
	placed     map[string]string // placement annotations, once launched
	// interrupted is the cloud's spot-interruption notice, if one came.
	interrupted string
	// stopWatch ends the current status stream so that serve checks the
	// instance at once (an event said it ended); nil between streams.
	stopWatch context.CancelFunc
	// booted wakes waitRunning early: an event said the instance runs.
	booted chan struct{}
	// ended is set once terminate has ended the instance, so that a pod
	// that finished and is then deleted costs one Terminate, not two.
	ended bool
}

// nudge makes serve check the instance now instead of when the agent's
// status stream breaks.
func (c *cell) nudge() {
	c.mu.Lock()
	stop := c.stopWatch
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func newCell(m *Manager, pod *corev1.Pod) *cell {
	c := &cell{
		m: m, id: CellID(pod.UID), uid: pod.UID, namespace: pod.Namespace, name: pod.Name,
		key: key(pod.Namespace, pod.Name), desired: pod.DeepCopy(), generation: 1,
		applyCh: make(chan struct{}, 1), done: make(chan struct{}), booted: make(chan struct{}, 1),
	}
	c.log = m.log.With("pod", c.key, "cell", c.id)
	c.status = *pod.Status.DeepCopy()
	c.status.Phase = corev1.PodPending
	return c
}

func (c *cell) start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	go c.run(ctx)
}

// setDesired records a new desired pod and, if what the agent acts on
// changed (spec, labels, annotations), asks for it to be applied under a
// new generation. virtual-kubelet's resyncs repeat unchanged pods.
func (c *cell) setDesired(pod *corev1.Pod) {
	c.mu.Lock()
	changed := !equality.Semantic.DeepEqual(c.desired.Spec, pod.Spec) ||
		!equality.Semantic.DeepEqual(c.desired.Labels, pod.Labels) ||
		!equality.Semantic.DeepEqual(withoutPlaced(c.desired.Annotations), withoutPlaced(pod.Annotations))
	c.desired = pod.DeepCopy()
	if changed {
		c.generation++
	}
	c.mu.Unlock()
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

// setStatus replaces the status the cell reports and pushes it.
func (c *cell) setStatus(mutate func(*corev1.PodStatus)) {
	c.mu.Lock()
	mutate(&c.status)
	c.mu.Unlock()
	c.m.statusChanged(c)
}

// waiting reports every container as waiting for reason, with the pod Pending.
func (c *cell) waiting(reason, message string) {
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
	c.m.recorder.Eventf(pod, kind, reason, format, args...)
}

// run drives the cell from launch to a running pod and keeps it in step
// with the desired pod until the pod ends or is deleted.
func (c *cell) run(ctx context.Context) {
	defer close(c.done)
	inst, err := c.launch(ctx)
	if err != nil {
		return // deleted, or a failure already reported on the pod
	}
	inst, err = c.waitRunning(ctx, inst)
	if err != nil {
		return
	}
	c.serve(ctx, inst)
}

// launch starts the instance (or, for an adopted cell, takes the one that
// exists). The pod's requirements are ranked against the plugin's catalog
// and the first candidate launched; on InsufficientCapacity the offering is
// marked unavailable and the next one tried. A pod nothing fits stays
// Pending with an event saying why and is matched again when it changes or
// after RematchInterval. Transient failures are retried with backoff; a
// request the plugin refuses leaves the pod Pending with an event saying
// why, and is retried slowly, since capacity and quotas change.
func (c *cell) launch(ctx context.Context) (*pluginapi.Instance, error) {
	if c.adopted != nil {
		c.mu.Lock()
		c.instance = c.adopted
		c.mu.Unlock()
		return c.adopted, nil
	}
	boot, err := c.m.identity.Bootstrap(c.id, c.m.cfg.ClusterID, c.m.cfg.NodeName, string(c.uid))
	if err != nil {
		c.log.Error("issuing cell identity", "error", err)
		c.event(corev1.EventTypeWarning, ReasonLaunchFailed, "issuing the cell's certificate: %v", err)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	bootstrap, err := boot.Marshal()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.launchedAt = c.m.cfg.Now()
	c.mu.Unlock()
	lastMsg := ""
	for n := 1; ; n++ {
		c.mu.Lock()
		pod := c.desired.DeepCopy()
		c.mu.Unlock()
		opts, err := podLaunchOptions(pod)
		if err != nil {
			c.refused(fmt.Sprintf("launching cell %s: %v", c.id, err), &lastMsg)
			if !c.waitChange(ctx, c.m.cfg.RematchInterval) {
				return nil, ctx.Err()
			}
			continue
		}
		cands, err := c.m.rank(ctx, pod)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case match.IsUnsatisfiable(err):
			c.unplaceable(err.Error(), &lastMsg)
			if !c.waitChange(ctx, c.m.cfg.RematchInterval) {
				return nil, ctx.Err()
			}
			continue
		case err != nil:
			msg := fmt.Sprintf("matching an instance type: %v", err)
			c.refused(msg, &lastMsg)
			c.log.Warn("ranking instance types", "attempt", n, "error", err)
			if !sleep(ctx, c.m.cfg.Backoff(n)) {
				return nil, ctx.Err()
			}
			continue
		}
		n = 0
		if inst := c.launchFirst(ctx, cands, opts, bootstrap, &lastMsg); inst != nil {
			return inst, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// launchFirst launches the first candidate that has capacity. It returns
// nil when every candidate ran out of capacity (they are then marked
// unavailable), or the plugin refused a launch (reported on the pod, after
// a slow back-off), so that the caller ranks again.
func (c *cell) launchFirst(ctx context.Context, cands []match.Candidate, opts launchOptions, bootstrap []byte, lastMsg *string) *pluginapi.Instance {
	for _, cand := range cands {
		req := &pluginapi.LaunchRequest{
			CellID: c.id, NodeName: c.m.cfg.NodeName, PodUID: string(c.uid), PodNamespace: c.namespace, PodName: c.name,
			InstanceType: cand.InstanceType, CapacityType: cand.CapacityType, Image: c.m.cfg.Image, Bootstrap: bootstrap,
			UnlimitedCPUCredits: cand.UnlimitedCredits,
			SecurityGroups:      opts.securityGroups, InstanceProfile: opts.instanceProfile, VolumeSizeGiB: opts.volumeSizeGiB,
		}
		where := cand.InstanceType
		if cand.Zone != "" {
			req.Zones = []string{cand.Zone}
			where += " in " + cand.Zone
		}
		what := fmt.Sprintf("%s (%s, %s)", where, cand.CapacityType, priceText(cand))
		if cand.UnlimitedCredits {
			what = fmt.Sprintf("%s (%s, %s with unlimited CPU credits)", where, cand.CapacityType, priceText(cand))
		}
		c.waiting("ContainerCreating", fmt.Sprintf("launching cell %s on %s", c.id, what))
		c.event(corev1.EventTypeNormal, ReasonLaunching, "launching cell %s on %s", c.id, what)
		for n := 1; ; n++ {
			c.log.Info("launch issued", "type", cand.InstanceType, "zone", cand.Zone, "capacity_type", cand.CapacityType, "attempt", n)
			resp, err := c.m.plugin.Launch(ctx, req)
			if err == nil {
				inst := resp.Instance
				c.mu.Lock()
				c.instance = &inst
				c.placed = placedAnnotations(cand, inst.Zone)
				c.mu.Unlock()
				c.log.Info("cell launched", "instance", inst.ID, "type", cand.InstanceType, "zone", inst.Zone,
					"capacity_type", cand.CapacityType, "price", priceText(cand))
				return &inst
			}
			if ctx.Err() != nil {
				return nil
			}
			if pluginapi.IsInsufficientCapacity(err) {
				c.m.unavailable.Mark(cand.InstanceType, cand.Zone, cand.CapacityType)
				c.log.Info("no capacity for an offering; trying the next", "type", cand.InstanceType, "zone", cand.Zone,
					"capacity_type", cand.CapacityType, "error", err)
				c.event(corev1.EventTypeWarning, ReasonInsufficientCapacity, "%s: %v; trying the next offering", what, err)
				break
			}
			wait := c.m.cfg.Backoff(n)
			var throttled *pluginapi.ThrottledError
			if errors.As(err, &throttled) && throttled.RetryAfter > wait {
				wait = throttled.RetryAfter
			}
			c.log.Warn("launching cell", "attempt", n, "type", cand.InstanceType, "error", err, "retry_in", wait)
			if pluginapi.IsTransient(err) || pluginapi.IsThrottled(err) {
				if !sleep(ctx, wait) {
					return nil
				}
				continue
			}
			// Refused: say why on the pod, then rank again slowly.
			c.refused(fmt.Sprintf("launching cell %s on %s: %v", c.id, what, err), lastMsg)
			c.waitChange(ctx, max(wait, c.m.cfg.RefusedRetry))
			return nil
		}
	}
	return nil
}

// refused reports a launch the plugin refused, once per distinct message.
func (c *cell) refused(msg string, last *string) {
	if msg == *last {
		return
	}
	*last = msg
	c.waiting("ContainerCreating", msg)
	c.event(corev1.EventTypeWarning, ReasonLaunchFailed, "%s", msg)
}

// waitRunning waits until the instance runs and has an address, using the
// plugin's Describe with backoff (the plugin's WatchEvents, where offered,
// only shortens the waits).
func (c *cell) waitRunning(ctx context.Context, inst *pluginapi.Instance) (*pluginapi.Instance, error) {
	deadline := c.m.cfg.Now().Add(c.m.cfg.BootTimeout)
	for n := 1; ; n++ {
		if inst.State == pluginapi.StateRunning && inst.PrivateAddress() != "" {
			return inst, nil
		}
		if inst.State == pluginapi.StateTerminated || inst.State == pluginapi.StateTerminating {
			c.lost(fmt.Sprintf("cell %s ended while booting: %s", c.id, stateText(inst)))
			return nil, errDeleted
		}
		if c.m.cfg.Now().After(deadline) {
			c.lost(fmt.Sprintf("cell %s did not boot within %s (state %s)", c.id, c.m.cfg.BootTimeout, inst.State))
			return nil, errDeleted
		}
		// Poll, or look at once when the plugin's events say it runs.
		wait := min(c.m.cfg.Backoff(n), c.m.cfg.BootPoll)
		if c.m.watching.Load() {
			wait = c.m.cfg.BootPollWatched
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.booted:
			t.Stop()
		case <-t.C:
		}
		resp, err := c.m.plugin.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
		switch {
		case err != nil:
			c.log.Warn("describing cell", "instance", inst.ID, "error", err)
		case len(resp.Instances) == 0:
			// Eventual consistency right after launch: give it a while.
			if n > 20 {
				c.lost(fmt.Sprintf("cell %s (instance %s) disappeared while booting", c.id, inst.ID))
				return nil, errDeleted
			}
		default:
			inst = &resp.Instances[0]
			c.mu.Lock()
			c.instance = inst
			c.mu.Unlock()
		}
	}
}

// wakeBoot ends waitRunning's current wait, if it is waiting (a pending
// wake already will).
func (c *cell) wakeBoot() {
	select {
	case c.booted <- struct{}{}:
	default:
	}
}

func stateText(inst *pluginapi.Instance) string {
	if inst.StateReason != "" {
		return fmt.Sprintf("%s (%s)", inst.State, inst.StateReason)
	}
	return string(inst.State)
}

// serve connects to the agent, applies the desired pod, and mirrors the
// agent's status until the pod ends or the cell is deleted.
func (c *cell) serve(ctx context.Context, inst *pluginapi.Instance) {
	address := inst.PrivateAddress()
	tlsConfig, err := c.m.identity.ClientTLSConfig(c.id)
	if err != nil {
		c.lost(fmt.Sprintf("building the TLS configuration for cell %s: %v", c.id, err))
		return
	}
	agent, err := c.m.dial(c.id, address, tlsConfig)
	if err != nil {
		c.lost(err.Error())
		return
	}
	c.mu.Lock()
	c.agent = agent
	launchedAt := c.launchedAt
	c.mu.Unlock()

	// Apply the desired pod whenever it changes; the first Apply also
	// proves the agent is up (it retries until the agent answers).
	applied := make(chan struct{})
	go c.applyLoop(ctx, agent, address, applied)
	select {
	case <-applied:
	case <-ctx.Done():
		return
	}
	if !launchedAt.IsZero() {
		c.event(corev1.EventTypeNormal, ReasonCellRunning, "cell %s running after %.1fs at %s",
			c.id, c.m.cfg.Now().Sub(launchedAt).Seconds(), address)
	}
	for n := 1; ctx.Err() == nil; n++ {
		wctx, stop := context.WithCancel(ctx)
		c.mu.Lock()
		c.stopWatch = stop
		c.mu.Unlock()
		err := agent.WatchStatus(wctx, func(st *corev1.PodStatus, _ int64, events []*cellv1.PodEvent) {
			n = 1
			c.agentEvents(events)
			c.agentStatus(st, address)
		})
		c.mu.Lock()
		c.stopWatch = nil
		c.mu.Unlock()
		nudged := wctx.Err() != nil
		stop()
		if ctx.Err() != nil {
			return
		}
		if c.checkLost(ctx, inst) {
			return
		}
		if nudged {
			n = 0 // an event asked for the check; the stream itself was fine
			continue
		}
		c.log.Warn("status stream from cell broke; re-subscribing", "error", err)
		if !sleep(ctx, c.m.cfg.Backoff(n)) {
			return
		}
	}
}

// applyLoop sends the desired pod at start and after every change.
func (c *cell) applyLoop(ctx context.Context, agent *dispatch.Agent, address string, applied chan struct{}) {
	first := true
	for {
		c.mu.Lock()
		pod, gen := c.desired.DeepCopy(), c.generation
		info := c.instance
		c.mu.Unlock()
		cellInfo := dispatch.Cell{PodIP: address, HostIP: address}
		if info != nil {
			cellInfo.MilliCPU, cellInfo.MemoryBytes = c.m.sizeOf(ctx, info.InstanceType)
		}
		for n := 1; ; n++ {
			req, err := dispatch.Resolve(ctx, c.m.source, pod, cellInfo)
			if err == nil {
				req.RegistryCredentials = c.m.cloudCredentials(ctx, pod, req.RegistryCredentials)
				req.Generation = gen
				err = agent.Apply(ctx, req)
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			var rerr *dispatch.ResolveError
			if errors.As(err, &rerr) {
				c.waiting(ReasonResolveFailed, rerr.Error())
				c.event(corev1.EventTypeWarning, "Failed", "Error: %s", rerr.Error())
			}
			wait := c.m.cfg.Backoff(n)
			if first && rerr == nil {
				// The agent is still starting: look again soon, as a
				// pod's start-up waits on this.
				wait = min(wait, 50*time.Millisecond<<min(n-1, 3))
			}
			if !sleep(ctx, wait) {
				return
			}
		}
		if first {
			close(applied)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-c.applyCh:
		}
	}
}

// agentEvents records the agent's events on the pod, each on its
// container's field path as a kubelet does (kubectl describe shows them).
func (c *cell) agentEvents(events []*cellv1.PodEvent) {
	if len(events) == 0 {
		return
	}
	c.mu.Lock()
	pod := c.desired.DeepCopy()
	c.mu.Unlock()
	for _, e := range events {
		ref := &corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		}
		if e.GetContainer() != "" {
			ref.FieldPath = containerFieldPath(pod, e.GetContainer())
		}
		kind := corev1.EventTypeNormal
		if e.GetType() == corev1.EventTypeWarning {
			kind = corev1.EventTypeWarning
		}
		c.m.recorder.Event(ref, kind, e.GetReason(), e.GetMessage())
	}
}

// containerFieldPath is the kubelet's field path of a container.
func containerFieldPath(pod *corev1.Pod, name string) string {
	for _, ctr := range pod.Spec.InitContainers {
		if ctr.Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	return "spec.containers{" + name + "}"
}

// agentStatus takes the status the agent reports, keeps what only the API
// knows (PodScheduled, start time), and terminates the cell once the pod
// has ended.
func (c *cell) agentStatus(st *corev1.PodStatus, address string) {
	c.mu.Lock()
	prev := c.status
	next := *st.DeepCopy()
	if next.PodIP == "" {
		next.PodIP = address
		next.PodIPs = []corev1.PodIP{{IP: address}}
	}
	if next.HostIP == "" {
		next.HostIP = address
		next.HostIPs = []corev1.HostIP{{IP: address}}
	}
	if next.StartTime == nil {
		next.StartTime = prev.StartTime
		if next.StartTime == nil {
			now := metav1.NewTime(c.m.cfg.Now())
			next.StartTime = &now
		}
	}
	for _, cond := range prev.Conditions {
		if cond.Type == corev1.PodScheduled && !hasCondition(next.Conditions, corev1.PodScheduled) {
			next.Conditions = append(next.Conditions, cond)
		}
	}
	c.status = next
	ended := isTerminal(next.Phase) && !isTerminal(prev.Phase)
	c.mu.Unlock()
	if next.Phase != prev.Phase {
		c.log.Info("cell reported pod phase", "phase", next.Phase)
	}
	c.m.statusChanged(c)
	if ended {
		c.log.Info("pod ended; terminating its cell", "phase", next.Phase)
		go c.finish(fmt.Sprintf("pod %s", next.Phase))
	}
}

func hasCondition(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// checkLost asks the plugin whether the instance still runs; if not, the
// pod fails (as on a node that died) and the cell is cleaned up.
func (c *cell) checkLost(ctx context.Context, inst *pluginapi.Instance) bool {
	resp, err := c.m.plugin.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
	if err != nil {
		return false
	}
	if len(resp.Instances) == 0 {
		c.lost(fmt.Sprintf("cell %s (instance %s) is gone", c.id, inst.ID))
		return true
	}
	if s := resp.Instances[0].State; s == pluginapi.StateTerminated || s == pluginapi.StateTerminating {
		c.lost(fmt.Sprintf("cell %s (instance %s) is %s", c.id, inst.ID, stateText(&resp.Instances[0])))
		return true
	}
	return false
}

// lost fails the pod because its cell ended under it, and cleans up.
func (c *cell) lost(message string) {
	c.mu.Lock()
	if c.interrupted != "" {
		message = "spot interruption: " + message
	}
	c.mu.Unlock()
	c.log.Warn("cell lost", "reason", message)
	c.event(corev1.EventTypeWarning, ReasonCellLost, "%s", message)
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.Reason = ReasonCellLost
		st.Message = message
		for i := range st.ContainerStatuses {
			cs := &st.ContainerStatuses[i]
			if cs.State.Terminated == nil {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonCellLost, Message: message}}
				cs.Ready = false
			}
		}
	})
	go c.finish(message)
}

// finish terminates the cell but keeps the pod's (terminal) status for the
// API until the pod itself is deleted.
func (c *cell) finish(reason string) {
	c.terminate(0, reason, false)
}

// delete terminates the cell within grace and forgets the pod.
func (c *cell) delete(grace time.Duration, reason string) {
	c.mu.Lock()
	if c.deleting {
		c.mu.Unlock()
		return
	}
	c.deleting = true
	c.mu.Unlock()
	go c.terminate(grace, reason, true)
}

// terminate stops the pod on the agent within grace, ends the instance
// (also when its Launch is still in flight or its ID was never seen), and,
// if forget, removes the cell from the Manager.
func (c *cell) terminate(grace time.Duration, reason string, forget bool) {
	ctx := context.WithoutCancel(c.m.ctx)
	c.mu.Lock()
	agent := c.agent
	c.mu.Unlock()
	if agent != nil && grace > 0 {
		dctx, cancel := context.WithTimeout(ctx, grace+5*time.Second)
		if err := agent.Delete(dctx, grace); err != nil {
			c.log.Warn("stopping the pod on its cell", "error", err)
		}
		cancel()
	}
	if c.cancel != nil {
		c.cancel()
	}
	<-c.done
	if agent != nil {
		_ = agent.Close()
	}
	c.mu.Lock()
	inst, ended := c.instance, c.ended
	c.ended = true
	c.mu.Unlock()
	if ended {
		// finish already ended the instance; a later delete only forgets.
		c.log.Info("cell already terminated", "reason", reason)
		if forget {
			c.m.forget(c)
		}
		return
	}
	c.event(corev1.EventTypeNormal, ReasonTerminating, "terminating cell %s: %s", c.id, reason)
	if inst != nil {
		c.m.terminateInstance(ctx, inst.ID, c.id)
	}
	// A Launch whose answer was lost may still have created an instance:
	// find it by cell ID.
	if list, err := c.m.plugin.List(ctx, &pluginapi.ListRequest{}); err == nil {
		for _, other := range list.Instances {
			if other.CellID == c.id && (inst == nil || other.ID != inst.ID) && other.State != pluginapi.StateTerminated {
				c.m.terminateInstance(ctx, other.ID, c.id)
			}
		}
	}
	c.log.Info("cell terminated", "reason", reason)
	if forget {
		c.m.forget(c)
	}
}
