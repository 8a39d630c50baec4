package cells

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/kipcell/kip/pluginapi"
)

// instanceLister is the part of the plugin the collector reads.
type instanceLister interface {
	List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error)
}

// collector reconciles the node's cells with the cloud and the API
// server: at start-up it adopts the cells an earlier run left (adopt),
// then every interval it terminates cells whose pod is gone and instances
// no cell owns (collect).
type collector struct {
	nodeName   string
	interval   time.Duration
	plugin     instanceLister
	pods       corev1listers.PodLister
	cells      *cellSet
	deps       *cellDeps // what an adopted cell is handed, as any other
	terminator terminator
	log        *slog.Logger
}

// run collects garbage every interval until ctx ends.
func (g *collector) run(ctx context.Context) {
	tick := time.NewTicker(g.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			g.collect(ctx)
		}
	}
}

// adopt finds this node's instances left by an earlier run: those whose
// pod still exists get their cell back (reconnected, not relaunched),
// running until ctx ends; the rest are terminated. A pod whose earlier
// cells never booted (cellIDAttempt) gets its newest cell back; the
// older ones are terminated.
func (g *collector) adopt(ctx context.Context) error {
	list, err := g.plugin.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	pods, err := g.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	byUID := map[string]*corev1.Pod{}
	for _, p := range pods {
		byUID[string(p.UID)] = p
	}
	newest := map[types.UID]int{} // pod UID → its newest cell's attempt
	for _, inst := range list.Instances {
		if uid, n, ok := cellOf(inst.CellID); ok && inst.Tags[pluginapi.TagNode] == g.nodeName && inst.State != pluginapi.StateTerminated {
			newest[uid] = max(newest[uid], n)
		}
	}
	// Standby cells first: one given to a pod is that pod's cell, whatever
	// else the pod left.
	var standbys []pluginapi.Instance
	for _, inst := range list.Instances {
		if inst.Tags[TagWarmPool] != "" && inst.Tags[pluginapi.TagNode] == g.nodeName && inst.State != pluginapi.StateTerminated {
			standbys = append(standbys, inst)
		}
	}
	g.adoptStandbys(ctx, standbys, byUID)
	for i := range list.Instances {
		inst := list.Instances[i]
		if inst.Tags[pluginapi.TagNode] != g.nodeName || inst.State == pluginapi.StateTerminated || inst.Tags[TagWarmPool] != "" {
			continue
		}
		pod := byUID[inst.Tags[pluginapi.TagPodUID]]
		if pod == nil || pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) ||
			cellIDAttempt(pod.UID, newest[pod.UID]) != inst.CellID {
			g.log.Info("terminating an instance no pod needs", "instance", inst.ID, "cell", inst.CellID)
			go g.terminator.terminate(ctx, inst.ID, inst.CellID)
			continue
		}
		c := newCell(g.deps, pod, &inst)
		if have := g.cells.get(pod.UID); have != nil {
			// The pod was given a standby cell, its cell now.
			g.log.Info("terminating an earlier cell of a pod on a standby cell", "instance", inst.ID, "cell", inst.CellID)
			go g.terminator.terminate(ctx, inst.ID, inst.CellID)
			continue
		}
		if g.cells.add(c) == nil {
			g.log.Info("adopting running cell", "pod", key(pod.Namespace, pod.Name), "cell", c.id, "instance", inst.ID)
			c.start(ctx)
		}
	}
	return nil
}

// collect terminates cells whose pod is gone (virtual-kubelet
// force-deletes pods that never ran without calling DeletePod) and
// instances of this node that no cell owns.
func (g *collector) collect(ctx context.Context) {
	g.pruneLogs()
	for _, c := range g.cells.all() {
		pod, err := g.pods.Pods(c.namespace).Get(c.name)
		if (err == nil && pod.UID != c.uid) || isNotFound(err) {
			c.end(ctx, deletedEnd("pod no longer exists", 0))
		}
	}
	list, err := g.plugin.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		g.log.Warn("listing instances for garbage collection", "error", err)
		return
	}
	g.deps.warm.sync(list.Instances)
	// The pool's first: a standby taken meanwhile is the cell's by then
	// (warmPool.take).
	known := map[string]bool{}
	g.deps.warm.knows(known)
	for id := range g.cells.ids() {
		known[id] = true
	}
	for _, inst := range list.Instances {
		// An instance already on its way out (terminating) needs no
		// second TerminateInstances.
		if inst.Tags[pluginapi.TagNode] != g.nodeName || known[inst.CellID] ||
			inst.State == pluginapi.StateTerminated || inst.State == pluginapi.StateTerminating {
			continue
		}
		g.log.Info("terminating orphaned instance", "instance", inst.ID, "cell", inst.CellID)
		go g.terminator.terminate(ctx, inst.ID, inst.CellID)
	}
}

// pruneLogs removes the kept logs of pods that are gone (deleted while kip
// was down, or never seen by this run) and keeps the rest within
// cells.podLogsMaxTotalBytes.
func (g *collector) pruneLogs() {
	pods, err := g.pods.List(labels.Everything())
	if err != nil {
		g.log.Warn("listing pods for the kept logs", "error", err)
		return
	}
	live := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		live[p.UID] = true
	}
	removed, err := g.deps.logs.prune(func(uid types.UID) bool { return live[uid] })
	if err != nil {
		g.log.Warn("pruning the kept pod logs", "error", err)
	}
	if len(removed) > 0 {
		g.log.Info("removed kept pod logs", "dirs", removed)
	}
}
