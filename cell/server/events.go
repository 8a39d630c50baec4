package server

import (
	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/pod"
)

// podEvents converts the manager's events for the status stream.
func podEvents(events []pod.Event) []api.PodEvent {
	if len(events) == 0 {
		return nil
	}
	out := make([]api.PodEvent, 0, len(events))
	for _, e := range events {
		out = append(out, api.PodEvent{Type: e.Type, Reason: e.Reason, Message: e.Message, Container: e.Container, Time: e.Time})
	}
	return out
}
