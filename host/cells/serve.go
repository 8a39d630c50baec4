package cells

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/clusterip"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/pluginapi"
)

// serve connects to the agent, applies the desired pod, and mirrors the
// agent's status until the pod ends or the cell is deleted.
func (c *cell) serve(ctx context.Context, inst *pluginapi.Instance) {
	// A disk the instance's type refuses ends the serving (disktype.go).
	ctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	c.servingFor(stopServing)
	address := inst.PrivateAddress()
	addrs := addresses{agent: address, pod: inst.PodAddress()}
	// The pod's disks are attached while the agent is joined; the pod is
	// applied once they are (disks.go).
	disksAttached := make(chan bool, 1)
	attachCtx, stopAttaching := context.WithCancel(ctx)
	defer stopAttaching() // an instance given up is attached no more
	go func() { disksAttached <- c.attachDisks(attachCtx, inst) }()
	if !c.join(ctx, inst) {
		return
	}
	tlsConfig, err := c.d.identity.ClientTLSConfig(c.id)
	if err != nil {
		c.lost(ctx, fmt.Sprintf("building the TLS configuration for cell %s: %v", c.id, err))
		return
	}
	c.watchCertificate(tlsConfig)
	agent, err := c.d.dial(c.id, address, tlsConfig)
	if err != nil {
		c.lost(ctx, err.Error())
		return
	}
	// The agent's certificate is renewed well before it expires, over
	// this connection (renew.go), for as long as the cell is served.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		c.renewLoop(renewCtx, agent, inst)
	}()
	defer func() {
		stopRenewing()
		<-renewing
	}()
	c.mu.Lock()
	c.agent = agent
	launchedAt := c.launchedAt
	c.mu.Unlock()

	// The cluster's ClusterIP services first, and every change after: a
	// pod that calls a Service as it starts finds it programmed. The wait
	// ends once the agent has answered (or says it programs none).
	if c.d.services != nil {
		reached := make(chan struct{})
		go c.d.services.Sync(ctx, agent, clusterip.SyncOptions{
			Backoff: c.d.cfg.Backoff, FirstBackoff: c.d.firstContactBackoff, Reached: reached, Log: c.log(),
		})
		select {
		case <-reached:
			c.agentAnswered()
		case <-ctx.Done():
			return
		}
	}

	if !<-disksAttached {
		return
	}
	// Apply the desired pod whenever it changes; the first Apply also
	// proves the agent is up (it retries until the agent answers).
	applied := make(chan struct{})
	go c.applyLoop(ctx, agent, addrs, applied)
	select {
	case <-applied:
		c.agentAnswered()
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
		err := agent.WatchStatus(wctx, func(st *corev1.PodStatus, _ int64, events []cellapi.PodEvent, notices []cellapi.InstanceNotice) {
			n = 1
			c.agentEvents(events)
			c.agentStatus(ctx, st, addrs)
			c.agentNotices(ctx, notices)
		})
		c.mu.Lock()
		c.stopWatch = nil
		c.mu.Unlock()
		nudged := wctx.Err() != nil
		stop()
		if ctx.Err() != nil {
			return
		}
		if !nudged {
			// Said when noticed: asking the plugin about the instance
			// (checkLost) can take a while.
			c.log().Warn("status stream from cell broke; re-subscribing", "error", err)
		}
		if c.checkLost(ctx, inst) {
			return
		}
		// An agent started again with its key serves as the cell at
		// once; one that lost it serves a certificate the host refuses
		// and waits to be joined, which its spent token no longer can
		// (joinOnce says so).
		if cellclient.HandshakeFailed(err) && c.joinOnce(ctx, inst) == nil {
			agent.ResetBackoff()
		}
		if nudged {
			n = 0 // an event asked for the check; the stream itself was fine
			continue
		}
		if !sleep(ctx, c.d.cfg.Backoff(n)) {
			return
		}
	}
}

