package cells

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/pluginapi"
)

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
	boot, err := c.d.identity.Bootstrap(c.id, c.d.cfg.ClusterID, c.d.cfg.NodeName, string(c.uid), c.d.cfg.JoinTokenTTL)
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
	c.launchedAt = c.d.cfg.Now()
	c.mu.Unlock()
	lastMsg := ""
	for n := 1; ; n++ {
		c.mu.Lock()
		pod := c.desired.DeepCopy()
		c.mu.Unlock()
		opts, err := podLaunchOptions(pod)
		if err != nil {
			c.refused(fmt.Sprintf("launching cell %s: %v", c.id, err), &lastMsg)
			if !c.waitChange(ctx, c.d.cfg.RematchInterval) {
				return nil, ctx.Err()
			}
			continue
		}
		cands, err := c.d.placement.rank(ctx, pod)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case match.IsUnsatisfiable(err):
			c.unplaceable(err.Error(), &lastMsg)
			if !c.waitChange(ctx, c.d.cfg.RematchInterval) {
				return nil, ctx.Err()
			}
			continue
		case err != nil:
			msg := fmt.Sprintf("matching an instance type: %v", err)
			c.refused(msg, &lastMsg)
			c.log.Warn("ranking instance types", "attempt", n, "error", err)
			if !sleep(ctx, c.d.cfg.Backoff(n)) {
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
			CellID: c.id, NodeName: c.d.cfg.NodeName, PodUID: string(c.uid), PodNamespace: c.namespace, PodName: c.name,
			InstanceType: cand.InstanceType, CapacityType: cand.CapacityType, Image: c.d.cfg.Image, Bootstrap: bootstrap,
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
			resp, err := c.d.plugin.Launch(ctx, req)
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
				c.d.placement.markUnavailable(cand)
				c.log.Info("no capacity for an offering; trying the next", "type", cand.InstanceType, "zone", cand.Zone,
					"capacity_type", cand.CapacityType, "error", err)
				c.event(corev1.EventTypeWarning, ReasonInsufficientCapacity, "%s: %v; trying the next offering", what, err)
				break
			}
			wait := c.d.cfg.Backoff(n)
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
			c.waitChange(ctx, max(wait, c.d.cfg.RefusedRetry))
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

// unplaceable reports a pod nothing fits: Pending, a status reason and
// message, and a warning event, once per distinct message.
func (c *cell) unplaceable(message string, last *string) {
	if message == *last {
		return
	}
	*last = message
	c.log.Info("no instance type fits the pod", "reason", message)
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Reason, st.Message = ReasonNoInstanceType, message
		st.ContainerStatuses = waitingStatuses(c.desired.Spec.Containers, ReasonNoInstanceType, message)
		st.InitContainerStatuses = waitingStatuses(c.desired.Spec.InitContainers, ReasonNoInstanceType, message)
	})
	c.event(corev1.EventTypeWarning, ReasonNoInstanceType, "%s", message)
}

// waitChange waits until the pod changes, d passes, or ctx ends (false).
func (c *cell) waitChange(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.applyCh:
		return true
	case <-t.C:
		return true
	}
}
