package kit

import (
	"context"
	"fmt"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// List answers List from the plugin's view v (snapshot.List): the
// cluster's instances of a snapshot at most maxAge old (Base.SnapshotAge),
// never older than a launch whose outcome was not seen, as report makes
// them.
func List[T any](ctx context.Context, v *snapshot.View[T], maxAge time.Duration, report func(T) pluginapi.Instance) (*pluginapi.ListResponse, error) {
	out, err := snapshot.List(ctx, v, maxAge, report)
	if err != nil {
		return nil, err
	}
	return &pluginapi.ListResponse{Instances: out}, nil
}

// Describe answers Describe from the plugin's view v (snapshot.Describe):
// the named instances of the cluster from a snapshot at most maxAge old,
// as report makes them, and the others, which the host rarely asks for,
// from lookup (LookupEach, or a call that names many).
func Describe[T any](ctx context.Context, v *snapshot.View[T], maxAge time.Duration, ids []string, report func(T) pluginapi.Instance,
	lookup func(ctx context.Context, missing []string) ([]pluginapi.Instance, error),
) (*pluginapi.DescribeResponse, error) {
	out, err := snapshot.Describe(ctx, v, maxAge, ids, report, lookup)
	if err != nil {
		return nil, err
	}
	return &pluginapi.DescribeResponse{Instances: out}, nil
}

// LookupEach is a Describe lookup that asks the cloud for one instance at
// a time: get returns the instance an ID names, found false when it names
// none (not an ID of the cloud's form, or no such instance), or the
// call's error (mapped to the contract's kinds), which ends the lookup.
// An instance that is not a cell (no cell ID) is left out; the others are
// reported as report makes them.
func LookupEach[T any](report func(T) pluginapi.Instance, get func(ctx context.Context, id string) (inst T, found bool, err error)) func(context.Context, []string) ([]pluginapi.Instance, error) {
	return func(ctx context.Context, missing []string) ([]pluginapi.Instance, error) {
		var out []pluginapi.Instance
		for _, id := range missing {
			inst, found, err := get(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("describing instance %s: %w", id, err)
			}
			if !found {
				continue
			}
			if r := report(inst); r.CellID != "" {
				out = append(out, r)
			}
		}
		return out, nil
	}
}
