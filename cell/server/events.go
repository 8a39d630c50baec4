package server

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/pod"
)

// podEvents converts the manager's events for the wire.
func podEvents(events []pod.Event) []*cellv1.PodEvent {
	if len(events) == 0 {
		return nil
	}
	out := make([]*cellv1.PodEvent, 0, len(events))
	for _, e := range events {
		out = append(out, &cellv1.PodEvent{
			Type: e.Type, Reason: e.Reason, Message: e.Message, Container: e.Container, Time: timestamppb.New(e.Time),
		})
	}
	return out
}
