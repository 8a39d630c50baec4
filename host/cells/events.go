package cells

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/pluginapi"
)

// Event reasons for the cloud's notices about a pod's instance.
const (
	ReasonSpotInterruption = "SpotInterruption"
	ReasonRebalance        = "RebalanceRecommended"
	ReasonMaintenance      = "ScheduledMaintenance"
)

// watchEvents follows the plugin's instance events, when it offers them,
// until ctx ends, subscribing again after any error. Events are hints: a
// cloud notice becomes a pod event at once, and a terminated instance is
// confirmed with Describe (checkLost) rather than trusted.
func (m *Manager) watchEvents(ctx context.Context) {
	if !m.hasCapability(ctx, pluginapi.CapabilityWatchEvents) {
		return
	}
	for n := 1; ctx.Err() == nil; n++ {
		start := m.cfg.Now()
		m.watching.Store(true)
		err := m.plugin.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			m.onEvent(ctx, e)
			return nil
		})
		m.watching.Store(false)
		if ctx.Err() != nil {
			return
		}
		// A running event may have been lost with the stream: booting
		// cells look for themselves, and poll at BootPoll until the
		// stream is back.
		m.wakeBooting()
		if m.cfg.Now().Sub(start) > time.Minute {
			n = 1 // it ran for a while: not a failing loop
		}
		m.log.Warn("watching the plugin's instance events; subscribing again", "error", err, "attempt", n)
		if !sleep(ctx, m.cfg.Backoff(n)) {
			return
		}
	}
}

// wakeBooting makes every booting cell look at its instance now.
func (m *Manager) wakeBooting() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cells {
		c.wakeBoot()
	}
}

// cellOf returns the cell of an event: its cell ID is CellID of the pod
// UID, so the UID is derived, not searched for; an event with no cell ID
// is matched by instance ID.
func (m *Manager) cellOf(cellID, instanceID string) *cell {
	m.mu.Lock()
	defer m.mu.Unlock()
	if uid, ok := strings.CutPrefix(cellID, cellIDPrefix); ok {
		return m.cells[types.UID(uid)]
	}
	for _, c := range m.cells {
		c.mu.Lock()
		same := instanceID != "" && c.instance != nil && c.instance.ID == instanceID
		c.mu.Unlock()
		if same {
			return c
		}
	}
	return nil
}

// onEvent turns one plugin event into pod events and, for an instance that
// ended, an early check of the cell.
func (m *Manager) onEvent(ctx context.Context, e *pluginapi.Event) {
	c := m.cellOf(e.CellID, e.InstanceID)
	if c == nil {
		return
	}
	by := ""
	if !e.Deadline.IsZero() {
		by = " by " + e.Deadline.UTC().Format(time.RFC3339)
	}
	reason := ""
	if e.Reason != "" {
		reason = ": " + e.Reason
	}
	switch e.Type {
	case pluginapi.EventInterruption:
		msg := fmt.Sprintf("the cloud is reclaiming cell %s (instance %s, spot)%s%s; the pod will fail and its controller can replace it", c.id, e.InstanceID, by, reason)
		c.mu.Lock()
		c.interrupted = msg
		c.mu.Unlock()
		c.log.Warn("spot interruption", "instance", e.InstanceID, "deadline", e.Deadline, "reason", e.Reason)
		c.event(corev1.EventTypeWarning, ReasonSpotInterruption, "%s", msg)
	case pluginapi.EventRebalance:
		c.event(corev1.EventTypeWarning, ReasonRebalance, "the cloud recommends replacing cell %s (instance %s) soon%s", c.id, e.InstanceID, reason)
	case pluginapi.EventMaintenance:
		c.event(corev1.EventTypeWarning, ReasonMaintenance, "the cloud will stop or move cell %s (instance %s) for maintenance%s%s", c.id, e.InstanceID, by, reason)
	case pluginapi.EventStateChange:
		switch e.State {
		case pluginapi.StateTerminated, pluginapi.StateTerminating:
			c.nudge()
		case pluginapi.StateRunning:
			c.wakeBoot()
		}
	}
}
