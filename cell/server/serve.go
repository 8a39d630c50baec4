package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/kipcell/kip/cell/api"
)

// Serve serves srv and id's Join service on lis over mutual TLS
// (Identity.TLSConfig) until ctx ends, then stops gracefully, cutting
// streams still open after a few seconds (follows and watches never end on
// their own). Until id has joined, every call but Join's fails
// FailedPrecondition.
func Serve(ctx context.Context, lis net.Listener, id *Identity, srv api.Cell) error {
	tlsConfig, err := id.TLSConfig()
	if err != nil {
		return fmt.Errorf("serving cell API: %w", err)
	}
	opts := append([]grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: api.KeepaliveMinTime, PermitWithoutStream: true}),
	}, id.interceptors()...)
	gs := grpc.NewServer(opts...)
	api.RegisterCell(gs, srv)
	api.RegisterJoin(gs, id)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serving cell API: %w", err)
		}
		return nil
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	return nil
}
