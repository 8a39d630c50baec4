package cells

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/host/dispatch"
	"github.com/kipcell/kip/pluginapi"
)

// serve connects to the agent, applies the desired pod, and mirrors the
// agent's status until the pod ends or the cell is deleted.
func (c *cell) serve(ctx context.Context, inst *pluginapi.Instance) {
	address := inst.PrivateAddress()
	tlsConfig, err := c.d.identity.ClientTLSConfig(c.id)
	if err != nil {
		c.lost(ctx, fmt.Sprintf("building the TLS configuration for cell %s: %v", c.id, err))
		return
	}
	agent, err := c.d.dial(c.id, address, tlsConfig)
	if err != nil {
		c.lost(ctx, err.Error())
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
			c.id, c.d.cfg.Now().Sub(launchedAt).Seconds(), address)
	}
	for n := 1; ctx.Err() == nil; n++ {
		wctx, stop := context.WithCancel(ctx)
		c.mu.Lock()
		c.stopWatch = stop
		c.mu.Unlock()
		err := agent.WatchStatus(wctx, func(st *corev1.PodStatus, _ int64, events []*cellv1.PodEvent) {
			n = 1
			c.agentEvents(events)
			c.agentStatus(ctx, st, address)
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
		if !sleep(ctx, c.d.cfg.Backoff(n)) {
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
			cellInfo.MilliCPU, cellInfo.MemoryBytes = c.d.placement.sizeOf(ctx, info.InstanceType)
		}
		for n := 1; ; n++ {
			req, err := dispatch.Resolve(ctx, c.d.source, c.d.cfg.Cluster, pod, cellInfo)
			if err == nil {
				req.RegistryCredentials = c.d.creds.add(ctx, pod, req.RegistryCredentials)
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
			wait := c.d.cfg.Backoff(n)
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
		c.d.recorder.Event(ref, kind, e.GetReason(), e.GetMessage())
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
func (c *cell) agentStatus(ctx context.Context, st *corev1.PodStatus, address string) {
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
			now := metav1.NewTime(c.d.cfg.Now())
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
	c.d.statusChanged(c.uid)
	if ended {
		c.log.Info("pod ended; terminating its cell", "phase", next.Phase)
		go c.finish(ctx, fmt.Sprintf("pod %s", next.Phase))
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
	resp, err := c.d.plugin.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
	if err != nil {
		return false
	}
	if len(resp.Instances) == 0 {
		c.lost(ctx, fmt.Sprintf("cell %s (instance %s) is gone", c.id, inst.ID))
		return true
	}
	if s := resp.Instances[0].State; s == pluginapi.StateTerminated || s == pluginapi.StateTerminating {
		c.lost(ctx, fmt.Sprintf("cell %s (instance %s) is %s", c.id, inst.ID, stateText(&resp.Instances[0])))
		return true
	}
	return false
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
