package cells

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
)

// cellEnd is one way a cell ends: its move to phaseEnding (end), and
// what the end does besides stopping the cell's goroutine and ending its
// instance (terminate). The ways: failedEnd (the instance was lost, or no
// cell of the pod booted), finishedEnd (the pod ended on its own),
// evictedEnd (a spot interruption) and deletedEnd (the pod was deleted);
// a rejected pod's cell, which has no instance, has ended from the start
// (reject).
type cellEnd struct {
	// reason is said in the TerminatingCell event and the log.
	reason string
	// status, if set, is how the end changes the pod's status.
	status func(*corev1.PodStatus)
	// stop: the pod is stopped on its agent within grace first.
	stop  bool
	grace time.Duration
	// keepLogs: the pod's logs are read from its agent before the cell
	// ends (keepLogs).
	keepLogs bool
	// deleted: the pod was deleted. The cell ends once however often it
	// is deleted, and is forgotten, with the logs kept of its pod.
	deleted bool
}

// failedEnd fails the pod with reason and message: its containers end
// with exit code 137, as on a node that died, and there is no agent to
// read their logs from.
func failedEnd(reason, message string) cellEnd {
	return cellEnd{reason: message, status: func(st *corev1.PodStatus) {
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
	}}
}

// finishedEnd ends the cell of a pod that ended on its own (phase): its
// logs are kept, and its terminal status until the pod is deleted.
func finishedEnd(phase corev1.PodPhase) cellEnd {
	return cellEnd{reason: fmt.Sprintf("pod %s", phase), keepLogs: true}
}

// evictedEnd ends the cell of a pod evicted for a spot interruption
// (interrupt.go): Failed at once (evictedStatus), its containers stopped
// within grace, their logs kept.
func evictedEnd(message string, grace time.Duration) cellEnd {
	return cellEnd{reason: "spot interruption", status: func(st *corev1.PodStatus) { evictedStatus(st, message) },
		stop: true, grace: grace, keepLogs: true}
}

// deletedEnd ends the cell of a pod deleted (reason says by whom): its
// containers are stopped within grace (none: not stopped), and the cell is
// forgotten.
func deletedEnd(reason string, grace time.Duration) cellEnd {
	return cellEnd{reason: reason, stop: grace > 0, grace: grace, deleted: true}
}

// end moves the cell to phaseEnding the way e says, sets the pod's status
// the end gives it, and ends the cell in the background (terminate: the
// cell's own goroutine may be the one ending it, and terminate waits for
// it). Manager.Run waits for every end but a deletion's, as it always
// has: a deleted pod's termination carries on on its own.
func (c *cell) end(ctx context.Context, e cellEnd) {
	c.mu.Lock()
	switch {
	case e.deleted && c.deleting:
		c.mu.Unlock()
		return
	case e.deleted:
		c.deleting = true
	case c.phase == phaseEnding || c.phase == phaseEnded:
		// An end under way (the pod's deletion, which stops its
		// containers: they then finish) ends the cell once; a second
		// would race it to the agent it closes.
		c.mu.Unlock()
		return
	}
	c.enterLocked(phaseEnding)
	c.mu.Unlock()
	if e.status != nil {
		c.setStatus(e.status)
	}
	if e.deleted {
		go c.terminate(ctx, e)
		return
	}
	c.d.terminating.Go(func() { c.terminate(ctx, e) })
}

// lost ends the cell whose instance ended, disappeared or cannot be
// reached under its pod (message says how): the pod fails with reason
// CellLost, its message naming a spot interruption if one came. A pod
// evicted for that interruption has failed already, and its cell is
// ending (evictedEnd).
func (c *cell) lost(ctx context.Context, message string) {
	c.mu.Lock()
	if c.interrupted != "" {
		message = "spot interruption: " + message
	}
	evicted := c.evicted != ""
	c.mu.Unlock()
	if evicted {
		c.log().Info("evicted pod's cell ended", "reason", message)
		return
	}
	c.log().Warn("cell lost", "reason", message)
	c.event(corev1.EventTypeWarning, ReasonCellLost, "%s", message)
	c.end(ctx, failedEnd(ReasonCellLost, message))
}

// keepLogs reads the logs of the pod's containers from the agent before
// its cell ends (podLogs), so that kubectl logs keeps working until the
// pod is deleted, as on a kubelet. A pod being deleted keeps none: its
// end would remove them, and closes the agent meanwhile (a pod that ends
// because it is deleted, as a DeletePod's SIGTERM ends it, would
// otherwise get a LogsNotKept warning for a connection closing).
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

// terminate is the work of a cell's end (e): it stops the pod on the
// agent within e's grace and keeps its logs, if e says so, stops the
// cell's goroutine, ends the instance (also when its Launch is still in
// flight or its ID was never seen) and moves the cell to phaseEnded, and,
// for a deleted pod, forgets the cell. A cell ended before is not ended
// again: a pod that finished and is then deleted costs one Terminate, not
// two. It runs to the end when ctx ends: ctx only carries values (the
// cell's own context is among those it cancels).
func (c *cell) terminate(ctx context.Context, e cellEnd) {
	ctx = context.WithoutCancel(ctx)
	if e.deleted {
		defer func() {
			// The pod is gone: so are its cell and the logs kept of it.
			if err := c.d.logs.remove(c.namespace, c.name, c.uid); err != nil {
				c.log().Warn("forgetting the pod's logs", "error", err)
			}
			c.d.forget(c)
		}()
	}
	c.mu.Lock()
	agent, ended := c.agent, c.phase == phaseEnded
	c.mu.Unlock()
	// A cell that ended (its pod finished, its instance terminated) has
	// nothing left to stop: its agent's connection is closed.
	if agent != nil && e.stop && !ended {
		dctx, cancel := context.WithTimeout(ctx, e.grace+5*time.Second)
		if err := agent.Delete(dctx, e.grace); err != nil {
			c.log().Warn("stopping the pod on its cell", "error", err)
		}
		cancel()
	}
	if e.keepLogs {
		c.keepLogs(ctx)
	}
	if agent != nil && !e.stop && !ended && c.mayHaveDisks(ctx) {
		// A pod deleted at once, or one that finished, is not stopped
		// within a grace period, but its disks must be unmounted for
		// them to detach: the agent's DeletePod (grace 0; after the
		// logs are kept) does that, as a kubelet unmounts a force-deleted
		// pod's volumes.
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := agent.Delete(dctx, 0); err != nil {
			c.log().Warn("unmounting the pod's disks on its cell", "error", err)
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
		// An earlier end ended the instance; a deletion only forgets.
		c.log().Info("cell already terminated", "reason", e.reason)
		return
	}
	if inst != nil && c.mayHaveDisks(ctx) {
		// Detached before the instance goes, so that the pod's next
		// cell (a StatefulSet's) can attach them at once.
		c.detachDisks(ctx, inst.ID)
	}
	c.event(corev1.EventTypeNormal, ReasonTerminating, "terminating cell %s: %s", id, e.reason)
	if inst != nil {
		c.d.terminator.terminate(ctx, inst.ID, id)
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
					c.d.terminator.terminate(ctx, other.ID, other.CellID)
				}
			}
		}
	}
	c.log().Info("cell terminated", "reason", e.reason)
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
