package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/imds"
)

// Notices are the cloud's notices about the cell's instance that are in
// force (api.InstanceNotice), one per kind; WatchStatus sends them with
// every update and wakes on a change. Make one with NewNotices; a nil
// *Notices has none.
type Notices struct {
	mu      sync.Mutex
	byKind  map[string]api.InstanceNotice
	version uint64
	changed chan struct{} // closed and replaced at every change
}

// NewNotices returns an empty Notices.
func NewNotices() *Notices {
	return &Notices{byKind: map[string]api.InstanceNotice{}, changed: make(chan struct{})}
}

// Set puts the notice of kind (api.NoticeInterruption,
// api.NoticeRebalance) in force, replacing an earlier one of that
// kind; the same notice again changes nothing. It reports whether the
// notice is new.
func (n *Notices) Set(kind, action string, at time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.byKind[kind]; ok && old.Action == action && old.Time.Equal(at) {
		return false
	}
	n.byKind[kind] = api.InstanceNotice{Kind: kind, Action: action, Time: at}
	n.changedLocked()
	return true
}

// Clear withdraws the notice of kind, if any.
func (n *Notices) Clear(kind string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.byKind[kind]; !ok {
		return
	}
	delete(n.byKind, kind)
	n.changedLocked()
}

func (n *Notices) changedLocked() {
	n.version++
	close(n.changed)
	n.changed = make(chan struct{})
}

// snapshot returns the notices in force (by kind), their version, and a
// channel closed at the next change (nil, which never fires, for a nil
// *Notices).
func (n *Notices) snapshot() ([]api.InstanceNotice, uint64, <-chan struct{}) {
	if n == nil {
		return nil, 0, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]api.InstanceNotice, 0, len(n.byKind))
	for _, v := range n.byKind {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.InstanceNotice) int { return strings.Compare(a.Kind, b.Kind) })
	return out, n.version, n.changed
}

// MetadataSource is where WatchInstanceMetadata reads the cloud's notices:
// an imds.Client.
type MetadataSource interface {
	InstanceAction(ctx context.Context) (*imds.InstanceAction, error)
	RebalanceRecommendation(ctx context.Context) (*imds.Rebalance, error)
}

var _ MetadataSource = (*imds.Client)(nil)

// NoticeInterval is how often the agent reads the notices: every five
// seconds, as AWS recommends for spot/instance-action.
const NoticeInterval = 5 * time.Second

// noIMDSAttempts is how many reads must fail, with none ever answered,
// before the agent takes it that its instance has no EC2 metadata.
const noIMDSAttempts = 3

// WatchInstanceMetadata reads the spot interruption notice and the
// rebalance recommendation from src every interval until ctx ends, and
// puts what it finds in n. A metadata service that never answered after
// a few tries is taken for none (the cell is not on EC2): it says so once
// and returns. Later failures are logged once each until a read succeeds.
func WatchInstanceMetadata(ctx context.Context, src MetadataSource, interval time.Duration, n *Notices, log *slog.Logger) {
	if interval <= 0 {
		interval = NoticeInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	answered, failures, lastErr := false, 0, ""
	for {
		err := readNotices(ctx, src, n, log)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			answered, failures, lastErr = true, 0, ""
		case !answered:
			failures++
			if failures >= noIMDSAttempts {
				log.InfoContext(ctx, "no instance metadata: not watching for spot interruption notices", "error", err)
				return
			}
		case err.Error() != lastErr:
			lastErr = err.Error()
			log.WarnContext(ctx, "reading spot interruption notices from instance metadata", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readNotices reads both notices once and records them in n.
func readNotices(ctx context.Context, src MetadataSource, n *Notices, log *slog.Logger) error {
	action, err := src.InstanceAction(ctx)
	if err != nil {
		return err
	}
	if action == nil {
		n.Clear(api.NoticeInterruption)
	} else if n.Set(api.NoticeInterruption, action.Action, action.Time) {
		log.WarnContext(ctx, "spot interruption notice", "action", action.Action, "time", action.Time)
	}
	rebalance, err := src.RebalanceRecommendation(ctx)
	if err != nil {
		return err
	}
	if rebalance == nil {
		n.Clear(api.NoticeRebalance)
	} else if n.Set(api.NoticeRebalance, "", rebalance.NoticeTime) {
		log.WarnContext(ctx, "rebalance recommendation", "time", rebalance.NoticeTime)
	}
	return nil
}
