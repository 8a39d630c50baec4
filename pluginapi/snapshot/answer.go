package snapshot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// List answers a plugin's List from v: every instance of a snapshot at
// most maxAge old (never older than a launch whose outcome was not seen),
// sorted by ID, as report makes it (the contract's Instance).
func List[T, R any](ctx context.Context, v *View[T], maxAge time.Duration, report func(T) R) ([]R, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap, err := v.Get(ctx, maxAge)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	out := make([]R, 0, len(snap))
	for _, id := range slices.Sorted(maps.Keys(snap)) {
		out = append(out, report(snap[id]))
	}
	return out, nil
}

// Describe answers a plugin's Describe from v: of ids (each once, sorted),
// those in a snapshot at most maxAge old, as report makes them, and those
// of the others lookup finds (instances not of the cluster, which the host
// rarely asks for: lookup asks the cloud for them, leaves out those that
// do not exist or are not cells, and returns an error only for a call that
// failed).
func Describe[T, R any](ctx context.Context, v *View[T], maxAge time.Duration, ids []string, report func(T) R,
	lookup func(ctx context.Context, missing []string) ([]R, error),
) ([]R, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return nil, nil
	}
	snap, err := v.Get(ctx, maxAge)
	if err != nil {
		return nil, fmt.Errorf("describing instances: %w", err)
	}
	out := make([]R, 0, len(ids))
	var missing []string
	for _, id := range ids {
		if inst, ok := snap[id]; ok {
			out = append(out, report(inst))
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	found, err := lookup(ctx, missing)
	if err != nil {
		return nil, err
	}
	return append(out, found...), nil
}
