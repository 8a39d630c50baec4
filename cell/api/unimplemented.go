package api

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnimplementedCell answers every call of Cell Unimplemented, as an agent
// older than the call does. A partial implementation (a test's fake agent)
// embeds it and implements the calls it answers.
type UnimplementedCell struct{}

var _ Cell = UnimplementedCell{}

func unimplemented(call string) error {
	return status.Errorf(codes.Unimplemented, "method %s not implemented", call)
}

// ApplyPod answers Unimplemented.
func (UnimplementedCell) ApplyPod(context.Context, *PodRequest) (int64, error) {
	return 0, unimplemented("ApplyPod")
}

// WatchStatus answers Unimplemented.
func (UnimplementedCell) WatchStatus(context.Context, func(*StatusUpdate) error) error {
	return unimplemented("WatchStatus")
}

// Logs answers Unimplemented.
func (UnimplementedCell) Logs(context.Context, LogsOptions, io.Writer) error {
	return unimplemented("Logs")
}

// Exec answers Unimplemented.
func (UnimplementedCell) Exec(context.Context, ExecStream) error { return unimplemented("Exec") }

// Attach answers Unimplemented.
func (UnimplementedCell) Attach(context.Context, ExecStream) error { return unimplemented("Attach") }

// PortForward answers Unimplemented.
func (UnimplementedCell) PortForward(context.Context, PortForwardStream) error {
	return unimplemented("PortForward")
}

// Stats answers Unimplemented.
func (UnimplementedCell) Stats(context.Context, bool) (*Stats, error) {
	return nil, unimplemented("Stats")
}

// DeletePod answers Unimplemented.
func (UnimplementedCell) DeletePod(context.Context, time.Duration) error {
	return unimplemented("DeletePod")
}

// ApplyServices answers Unimplemented.
func (UnimplementedCell) ApplyServices(context.Context, *ServicesUpdate) (ServicesApplied, error) {
	return ServicesApplied{}, unimplemented("ApplyServices")
}

// UnimplementedJoin answers every call of JoinService Unimplemented, as
// an agent older than the call does; a partial implementation embeds it.
type UnimplementedJoin struct{}

var _ JoinService = UnimplementedJoin{}

// Join answers Unimplemented.
func (UnimplementedJoin) Join(context.Context) (*JoinOffer, error) { return nil, unimplemented("Join") }

// CompleteJoin answers Unimplemented.
func (UnimplementedJoin) CompleteJoin(context.Context, []byte) error {
	return unimplemented("CompleteJoin")
}

// Renew answers Unimplemented.
func (UnimplementedJoin) Renew(context.Context) (*JoinOffer, error) {
	return nil, unimplemented("Renew")
}

// CompleteRenew answers Unimplemented.
func (UnimplementedJoin) CompleteRenew(context.Context, []byte) error {
	return unimplemented("CompleteRenew")
}
