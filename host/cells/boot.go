package cells

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
)

// waitRunning waits until the instance runs and has an address, using the
// plugin's Describe with backoff (the plugin's WatchEvents, where offered,
// only shortens the waits).
func (c *cell) waitRunning(ctx context.Context, inst *pluginapi.Instance) (*pluginapi.Instance, error) {
	deadline := c.d.cfg.Now().Add(c.d.cfg.BootTimeout)
	for n := 1; ; n++ {
		if inst.State == pluginapi.StateRunning && inst.PrivateAddress() != "" {
			return inst, nil
		}
		if inst.State == pluginapi.StateTerminated || inst.State == pluginapi.StateTerminating {
			c.lost(ctx, fmt.Sprintf("cell %s ended while booting: %s", c.id, stateText(inst)))
			return nil, errDeleted
		}
		if c.d.cfg.Now().After(deadline) {
			c.lost(ctx, fmt.Sprintf("cell %s did not boot within %s (state %s)", c.id, c.d.cfg.BootTimeout, inst.State))
			return nil, errDeleted
		}
		// Poll, or look at once when the plugin's events say it runs.
		wait := min(c.d.cfg.Backoff(n), c.d.cfg.BootPoll)
		if c.d.watching() {
			wait = c.d.cfg.BootPollWatched
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
		// Shared with the other cells looking at once (sharedDescribe):
		// one poll of the event watch wakes many.
		got, err := c.d.describes.describe(ctx, c.d.plugin, inst.ID)
		switch {
		case err != nil:
			c.log().Warn("describing cell", "instance", inst.ID, "error", err)
		case got == nil:
			// Eventual consistency right after launch: give it a while.
			if n > 20 {
				c.lost(ctx, fmt.Sprintf("cell %s (instance %s) disappeared while booting", c.id, inst.ID))
				return nil, errDeleted
			}
		default:
			inst = got
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

// errDeleted ends a cell's run once its cell is lost: the pod has failed
// and the cell is being terminated.
var errDeleted = errors.New("cell deleted")

// serveWithin serves the cell (serve) and gives its agent
// Config.AgentTimeout, from now (the instance runs), to answer: the first
// answer (the cluster's services taken, or the pod applied) ends the wait;
// whatever keeps it from answering (an image that never starts it, a
// security group, a join the host refuses) ends up here. It reports false
// when the time passed first: serving was given up, and the caller decides
// what comes next (bootFailed). It reports true once serve returned for any
// other reason (the pod ended or was deleted, ctx ended).
//
// A cell adopted after a restart of kip whose pod has started (the API
// server has its StartTime, which kip sets from the agent's first status)
// booted long ago: no deadline applies, and an agent silent now is the
// business of serve, which finds a lost instance, never a reason to launch
// the running pod again somewhere else.
func (c *cell) serveWithin(ctx context.Context, inst *pluginapi.Instance) bool {
	c.mu.Lock()
	booted := c.adopted != nil && c.status.StartTime != nil
	c.mu.Unlock()
	if booted {
		c.serve(ctx, inst)
		return true
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan struct{})
	c.mu.Lock()
	c.answered = answered
	c.mu.Unlock()
	silent := make(chan struct{})
	go func() {
		t := time.NewTimer(c.d.cfg.AgentTimeout)
		defer t.Stop()
		select {
		case <-answered:
		case <-sctx.Done():
		case <-t.C:
			c.mu.Lock()
			late := c.answered == nil // it answered as the time ran out
			c.answered = nil
			c.mu.Unlock()
			if !late {
				close(silent)
				cancel()
			}
		}
	}()
	c.serve(sctx, inst)
	cancel()
	select {
	case <-silent:
		return ctx.Err() != nil
	default:
		return true
	}
}

// agentAnswered ends serveWithin's wait: the agent answered.
func (c *cell) agentAnswered() {
	c.mu.Lock()
	if c.answered != nil {
		close(c.answered)
		c.answered = nil
	}
	c.connected = true
	c.mu.Unlock()
	c.agentConnected()
}

// bootFailed handles an instance that ran but whose agent never answered:
// it reads the instance's console output (where the plugin offers it),
// then either fails the pod with reason CellBootFailed (restartPolicy
// Never, or the pod's Config.BootAttempts cells are used up) and ends the
// cell, or terminates the instance, waits Config.BootRetry (doubling with
// each attempt) and moves the cell to its next cell ID, for the caller to
// launch again. A cell ID names one instance for good (the plugin
// contract), so the next launch needs a new one; it is derived from the
// pod UID and the attempt (cellIDAttempt), so that a restarted kip adopts
// whichever cell is the pod's newest (collector.adopt). It reports whether
// to launch again.
func (c *cell) bootFailed(ctx context.Context, inst *pluginapi.Instance) bool {
	c.mu.Lock()
	id, attempt := c.id, c.attempt
	never := c.desired.Spec.RestartPolicy == corev1.RestartPolicyNever
	agent := c.agent
	c.agent = nil
	c.mu.Unlock()
	if agent != nil {
		_ = agent.Close()
	}
	msg := fmt.Sprintf("the agent of cell %s (instance %s) did not answer within %s of the instance running",
		id, inst.ID, c.d.cfg.AgentTimeout)
	console := c.consoleTail(ctx, inst.ID)
	c.log().Warn("cell agent never answered", "instance", inst.ID, "attempt", attempt+1, "console", console)
	if console != "" {
		console = "; its console output ends:\n" + console
	}
	if never || attempt+1 >= c.d.cfg.BootAttempts {
		why := "the pod's restartPolicy is Never"
		if !never {
			why = fmt.Sprintf("the pod had %d cells, none of which booted", attempt+1)
		}
		c.event(corev1.EventTypeWarning, ReasonCellBootFailed, "%s; terminating it and failing the pod (%s)%s", msg, why, console)
		c.fail(ctx, ReasonCellBootFailed, fmt.Sprintf("%s (%s)", msg, why))
		return false
	}
	wait := min(c.d.cfg.BootRetry<<min(attempt, 10), 30*time.Minute)
	next := cellIDAttempt(c.uid, attempt+1)
	c.event(corev1.EventTypeWarning, ReasonCellBootFailed, "%s; terminating it and launching cell %s in %s (attempt %d of %d)%s",
		msg, next, wait, attempt+2, c.d.cfg.BootAttempts, console)
	c.d.end.terminate(ctx, inst.ID, id)
	if ctx.Err() != nil {
		return false // the cell is being deleted; its terminate ends the instance
	}
	c.mu.Lock()
	c.setID(next, attempt+1)
	c.instance, c.placed, c.adopted = nil, nil, nil
	c.mu.Unlock()
	c.waiting("ContainerCreating", fmt.Sprintf("%s; launching cell %s in %s", msg, next, wait))
	return sleep(ctx, wait)
}

// consoleLines and consoleBytes bound the console output a
// CellBootFailed event carries: its last lines.
const (
	consoleLines = 20
	consoleBytes = 2048
)

// consoleTail is the end of the instance's console output, or "" when the
// plugin does not offer it (capability console-output) or has none.
func (c *cell) consoleTail(ctx context.Context, instanceID string) string {
	if !c.d.placement.catalog.hasCapability(ctx, pluginapi.CapabilityConsoleOutput) {
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.d.plugin.ConsoleOutput(rctx, &pluginapi.ConsoleOutputRequest{InstanceID: instanceID})
	if err != nil {
		c.log().Warn("reading the console output of a cell that did not boot", "instance", instanceID, "error", err)
		return ""
	}
	return lastLines(resp.Output, consoleLines, consoleBytes)
}

// lastLines is the last n lines of s, at most limit bytes of them (cut at
// a line's start where it can be), without trailing blank lines.
func lastLines(s string, n, limit int) string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n \t")
	lines := strings.Split(s, "\n")
	lines = lines[max(0, len(lines)-n):]
	out := strings.Join(lines, "\n")
	for len(out) > limit && len(lines) > 1 {
		lines = lines[1:]
		out = strings.Join(lines, "\n")
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
