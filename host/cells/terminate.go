package cells

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
)

// lost fails the pod because its cell ended under it, and cleans up.
func (c *cell) lost(ctx context.Context, message string) {
	c.mu.Lock()
	if c.interrupted != "" {
		message = "spot interruption: " + message
	}
	evicted := c.evicted != ""
	c.mu.Unlock()
	if evicted {
		// The pod was failed by its eviction already (evict ends the cell).
		c.log().Info("evicted pod's cell ended", "reason", message)
		return
	}
	c.log().Warn("cell lost", "reason", message)
	c.event(corev1.EventTypeWarning, ReasonCellLost, "%s", message)
	c.fail(ctx, ReasonCellLost, message)
}

// fail fails the pod with reason and message (its containers end with
// exit code 137, as on a node that died), and ends the cell.
func (c *cell) fail(ctx context.Context, reason, message string) {
	c.enter(phaseEnding)
	c.setStatus(func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.Reason = reason
		st.Message = message
		for i := range st.ContainerStatuses {
			cs := &st.ContainerStatuses[i]
			if cs.State.Terminated == nil {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reason, Message: message}}
				cs.Ready = false
			}
		}
	})
	// The cell is gone: there is no agent to read the logs from.
	c.d.ending.Go(func() { c.terminate(ctx, 0, message, false) })
}

// finish terminates the cell but keeps the pod's (terminal) status for the
// API until the pod itself is deleted.
func (c *cell) finish(ctx context.Context, reason string) {
	c.keepLogs(ctx)
	c.terminate(ctx, 0, reason, false)
}

// keepLogs reads the logs of the pod's containers from the agent before
// its cell ends (podLogs), so that kubectl logs keeps working until the
// pod is deleted, as on a kubelet. A pod being deleted keeps none: forget
// would remove them, and delete's terminate closes the agent meanwhile
// (a pod that ends because it is deleted, as a DeletePod's SIGTERM ends
// it, would otherwise get a LogsNotKept warning for a connection closing).
func (c *cell) keepLogs(ctx context.Context) {
	c.mu.Lock()
	agent, pod, deleting := c.agent, c.desired.DeepCopy(), c.deleting
	c.mu.Unlock()
	if agent == nil || deleting {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepLogsTimeout)
	defer cancel()
	if err := c.d.logs.save(rctx, agent, pod); err != nil {
		c.mu.Lock()
		deleting = c.deleting
		c.mu.Unlock()
		if deleting {
			c.log().Debug("not keeping the logs of a pod being deleted", "error", err)
			return
		}
		c.log().Warn("keeping the logs of the pod that ended", "error", err)
		c.event(corev1.EventTypeWarning, ReasonLogsNotKept, "the log of a container could not be kept after the pod ended: %s", err)
	}
	c.mu.Lock()
	c.logsKept = true
	c.mu.Unlock()
}

// keepLogsTimeout bounds the reading of an ended pod's logs, which delays
// the end of its cell.
const keepLogsTimeout = 30 * time.Second

// delete terminates the cell within grace and forgets the pod.
func (c *cell) delete(ctx context.Context, grace time.Duration, reason string) {
	c.mu.Lock()
	if c.deleting {
		c.mu.Unlock()
		return
	}
	c.deleting = true
	c.enterLocked(phaseEnding)
	c.mu.Unlock()
	go c.terminate(ctx, grace, reason, true)
}

// terminate stops the pod on the agent within grace, ends the instance
// (also when its Launch is still in flight or its ID was never seen), and,
// if forget, removes the cell from the Manager. It runs to the end when ctx
// ends: ctx only carries values (the cell's own context is among those it
// cancels).
func (c *cell) terminate(ctx context.Context, grace time.Duration, reason string, forget bool) {
	ctx = context.WithoutCancel(ctx)
	c.mu.Lock()
	agent, ended := c.agent, c.phase == phaseEnded
	c.mu.Unlock()
	// A cell that ended (its pod finished, its instance terminated) has
	// nothing left to stop: its agent's connection is closed.
	if agent != nil && grace > 0 && !ended {
		dctx, cancel := context.WithTimeout(ctx, grace+5*time.Second)
		if err := agent.Delete(dctx, grace); err != nil {
			c.log().Warn("stopping the pod on its cell", "error", err)
		}
		cancel()
	}
	c.stop()
	<-c.done
	if agent != nil {
		_ = agent.Close()
	}
	c.mu.Lock()
	inst, id, attempt, unanswered := c.instance, c.id, c.attempt, c.launchUnanswered
	ended = !c.enterLocked(phaseEnded)
	c.mu.Unlock()
	if ended {
		// finish already ended the instance; a later delete only forgets.
		c.log().Info("cell already terminated", "reason", reason)
		if forget {
			c.forget()
		}
		return
	}
	c.event(corev1.EventTypeNormal, ReasonTerminating, "terminating cell %s: %s", id, reason)
	if inst != nil {
		c.d.end.terminate(ctx, inst.ID, id)
	}
	// A Launch whose answer was lost may still have created an instance:
	// find it by cell ID (any cell of the pod: one that never booted
	// was ended when it was given up, but its Terminate may have failed).
	// There is none to find when the cell is the pod's first (attempt 0)
	// and has its instance from a Launch that answered every time it was
	// called (or from adoption or the look-up before launch, which found
	// it): Launch is idempotent on the cell ID, so that ID has no other
	// instance, and the pod no other cell ID. The List is shared with the
	// other cells terminating meanwhile (sharedList).
	if inst == nil || attempt > 0 || unanswered {
		if list, err := c.d.lists.list(ctx, c.d.plugin); err == nil {
			for _, other := range list.Instances {
				if uid, _, ok := cellOf(other.CellID); ok && uid == c.uid && (inst == nil || other.ID != inst.ID) && other.State != pluginapi.StateTerminated {
					c.d.end.terminate(ctx, other.ID, other.CellID)
				}
			}
		}
	}
	c.log().Info("cell terminated", "reason", reason)
	if forget {
		c.forget()
	}
}

// forget drops the cell from the Manager and the logs kept of its pod.
func (c *cell) forget() {
	c.mu.Lock()
	pod := c.desired
	c.mu.Unlock()
	if err := c.d.logs.remove(pod.Namespace, pod.Name, c.uid); err != nil {
		c.log().Warn("forgetting the pod's logs", "error", err)
	}
	c.d.forget(c)
}

// terminatorAPI is the part of the plugin a terminator calls.
type terminatorAPI interface {
	Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error)
}

// terminator ends instances for cells and the collector.
type terminator struct {
	plugin  terminatorAPI
	backoff func(n int) time.Duration
	log     *slog.Logger
	// metrics is told when an instance ended; now is its clock.
	metrics *metrics.Metrics
	now     func() time.Time
}

// terminate ends an instance, retrying transient failures, until it is
// gone or terminating, or ctx ends.
func (t terminator) terminate(ctx context.Context, id, cellID string) {
	for n := 1; ; n++ {
		_, err := t.plugin.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
		if err == nil || pluginapi.IsNotFound(err) {
			if t.now != nil {
				t.metrics.InstanceDown(id, t.now())
			}
			return
		}
		t.log.Warn("terminating instance", "instance", id, "cell", cellID, "attempt", n, "error", err)
		if !sleep(ctx, t.backoff(n)) {
			return
		}
	}
}
