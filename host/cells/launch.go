package cells

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// launch starts the instance (or, for an adopted cell, takes the one that
// exists). The pod's requirements are ranked against the plugin's catalog
// and the first candidate launched; on InsufficientCapacity the offering is
// marked unavailable and the next one tried, and so on a quota that says
// what it covers (every offering it covers). A pod nothing fits stays
// Pending with an event saying why and is matched again when it changes or
// after RematchInterval. Transient failures are retried with backoff; a
// request the plugin refuses leaves the pod Pending with an event saying
// why, and is retried slowly, since capacity and quotas change (after
// RefusedRetry), or, when the refusal is for good until someone changes
// something (InvalidConfig, Unsupported), ever more slowly: the wait
// doubles from RefusedRetry to refusedRetryMax, and starts again when the
// pod changes. Such a pod is not failed: a kubelet keeps a pod whose
// configuration it cannot use Pending (CreateContainerConfigError) and
// cluster-autoscaler backs off a node group that fails to scale up, and a
// failed pod of a Deployment would only make its ReplicaSet create the
// next one, which fails the same way.
//
// Before it launches anywhere, the cell is looked up by its cell ID
// (existing): an instance a Launch created whose answer never arrived (a
// crash, a restart in between) is taken, not launched a second time
// elsewhere when the placement has changed meanwhile.
func (c *cell) launch(ctx context.Context) (*pluginapi.Instance, error) {
	if c.adopted != nil {
		c.mu.Lock()
		c.instance = c.adopted
		annotations := c.desired.Annotations
		c.mu.Unlock()
		c.instanceUp(c.adopted.ID, annotations)
		return c.adopted, nil
	}
	bootstrap, issued, err := c.bootstrap(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.launchedAt = c.d.cfg.Now()
	c.mu.Unlock()
	lastMsg := ""
	var refusals int // launches refused for good in a row (refusalWait)
	for n := 1; ; n++ {
		c.mu.Lock()
		pod := c.desired.DeepCopy()
		c.mu.Unlock()
		opts, err := podLaunchOptions(pod)
		if err != nil {
			c.refused(fmt.Sprintf("launching cell %s: %v", c.id, err), &lastMsg)
			if c.waitChange(ctx, c.d.cfg.RematchInterval) == cancelled {
				return nil, ctx.Err()
			}
			continue
		}
		zones, ok := c.placeDisks(ctx, pod, n, &lastMsg)
		if !ok {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		cands, err := c.d.placement.rank(ctx, pod, opts, zones...)
		if err == nil {
			cands, err = c.withoutRefusedTypes(cands)
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case match.IsUnsatisfiable(err), choices.IsForbidden(err):
			reason := ReasonNoInstanceType
			if choices.IsForbidden(err) {
				reason = choices.ReasonChoiceForbidden
			}
			c.unplaceable(reason, err.Error(), &lastMsg)
			if c.waitChange(ctx, c.d.cfg.RematchInterval) == cancelled {
				return nil, ctx.Err()
			}
			continue
		case err != nil:
			msg := fmt.Sprintf("matching an instance type: %v", err)
			c.refused(msg, &lastMsg)
			c.log().Warn("ranking instance types", "attempt", n, "error", err)
			if !sleep(ctx, c.d.cfg.Backoff(n)) {
				return nil, ctx.Err()
			}
			continue
		}
		n = 0
		if inst := c.takeWarm(cands, opts); inst != nil {
			return inst, nil
		}
		if c.d.cfg.Now().Sub(issued) > c.d.cfg.JoinTokenTTL/2 {
			// The token would not last the boot: launch with a fresh one.
			if bootstrap, issued, err = c.bootstrap(ctx); err != nil {
				return nil, err
			}
		}
		if inst := c.launchFirst(ctx, cands, opts, bootstrap, &lastMsg, &refusals); inst != nil {
			return inst, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// placeDisks resolves the pod's disks before it is placed, and returns
// the zone constraints of the node and of its disks. A volume that
// cannot be had leaves the pod Pending with FailedAttachVolume (or the
// kubelet's FailedMount, diskEvent) until it
// changes or Config.RematchInterval passes; a transient failure waits
// out the back-off. Either way it reports false, and the caller starts
// over.
func (c *cell) placeDisks(ctx context.Context, pod *corev1.Pod, n int, lastMsg *string) ([]zoneConstraint, bool) {
	var zones []zoneConstraint
	if c.d.cfg.Zone != "" {
		zones = append(zones, zoneConstraint{zones: []string{c.d.cfg.Zone}, source: "the node's zone (node.zone)"})
	}
	disks, err := c.resolveDisks(ctx, pod)
	var verr *volumes.Error
	switch {
	case err == nil:
		c.mu.Lock()
		c.disks = disks
		c.mu.Unlock()
		return append(zones, diskZones(disks)...), true
	case ctx.Err() != nil:
		return nil, false
	case errors.As(err, &verr):
		c.unplaceable(diskEvent(verr), verr.Error(), lastMsg)
		c.waitChange(ctx, c.d.cfg.RematchInterval)
	default:
		c.log().Warn("resolving the pod's volumes", "attempt", n, "error", err)
		sleep(ctx, c.d.cfg.Backoff(n))
	}
	return nil, false
}

// earlier reports whether Launch answered an instance other than the
// candidate asked for: the cell's own, from an earlier launch elsewhere.
func earlier(inst pluginapi.Instance, cand match.Candidate) bool {
	return inst.InstanceType != "" && inst.InstanceType != cand.InstanceType ||
		inst.CapacityType != "" && inst.CapacityType != cand.CapacityType
}

// bootstrap returns the cell's bootstrap document with a fresh join token
// and when it was issued. A failure to issue it is said on the pod and
// ends the cell's run (it returns when ctx ends).
func (c *cell) bootstrap(ctx context.Context) ([]byte, time.Time, error) {
	issued := c.d.cfg.Now()
	boot, err := c.d.identity.Bootstrap(c.id, c.d.cfg.ClusterID, c.d.cfg.NodeName, string(c.uid), c.d.cfg.JoinTokenTTL)
	if err == nil {
		var data []byte
		if data, err = boot.Marshal(); err == nil {
			return data, issued, nil
		}
	}
	c.log().Error("issuing cell identity", "error", err)
	c.event(corev1.EventTypeWarning, ReasonLaunchFailed, "issuing the cell's bootstrap: %v", err)
	<-ctx.Done()
	return nil, time.Time{}, ctx.Err()
}

// launchFirst launches the first candidate that has capacity. It returns
// nil when every candidate ran out of capacity or quota (they are then
// marked unavailable), or the plugin refused a launch (reported on the
// pod, after a slow back-off), so that the caller ranks again.
func (c *cell) launchFirst(ctx context.Context, cands []match.Candidate, opts launchOptions, bootstrap []byte, lastMsg *string, refusals *int) *pluginapi.Instance {
	for _, cand := range cands {
		if c.d.placement.isUnavailable(cand.InstanceType, cand.Zone, cand.CapacityType) {
			continue // a quota met on an earlier candidate covers it
		}
		inst, err := c.existing(ctx)
		if err != nil {
			// Without knowing whether the cell has an instance, none is
			// launched.
			c.log().Warn("looking the cell up before launching it", "error", err)
			sleep(ctx, c.d.cfg.Backoff(1))
			return nil
		}
		if inst != nil {
			c.mu.Lock()
			c.instance = inst
			c.placed = placedAnnotations(match.Candidate{InstanceType: inst.InstanceType, CapacityType: inst.CapacityType}, inst.Zone)
			placed := c.placed
			c.mu.Unlock()
			c.instanceUp(inst.ID, placed)
			c.log().Info("cell found launched; taking its instance", "instance", inst.ID, "type", inst.InstanceType, "zone", inst.Zone)
			return inst
		}
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
		c.enter(phaseLaunching)
		c.launchIssued()
		inst, backoff, err := c.d.launchInstance(ctx, c.log(), req, cand, func() {
			c.mu.Lock()
			c.launchUnanswered = true
			c.mu.Unlock()
		})
		if err == nil {
			placed := cand
			if earlier(*inst, cand) {
				// The cell's instance from a launch whose answer was lost,
				// placed otherwise (Launch is idempotent on the cell ID).
				placed = match.Candidate{InstanceType: inst.InstanceType, CapacityType: inst.CapacityType}
				c.log().Info("the cell was launched before, elsewhere; taking that instance", "instance", inst.ID,
					"type", inst.InstanceType, "capacity_type", inst.CapacityType, "asked", cand.InstanceType)
			}
			c.mu.Lock()
			c.instance = inst
			c.placed = placedAnnotations(placed, inst.Zone)
			annotations := c.placed
			c.mu.Unlock()
			c.instanceUp(inst.ID, annotations)
			c.log().Info("cell launched", "instance", inst.ID, "type", placed.InstanceType, "zone", inst.Zone,
				"capacity_type", placed.CapacityType, "price", priceText(placed))
			return inst
		}
		if ctx.Err() != nil {
			return nil
		}
		var quota *pluginapi.QuotaExceededError
		switch {
		case pluginapi.IsInsufficientCapacity(err):
			c.d.metrics.CapacityFallback(metrics.FallbackInsufficientCapacity)
			c.log().Info("no capacity for an offering; trying the next", "type", cand.InstanceType, "zone", cand.Zone,
				"capacity_type", cand.CapacityType, "error", err)
			c.event(corev1.EventTypeWarning, ReasonInsufficientCapacity, "%s: %v; trying the next offering", what, err)
			continue
		case errors.As(err, &quota) && quota.Scoped():
			c.d.metrics.CapacityFallback(metrics.FallbackQuotaExceeded)
			c.log().Info("an account quota covers the offering; trying the next", "type", cand.InstanceType, "zone", cand.Zone,
				"capacity_type", cand.CapacityType, "quota_types", len(quota.InstanceTypes), "quota_capacity_type", quota.CapacityType, "error", err)
			c.event(corev1.EventTypeWarning, ReasonQuotaExceeded, "%s: %v; skipping the offerings the quota covers for %s and trying the next",
				what, err, c.d.cfg.UnavailableTTL)
			continue
		}
		// Refused: say why on the pod, then rank again slowly; a
		// refusal for good ever more slowly, until the pod changes.
		msg := fmt.Sprintf("launching cell %s on %s: %v", c.id, what, err)
		wait := max(backoff, c.d.cfg.RefusedRetry)
		if pluginapi.IsInvalidConfig(err) || pluginapi.IsUnsupported(err) {
			wait = refusalWait(c.d.cfg.RefusedRetry, *refusals)
			*refusals++
			msg += fmt.Sprintf(" (refused until the configuration changes; trying again in %s or when the pod changes)", wait)
		}
		c.refused(msg, lastMsg)
		if c.waitChange(ctx, wait) == changed {
			*refusals = 0
		}
		return nil
	}
	return nil
}

// launchInstance is the launch step of every cell, a pod's and a
// standby's: the plugin's Launch of req, on the offering cand the caller
// chose, called again after retryWait while it answers a transient or
// throttled error. It returns the instance launched, or the error it does
// not retry: ctx's once ctx ended, else the plugin's own, unwrapped, for
// the caller to say in its words. An offering out of capacity, or covered
// by a quota that says what it covers (offeringUnavailable), is marked
// unavailable for Config.UnavailableTTL before its error returns, so that
// no cell launches it meanwhile; what comes next (the next candidate, a
// back-off) is the caller's. unanswered, if set, is called on every
// error: a Launch that failed may have created an instance all the same
// (a lost answer, a timeout, a cancellation). backoff is the wait a retry
// of the error returned would have had (retryWait), where a caller's
// slower back-off starts.
func (d *cellDeps) launchInstance(ctx context.Context, log *slog.Logger, req *pluginapi.LaunchRequest, cand match.Candidate,
	unanswered func(),
) (inst *pluginapi.Instance, backoff time.Duration, err error) {
	for n := 1; ; n++ {
		log.Info("launch issued", "type", cand.InstanceType, "zone", cand.Zone, "capacity_type", cand.CapacityType, "attempt", n)
		resp, err := d.plugin.Launch(ctx, req)
		if err == nil {
			return &resp.Instance, 0, nil
		}
		if unanswered != nil {
			unanswered()
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		var quota *pluginapi.QuotaExceededError
		switch {
		case pluginapi.IsInsufficientCapacity(err):
			d.placement.markUnavailable(cand)
			return nil, 0, err
		case errors.As(err, &quota) && quota.Scoped():
			d.placement.markQuota(quota)
			return nil, 0, err
		}
		wait := d.retryWait(n, err)
		log.Warn("launching cell", "attempt", n, "type", cand.InstanceType, "error", err, "retry_in", wait)
		if !pluginapi.IsTransient(err) && !pluginapi.IsThrottled(err) {
			return nil, wait, err
		}
		if !sleep(ctx, wait) {
			return nil, 0, ctx.Err()
		}
	}
}

// offeringUnavailable reports whether err is a launch's answer that marks
// its offering unavailable (launchInstance): no capacity, or a quota that
// says what it covers.
func offeringUnavailable(err error) bool {
	var quota *pluginapi.QuotaExceededError
	return pluginapi.IsInsufficientCapacity(err) || errors.As(err, &quota) && quota.Scoped()
}

// retryWait is the wait before launch attempt n+1 after err: the
// backoff, or longer when the plugin said when to come back
// (ThrottledError.RetryAfter).
func (d *cellDeps) retryWait(n int, err error) time.Duration {
	wait := d.cfg.Backoff(n)
	var throttled *pluginapi.ThrottledError
	if errors.As(err, &throttled) && throttled.RetryAfter > wait {
		wait = throttled.RetryAfter
	}
	return wait
}

// refusedRetryMax bounds the wait after launches refused for good
// (cluster-autoscaler's longest node-group back-off).
const refusedRetryMax = 30 * time.Minute

// refusalWait is the wait after the n+1st launch in a row refused for good:
// first doubling from first to refusedRetryMax.
func refusalWait(first time.Duration, n int) time.Duration {
	return min(first<<min(n, 16), refusedRetryMax)
}

// existing is the cell's instance if one exists already (it is neither
// terminated nor terminating): a Launch whose answer was lost created it.
// A Launch elsewhere (another type, zone or capacity type) would reuse
// the cell's idempotency key with other parameters, which the cloud
// refuses (EC2: IdempotentParameterMismatch) or, for a plugin whose key
// does not carry over, would start a second instance for the cell. The
// List is shared with the other cells looking themselves up meanwhile
// (sharedList: one that started after this call), so that a burst of
// launches costs a few Lists, not one per cell.
func (c *cell) existing(ctx context.Context) (*pluginapi.Instance, error) {
	list, err := c.d.lists.list(ctx, c.d.plugin)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	for i := range list.Instances {
		inst := &list.Instances[i]
		if inst.CellID == c.id && inst.State != pluginapi.StateTerminated && inst.State != pluginapi.StateTerminating {
			return inst, nil
		}
	}
	return nil, nil
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

// unplaceable reports a pod nothing fits (ReasonNoInstanceType) or whose
// choices are not its to make (choices.ReasonChoiceForbidden): Pending,
// the status reason and message, and a warning event, once per distinct
// message.
func (c *cell) unplaceable(reason, message string, last *string) {
	if message == *last {
		return
	}
	*last = message
	c.log().Info("no instance type for the pod", "reason", reason, "message", message)
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Reason, st.Message = reason, message
		st.ContainerStatuses = waitingStatuses(c.desired.Spec.Containers, reason, message)
		st.InitContainerStatuses = waitingStatuses(c.desired.Spec.InitContainers, reason, message)
	})
	c.event(corev1.EventTypeWarning, reason, "%s", message)
}

// waitChange waits until the pod changes, d passes, or ctx ends, and says
// which.
func (c *cell) waitChange(ctx context.Context, d time.Duration) waited {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return cancelled
	case <-c.applyCh:
		return changed
	case <-t.C:
		return timedOut
	}
}

// waited is how waitChange ended.
type waited int

const (
	cancelled waited = iota // ctx ended
	changed                 // the pod changed
	timedOut                // the wait passed
)
