package pod

import (
	"fmt"
	"time"
)

// Event types, as core/v1 Event.Type.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// MaxPendingEvents bounds the events kept for the host while it does not
// read them; beyond it the oldest are dropped (and counted).
const MaxPendingEvents = 256

// Event is one kubelet-style event about the pod or one of its containers.
type Event struct {
	// Type is EventNormal or EventWarning.
	Type string
	// Reason is the kubelet's: Pulling, Pulled, Created, Started, Killing,
	// BackOff, Failed.
	Reason  string
	Message string
	// Container names the container the event is about; empty for the pod.
	Container string
	Time      time.Time
	// Seq numbers the manager's events from 1.
	Seq uint64
}

// eventLog is the bounded queue of events not yet acknowledged by the
// host. It is guarded by Manager.mu.
type eventLog struct {
	pending []Event
	next    uint64 // seq of the next event
	acked   uint64 // highest seq acknowledged
	dropped uint64
}

// emitLocked records an event and wakes the watchers, which deliver it
// with the next status update.
func (m *Manager) emitLocked(typ, reason, container, format string, args ...any) {
	ev := &m.events
	ev.next++
	e := Event{Type: typ, Reason: reason, Container: container, Message: fmt.Sprintf(format, args...), Time: m.now(), Seq: ev.next}
	if len(ev.pending) >= MaxPendingEvents {
		ev.dropped++
		ev.pending = ev.pending[1:]
		m.log.Warn("dropping the oldest pod event: the host reads none", "dropped", ev.dropped)
	}
	ev.pending = append(ev.pending, e)
	m.seq++
	close(m.changed)
	m.changed = make(chan struct{})
}

// emit records an event (see emitLocked).
func (m *Manager) emit(typ, reason, container, format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emitLocked(typ, reason, container, format, args...)
}

// Events returns the events not yet acknowledged, oldest first. A watcher
// sends them with its next update and then calls AckEvents with the last
// one's Seq, so that events survive a stream that breaks before it sent
// them: the next subscription delivers them.
func (m *Manager) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events.pending...)
}

// AckEvents forgets the events up to and including seq.
func (m *Manager) AckEvents(seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ev := &m.events
	if seq <= ev.acked {
		return
	}
	ev.acked = seq
	i := 0
	for i < len(ev.pending) && ev.pending[i].Seq <= seq {
		i++
	}
	ev.pending = append([]Event(nil), ev.pending[i:]...)
}

// DroppedEvents is how many events were dropped because the host did not
// read them in time.
func (m *Manager) DroppedEvents() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events.dropped
}
