package cells

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/pluginapi"
)

// waitRunning waits until the instance runs and has an address
// (awaitRunning, the step a standby's boot takes too), keeping what it
// learns of the instance as the cell's. An instance that ended,
// disappeared or did not boot in time is the cell lost: the pod fails
// (lost) and errDeleted returns.
func (c *cell) waitRunning(ctx context.Context, inst *pluginapi.Instance) (*pluginapi.Instance, error) {
	inst, err := c.d.awaitRunning(ctx, c.log(), c.id, inst, c.booted, func(got *pluginapi.Instance) {
		c.mu.Lock()
		c.instance = got
		c.enterLocked(bootingPhase(got))
		c.mu.Unlock()
	})
	var gaveUp *bootError
	if errors.As(err, &gaveUp) {
		c.lost(ctx, gaveUp.msg)
		return nil, errDeleted
	}
	return inst, err
}

// vanishLooks is how many looks at a booting instance may not find it
// (a cloud's eventual consistency right after a launch) before it is
// taken to have disappeared.
const vanishLooks = 20

// bootError is why an instance will not boot: it ended, it disappeared,
// or it did not run within Config.BootTimeout. Its message is said on the
// pod of a pod's cell (lost).
type bootError struct{ msg string }

func (e *bootError) Error() string { return e.msg }

// awaitRunning is the boot-wait step of every cell, a pod's and a
// standby's: it waits until inst runs and has an address, and returns it.
// It looks with the plugin's Describe, shared with the other booting
// cells (sharedDescribe: one poll of the event watch wakes many), after a
// back-off of at most Config.BootPoll, or Config.BootPollWatched while
// the plugin's event stream is up, whose running event ends the wait
// early (woken); seen is told of every newer look at the instance. It
// gives up with a *bootError when the instance ended, when a look after
// the vanishLooks-th still does not find it (it disappeared), or once
// Config.BootTimeout has passed; it returns ctx's error when ctx ends.
func (d *cellDeps) awaitRunning(ctx context.Context, log *slog.Logger, cellID string, inst *pluginapi.Instance,
	woken <-chan struct{}, seen func(*pluginapi.Instance),
) (*pluginapi.Instance, error) {
	deadline := d.now().Add(d.cfg.BootTimeout)
	for n := 1; ; n++ {
		if inst.State == pluginapi.StateRunning && inst.PrivateAddress() != "" {
			return inst, nil
		}
		if inst.State == pluginapi.StateTerminated || inst.State == pluginapi.StateTerminating {
			return nil, &bootError{fmt.Sprintf("cell %s ended while booting: %s", cellID, stateText(inst))}
		}
		if d.now().After(deadline) {
			return nil, &bootError{fmt.Sprintf("cell %s did not boot within %s (state %s)", cellID, d.cfg.BootTimeout, inst.State)}
		}
		// Poll, or look at once when the plugin's events say it runs.
		wait := min(d.cfg.Backoff(n), d.cfg.BootPoll)
		if d.watching() {
			wait = d.cfg.BootPollWatched
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-woken:
			t.Stop()
		case <-t.C:
		}
		got, err := d.describes.describe(ctx, d.plugin, inst.ID)
		switch {
		case err != nil:
			log.Warn("describing cell", "instance", inst.ID, "error", err)
		case got == nil:
			// Eventual consistency right after launch: give it a while.
			if n > vanishLooks {
				return nil, &bootError{fmt.Sprintf("cell %s (instance %s) disappeared while booting", cellID, inst.ID)}
			}
		default:
			inst = got
			seen(inst)
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
	c.enterLocked(phaseRunning)
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
	// The cells given up for a disk's type (disktype.go) booted: they
	// count for the cell ID, not among the boot failures.
	failures := attempt - c.typeRefusals.replaced
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
	c.log().Warn("cell agent never answered", "instance", inst.ID, "attempt", failures+1, "console", console)
	if console != "" {
		console = "; its console output ends:\n" + console
	}
	if never || failures+1 >= c.d.cfg.BootAttempts {
		why := "the pod's restartPolicy is Never"
		if !never {
			why = fmt.Sprintf("the pod had %d cells, none of which booted", failures+1)
		}
		c.event(corev1.EventTypeWarning, ReasonCellBootFailed, "%s; terminating it and failing the pod (%s)%s", msg, why, console)
		c.end(ctx, failedEnd(ReasonCellBootFailed, fmt.Sprintf("%s (%s)", msg, why)))
		return false
	}
	wait := min(c.d.cfg.BootRetry<<min(failures, 10), 30*time.Minute)
	next := cellIDAttempt(c.uid, attempt+1)
	c.event(corev1.EventTypeWarning, ReasonCellBootFailed, "%s; terminating it and launching cell %s in %s (attempt %d of %d)%s",
		msg, next, wait, failures+2, c.d.cfg.BootAttempts, console)
	if !c.replaceInstance(ctx, inst, phaseLaunching) {
		return false
	}
	c.waiting("ContainerCreating", fmt.Sprintf("%s; launching cell %s in %s", msg, next, wait))
	return sleep(ctx, wait)
}

// replaceInstance gives up the cell's instance for its next cell ID
// (cellIDAttempt of the next attempt), for the caller to launch again: it
// detaches the pod's disks (the next instance attaches them), terminates
// the instance and moves the cell to then, or to phasePlacing for a cell
// adopted after a restart, which this kip did not launch. It reports
// false when ctx ended first: the cell is being deleted, and its
// terminate ends the instance.
func (c *cell) replaceInstance(ctx context.Context, inst *pluginapi.Instance, then cellPhase) bool {
	c.mu.Lock()
	id, attempt := c.id, c.attempt
	c.mu.Unlock()
	if c.mayHaveDisks(ctx) {
		c.detachDisks(ctx, inst.ID)
	}
	c.d.terminator.terminate(ctx, inst.ID, id)
	if ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adopted != nil {
		then = phasePlacing
	}
	c.setID(cellIDAttempt(c.uid, attempt+1), attempt+1)
	c.instance, c.placed, c.adopted, c.attached = nil, nil, nil, nil
	c.enterLocked(then)
	return true
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
