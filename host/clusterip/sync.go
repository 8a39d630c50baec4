package clusterip

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cellapi "github.com/kipcell/kip/cell/api"
)

// Applier is the agent's ApplyServices; host/cellclient's Agent is one.
type Applier interface {
	ApplyServices(ctx context.Context, u *cellapi.ServicesUpdate) (cellapi.ServicesApplied, error)
}

// SyncOptions tune Sync for one cell.
type SyncOptions struct {
	// Backoff is the wait before retry n (n ≥ 1) of a failed call.
	Backoff func(n int) time.Duration
	// FirstBackoff replaces Backoff until the agent has answered once:
	// the agent is still starting, and the pod's start waits on Reached.
	FirstBackoff func(n int) time.Duration
	// Reached, if set, is closed once the agent has answered a first
	// call, whatever the answer (the table, a refusal, a failure to
	// program it), or once Sync returns: the cell then applies its pod,
	// which so gets the table before it starts whenever the agent can
	// program it.
	Reached chan<- struct{}
	// Acked, if set, is called with every revision the agent confirms.
	Acked func(revision uint64)
	Log   *slog.Logger
}

// Sync keeps the cell's agent in step with the table until ctx ends, or
// until the agent says it programs no services (see the package comment).
func (t *Table) Sync(ctx context.Context, agent Applier, opts SyncOptions) {
	reached := func() {
		if opts.Reached != nil {
			close(opts.Reached)
			opts.Reached = nil
		}
	}
	defer reached()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	select {
	case <-t.ready:
	case <-ctx.Done():
		return
	}
	var (
		acked    uint64 // the revision the agent confirmed, 0 before any
		full     = true // the next request carries the whole table
		failures int    // calls failed in a row
		failing  bool   // a failure was logged; log the recovery
	)
	for {
		rev, changed := t.Revision()
		if full || acked != rev {
			req := t.Request(acked, full)
			applied, err := agent.ApplyServices(ctx, req)
			if ctx.Err() != nil {
				return
			}
			code := status.Code(err)
			if code != codes.Unavailable {
				reached()
			}
			switch {
			case err == nil && applied.Table == t.id:
				opts.Log.DebugContext(ctx, "cell programs ClusterIP services", "revision", applied.Revision,
					"base", req.BaseRevision, "services", len(req.Services), "removed", len(req.Removed))
				acked, full, failures = applied.Revision, false, 0
				if failing {
					opts.Log.InfoContext(ctx, "cell programs ClusterIP services again", "revision", acked)
					failing = false
				}
				if opts.Acked != nil {
					opts.Acked(acked)
				}
				continue // the table may have moved during the call
			case err == nil:
				// Not the table sent: another host's answer. Send ours whole.
				full = true
				continue
			case code == codes.Unimplemented:
				opts.Log.InfoContext(ctx, "cell does not program ClusterIP services: Services are not reachable from its pod", "reason", status.Convert(err).Message())
				return
			case code == codes.FailedPrecondition && !full:
				// The agent has another table or revision (it restarted):
				// the whole table, at once.
				full = true
				continue
			}
			failures++
			// Unavailable before any answer is the agent still starting:
			// the cell's boot, not this, reports an agent that never comes.
			if !failing && (code != codes.Unavailable || acked != 0) {
				opts.Log.WarnContext(ctx, "sending ClusterIP services to cell failed; retrying", "revision", rev, "error", err)
				failing = true
			}
			backoff := opts.Backoff
			if acked == 0 && code == codes.Unavailable && opts.FirstBackoff != nil {
				backoff = opts.FirstBackoff
			}
			if !sleep(ctx, backoff(failures)) {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
