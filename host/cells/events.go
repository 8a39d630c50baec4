package cells

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/pluginapi"
)

// Event reasons for the cloud's notices about a pod's instance.
const (
	ReasonSpotInterruption = "SpotInterruption"
	ReasonRebalance        = "RebalanceRecommended"
	ReasonMaintenance      = "ScheduledMaintenance"
)

// eventWatch follows the plugin's instance events, when it offers them,
// and hands each to its cell (cell.cloudEvent).
type eventWatch struct {
	plugin  pluginapi.EventWatcher
	catalog *catalogCache // says whether the plugin offers watch-events
	cells   *cellSet
	backoff func(n int) time.Duration
	now     func() time.Time
	log     *slog.Logger
	// standbys takes the events no pod's cell took (the warm pool's
	// booting standbys), and nil when the stream was lost; nil: none.
	standbys func(*pluginapi.Event)

	up atomic.Bool // the plugin's event stream is up
}

// watching reports whether the plugin's event stream is up, so that a
// booting cell can leave the looking to its running event.
func (w *eventWatch) watching() bool { return w.up.Load() }

// run follows the events until ctx ends, subscribing again after any
// error. Events are hints: a cloud notice becomes a pod event at once, and
// a terminated instance is confirmed with Describe (checkLost) rather than
// trusted.
func (w *eventWatch) run(ctx context.Context) {
	if !w.catalog.hasCapability(ctx, pluginapi.CapabilityWatchEvents) {
		return
	}
	for n := 1; ctx.Err() == nil; n++ {
		start := w.now()
		w.up.Store(true)
		err := w.plugin.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			if c := w.cells.find(e.CellID, e.InstanceID); c != nil {
				c.cloudEvent(ctx, e)
			} else if w.standbys != nil {
				w.standbys(e)
			}
			return nil
		})
		w.up.Store(false)
		if ctx.Err() != nil {
			return
		}
		// A running event may have been lost with the stream: booting
		// cells look for themselves, and poll at BootPoll until the
		// stream is back.
		for _, c := range w.cells.all() {
			c.wakeBoot()
		}
		if w.standbys != nil {
			w.standbys(nil)
		}
		if w.now().Sub(start) > time.Minute {
			n = 1 // it ran for a while: not a failing loop
		}
		w.log.Warn("watching the plugin's instance events; subscribing again", "error", err, "attempt", n)
		if !sleep(ctx, w.backoff(n)) {
			return
		}
	}
}

// cloudEvent turns one plugin event about the cell's instance into a
// notice (interrupt.go, the same path as the agent's notices) or pod
// event and, for an instance that ended or runs, an early look at it.
func (c *cell) cloudEvent(ctx context.Context, e *pluginapi.Event) {
	switch e.Type {
	case pluginapi.EventInterruption:
		c.notice(ctx, notice{kind: cellapi.NoticeInterruption, at: e.Deadline, instanceID: e.InstanceID, reason: e.Reason})
	case pluginapi.EventRebalance:
		c.notice(ctx, notice{kind: cellapi.NoticeRebalance, instanceID: e.InstanceID, reason: e.Reason})
	case pluginapi.EventMaintenance:
		by, reason := "", ""
		if !e.Deadline.IsZero() {
			by = " by " + e.Deadline.UTC().Format(time.RFC3339)
		}
		if e.Reason != "" {
			reason = ": " + e.Reason
		}
		c.event(corev1.EventTypeWarning, ReasonMaintenance, "the cloud will stop or move cell %s (instance %s) for maintenance%s%s", c.cellID(), e.InstanceID, by, reason)
	case pluginapi.EventStateChange:
		switch e.State {
		case pluginapi.StateTerminated, pluginapi.StateTerminating:
			c.nudge()
		case pluginapi.StateRunning:
			c.wakeBoot()
		}
	}
}
