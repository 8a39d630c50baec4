package cells

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		resp, err := c.d.plugin.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
		switch {
		case err != nil:
			c.log.Warn("describing cell", "instance", inst.ID, "error", err)
		case len(resp.Instances) == 0:
			// Eventual consistency right after launch: give it a while.
			if n > 20 {
				c.lost(ctx, fmt.Sprintf("cell %s (instance %s) disappeared while booting", c.id, inst.ID))
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

// errDeleted ends a cell's run once its cell is lost: the pod has failed
// and the cell is being terminated.
var errDeleted = errors.New("cell deleted")
