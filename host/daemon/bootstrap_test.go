package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kipcell/kip/host/bootstrap"
)

// TestUntilExpired checks what Run returns around the node certificate's
// expiry: the expiry ends Run's context and is Run's error, whatever the
// components returned; otherwise Run's own result stands.
func TestUntilExpired(t *testing.T) {
	expiry := fmt.Errorf("system:node:kip: %w", bootstrap.ErrExpired)
	failed := errors.New("plugin exited")
	tests := []struct {
		name    string
		expire  bool
		cancel  bool  // the parent context ends (SIGTERM)
		runErr  error // what the rest of Run returned
		want    error
		wantEnd bool // the context Run ran under ended
	}{
		{name: "expired", expire: true, want: expiry, wantEnd: true},
		{name: "expired, a component failed as it stopped", expire: true, runErr: failed, want: expiry, wantEnd: true},
		{name: "SIGTERM", cancel: true, wantEnd: true},
		{name: "a component failed", runErr: failed, want: failed},
		{name: "running", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(t.Context())
			defer cancel()
			expired := make(chan error, 1)
			ctx, stop := untilExpired(parent, expired)
			if tt.expire {
				expired <- expiry
				<-ctx.Done()
			}
			if tt.cancel {
				cancel()
				<-ctx.Done()
			}
			if ended := ctx.Err() != nil; ended != tt.wantEnd {
				t.Errorf("context ended %v, want %v", ended, tt.wantEnd)
			}
			if got := stop(tt.runErr); !errors.Is(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("stop(%v) = %v, want %v", tt.runErr, got, tt.want)
			}
		})
	}
}