// applyLoop keeps the agent's pod in step with the desired one. It
// applies the pod at start and after every change; the first Apply also
// proves the agent is up (it retries until the agent answers) and closes
// applied. Between changes it resolves the pod again when one of its
// service account tokens needs refreshing (podrefs.Tokens: at 80 % of
// its lifetime or after 24 hours) and every Config.VolumeRefreshInterval
// while it has configMap, secret or projected volumes, and applies it
// under a new generation when what was resolved changed: the agent swaps
// the files in under the running containers, as a kubelet does.
func (c *cell) applyLoop(ctx context.Context, agent *cellclient.Agent, addrs addresses, applied chan struct{}) {
	tokens := podrefs.NewTokens(c.d.cfg.Now)
	var (
		sent    *cellapi.PodRequest // what the agent took last
		sentGen int64               // and under which generation
		failing bool                // the last refresh failed
	)
	first := true
	for n := 1; ; n++ {
		c.mu.Lock()
		pod, gen := c.desired.DeepCopy(), c.generation
		info := c.instance
		c.mu.Unlock()
		// The agent never hears of an ephemeral container the node
		// does not run.
		pod = c.withoutRefusedEphemeral(pod)
		cellInfo := podrefs.Cell{PodIP: addrs.podIP(pod), HostIP: addrs.agent}
		if info != nil {
			cellInfo.MilliCPU, cellInfo.MemoryBytes = c.d.placement.sizeOf(ctx, info.InstanceType)
		}
		refresh := sentGen != 0 && gen == sentGen // the pod did not change
		src := c.d.source.Fresh()
		if refresh {
			src = c.d.source.Cached() // what another pod's resolution read lately
		}
		var req *cellapi.PodRequest
		var err error
		if refresh && sent != nil {
			// The same pod as sent: its encoding too.
			req, err = podrefs.ResolveEncoded(ctx, src, c.d.cfg.Cluster, pod, sent.PodJSON, cellInfo, tokens)
		} else {
			req, err = podrefs.Resolve(ctx, src, c.d.cfg.Cluster, pod, cellInfo, tokens)
		}
		if err == nil {
			req.PodAddress = addrs.pod
			req.Disks = c.cellDisks()
			req.Shares = c.cellShares()
			req.SeccompDefault = c.d.cfg.SeccompDefault
			req.LogRotation = &cellapi.LogRotation{MaxSizeBytes: int64(c.d.cfg.ContainerLogMaxBytes), MaxFiles: int32(c.d.cfg.ContainerLogMaxFiles)}
			req.RegistryCredentials = c.d.creds.add(ctx, pod, req.RegistryCredentials)
			if refresh && sameResolution(req, sent) {
				req = sent // nothing new for the agent
			} else {
				gen, err = c.apply(ctx, agent, req, gen, refresh)
			}
		}
		if errors.Is(err, errPodChanged) {
			n = 0
			continue
		}
		if addrs.pod != "" && cellclient.NoPodNetwork(err) {
			// The pod runs at the cell's address: its downward API
			// says so.
			c.log().Info("the cell's agent gives the pod no address of its own; it runs at the cell's",
				"pod_address", addrs.pod, "address", addrs.agent)
			addrs.pod, n = "", 0
			continue
		}
		if err == nil {
			sent, sentGen, failing, n = req, gen, false, 0
			if first {
				close(applied)
				first = false
			}
			if !c.waitApply(ctx, pod, tokens) {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if refresh {
			// The pod runs on with the files it has; say so once and try
			// again at the next refresh.
			if !failing {
				c.log().Warn("refreshing the pod's volumes failed", "error", err)
				c.event(corev1.EventTypeWarning, ReasonFailedMount, "refreshing the pod's volumes: %s", err)
			}
			failing, n = true, 0
			if !c.waitApply(ctx, pod, tokens) {
				return
			}
			continue
		}
		var rerr *podrefs.ResolveError
		isResolve := errors.As(err, &rerr)
		if isResolve {
			c.waiting(ReasonResolveFailed, rerr.Error())
			c.event(corev1.EventTypeWarning, "Failed", "Error: %s", rerr.Error())
		}
		wait := c.d.cfg.Backoff(n)
		if first && !isResolve {
			wait = c.d.firstContactBackoff(n)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// waitApply waits for a new desired pod or the pod's next refresh
// (refreshWait); it reports false when ctx ended.
func (c *cell) waitApply(ctx context.Context, pod *corev1.Pod, tokens *podrefs.Tokens) bool {
	var refresh <-chan time.Time
	if wait, ok := c.refreshWait(pod, tokens); ok {
		t := time.NewTimer(wait)
		defer t.Stop()
		refresh = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.applyCh:
	case <-refresh:
	}
	return true
}

// errPodChanged: the desired pod changed while its previous version was
// being sent; the caller starts over with the new one.
var errPodChanged = errors.New("the desired pod changed")

// apply sends req, resolved from the desired pod of generation gen, and
// returns the generation the agent took it under. A refresh (the pod
// unchanged, what it references changed) goes under the next generation.
// An agent that already has a later generation (from the kip process
// before a restart: an adopted cell) ignores req; then req is sent again
// past that generation. Either way, if the desired pod changed meanwhile,
// req is stale: errPodChanged.
func (c *cell) apply(ctx context.Context, agent *cellclient.Agent, req *cellapi.PodRequest, gen int64, refresh bool) (int64, error) {
	if refresh {
		next, ok := c.advance(gen, gen)
		if !ok {
			return 0, errPodChanged
		}
		gen = next
	}
	for {
		req.Generation = gen
		took, err := agent.Apply(ctx, req)
		if err != nil || took <= gen {
			return gen, err
		}
		next, ok := c.advance(gen, took)
		if !ok {
			return 0, errPodChanged
		}
		gen = next
	}
}

// advance moves the cell's generation past past, for the desired pod of
// generation from to be sent again under it, and returns it. If the
// desired pod changed since from, it returns false instead (the change
// is sent under its own generation, also moved past past if need be).
func (c *cell) advance(from, past int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.generation != from {
		c.generation = max(c.generation, past+1)
		return 0, false
	}
	c.generation = past + 1
	return c.generation, true
}

// sameResolution reports whether a and b carry the same environment,
// volume files and credentials (their pods and generations aside: a
// changed pod has a new generation anyway). It sets those aside in a and
// b themselves for the comparison, and puts them back: both must be the
// caller's alone (a copy of each, every refresh of every pod, was a share
// of kip's idle work).
func sameResolution(a, b *cellapi.PodRequest) bool {
	if a == nil || b == nil {
		return a == b
	}
	aj, ag, bj, bg := a.PodJSON, a.Generation, b.PodJSON, b.Generation
	a.PodJSON, a.Generation, b.PodJSON, b.Generation = nil, 0, nil, 0
	defer func() { a.PodJSON, a.Generation, b.PodJSON, b.Generation = aj, ag, bj, bg }()
	return a.Equal(b)
}

// refreshWait is how long until the pod is resolved again without a
// change: until its next token refresh, and at most
// Config.VolumeRefreshInterval while it has volumes whose files come from
// the API. ok is false when nothing needs refreshing.
func (c *cell) refreshWait(pod *corev1.Pod, tokens *podrefs.Tokens) (time.Duration, bool) {
	if !hasAPIVolumes(pod) {
		return 0, false
	}
	wait := c.d.cfg.VolumeRefreshInterval
	if at := tokens.Refresh(); !at.IsZero() {
		// A refresh overdue (it failed, the old token still valid) waits
		// for the next interval.
		if d := at.Sub(c.d.cfg.Now()); d > 0 && d < wait {
			wait = d
		}
	}
	return wait, true
}

// hasAPIVolumes reports whether the pod has volumes whose files the host
// reads from the API (configMap, secret, projected).
func hasAPIVolumes(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil || v.Secret != nil || v.Projected != nil {
			return true
		}
	}
	return false
}

// agentEvents records the agent's events on the pod, each on its
// container's field path as a kubelet does (kubectl describe shows them).
func (c *cell) agentEvents(events []cellapi.PodEvent) {
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
		if e.Container != "" {
			ref.FieldPath = containerFieldPath(pod, e.Container)
		}
		kind := corev1.EventTypeNormal
		if e.Type == corev1.EventTypeWarning {
			kind = corev1.EventTypeWarning
		}
		c.d.recorder.Event(ref, kind, e.Reason, e.Message)
	}
}

// containerFieldPath is the kubelet's field path of a container.
func containerFieldPath(pod *corev1.Pod, name string) string {
	for _, ctr := range pod.Spec.InitContainers {
		if ctr.Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	for _, ctr := range pod.Spec.EphemeralContainers {
		if ctr.Name == name {
			return "spec.ephemeralContainers{" + name + "}"
		}
	}
	return "spec.containers{" + name + "}"
}

// agentStatus takes the status the agent reports, keeps what only the API
// knows (PodScheduled, start time), and terminates the cell once the pod
// has ended. The pod's IP is the agent's alone: it reports one once the
// pod's network is up, as a kubelet once the pod's sandbox has its
// network; the host, which cannot tell when that is, fills in none.
func (c *cell) agentStatus(ctx context.Context, st *corev1.PodStatus, addrs addresses) {
	c.mu.Lock()
	prev := c.status
	next := *st.DeepCopy()
	if next.HostIP == "" {
		next.HostIP = addrs.agent
		next.HostIPs = []corev1.HostIP{{IP: addrs.agent}}
	}
	if next.StartTime == nil {
		next.StartTime = prev.StartTime
		if next.StartTime == nil {
			now := metav1.NewTime(c.d.cfg.Now())
			next.StartTime = &now
		}
	}
	for _, cond := range prev.Conditions {
		if cond.Type == corev1.PodScheduled && findCondition(next.Conditions, corev1.PodScheduled) == nil {
			next.Conditions = append(next.Conditions, cond)
		}
	}
	evicted := c.evicted != ""
	if evicted {
		evictedStatus(&next, c.evicted)
	}
	c.status = next
	ended := isTerminal(next.Phase) && !isTerminal(prev.Phase) && !evicted // an eviction ends the cell itself
	c.mu.Unlock()
	if next.Phase != prev.Phase {
		c.log().Info("cell reported pod phase", "phase", next.Phase)
	}
	if next.Phase == corev1.PodRunning {
		c.podRunning()
	}
	c.d.statusChanged(c.uid)
	if ended {
		c.log().Info("pod ended; terminating its cell", "phase", next.Phase)
		c.end(ctx, finishedEnd(next.Phase))
	}
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

// addresses are a running cell's: the agent's (the instance's private
// address, the pod's hostIP) and the pod's own (pluginapi.AddressPod),
// empty when the plugin gives none or the agent refuses it
// (cellclient.NoPodNetwork).
type addresses struct{ agent, pod string }

// podIP is the pod's IP: its own address, unless it has none or shares
// the instance's network (hostNetwork), as the agent reports it.
func (a addresses) podIP(pod *corev1.Pod) string {
	if a.pod == "" || (pod != nil && pod.Spec.HostNetwork) {
		return a.agent
	}
	return a.pod
}
