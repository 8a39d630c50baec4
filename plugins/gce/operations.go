package gce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
)

// Launch waits for its insert's operation, whose error is the launch's
// (launch.go). The launches of a zone share those waits, so that a burst of
// pods costs a few calls rather than one per pod:
//
//   - one operation waited for alone is waited with zoneOperations.wait,
//     which Compute Engine holds until the operation is done (at most two
//     minutes): one call;
//   - while several are waited for in a zone, one zoneOperations.list
//     filtered by their names answers them all, polled from opPauseMin
//     doubling to opPauseMax while none finishes. A held wait ends (its
//     call is cancelled) as soon as a second operation joins.
//
// One goroutine per zone makes the calls while operations are waited for;
// a launch whose ctx ends stops waiting, and the goroutine ends with the
// last. An operation a list no longer shows after opMissingLimit lists in
// a row is answered with a transient error: the host's retry replays the
// insert (its requestId) and waits for the operation it gets then.
const (
	opPauseMin = 250 * time.Millisecond
	opPauseMax = 2 * time.Second
	// opListNames is how many names one zoneOperations.list filter holds.
	opListNames    = 50
	opMissingLimit = 3
	// opCallTimeout bounds one call of the poller (GCE holds a wait at
	// most two minutes).
	opCallTimeout = 3 * time.Minute
)

// opWaits are the operations waited for, per zone.
type opWaits struct {
	mu    sync.Mutex
	zones map[string]*zoneWaits
}

// zoneWaits are a zone's operations waited for and the state of its
// poller.
type zoneWaits struct {
	waiters map[string][]chan opResult // operation name → its waiters
	missing map[string]int             // operation name → lists in a row without it
	polling bool                       // a poller goroutine serves the zone
	// interrupt cancels the poller's held wait when a second operation
	// joins, or when no one waits any more; nil when no call is held.
	interrupt context.CancelFunc
}

type opResult struct {
	op  *computepb.Operation
	err error
}

func newOpWaits() *opWaits { return &opWaits{zones: map[string]*zoneWaits{}} }

// wait waits for the zone operation name to be DONE and returns it, or
// the error of the calls that asked for it.
func (p *provider) wait(ctx context.Context, cfg *config, zone, name string) (*computepb.Operation, error) {
	ch := make(chan opResult, 1)
	if cfg.ops.add(zone, name, ch) {
		// The poller serves every launch of the zone and ends with the
		// last: no one launch's ctx may end it.
		go p.pollZone(cfg, zone) //nolint:gosec // G118, as said above
	}
	select {
	case r := <-ch:
		return r.op, r.err
	case <-ctx.Done():
		cfg.ops.remove(zone, name, ch)
		return nil, ctx.Err()
	}
}

// add registers a waiter; it reports whether the caller must start the
// zone's poller.
func (w *opWaits) add(zone, name string, ch chan opResult) (start bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	z := w.zones[zone]
	if z == nil {
		z = &zoneWaits{waiters: map[string][]chan opResult{}, missing: map[string]int{}}
		w.zones[zone] = z
	}
	z.waiters[name] = append(z.waiters[name], ch)
	if len(z.waiters) > 1 && z.interrupt != nil {
		z.interrupt() // a held wait for one: list them all instead
	}
	start = !z.polling
	z.polling = true
	return start
}

// remove unregisters a waiter whose ctx ended.
func (w *opWaits) remove(zone, name string, ch chan opResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	z := w.zones[zone]
	if z == nil {
		return
	}
	z.waiters[name] = slices.DeleteFunc(z.waiters[name], func(c chan opResult) bool { return c == ch })
	if len(z.waiters[name]) == 0 {
		delete(z.waiters, name)
		delete(z.missing, name)
	}
	if len(z.waiters) == 0 && z.interrupt != nil {
		z.interrupt()
	}
}

// round returns the names to ask for next and the context of the call,
// or ok false (and the poller ends) when no one waits.
func (w *opWaits) round(zone string) (names []string, ctx context.Context, cancel context.CancelFunc, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	z := w.zones[zone]
	if len(z.waiters) == 0 {
		z.polling = false
		delete(w.zones, zone)
		return nil, nil, nil, false
	}
	names = slices.Sorted(maps.Keys(z.waiters))
	ctx, cancel = context.WithTimeout(context.Background(), opCallTimeout)
	if len(names) == 1 {
		z.interrupt = cancel
	}
	return names, ctx, cancel, true
}

// settle answers the waiters of the DONE operations among ops, counts the
// names asked for that the answer did not hold (when listed), and answers
// err to the waiters of names. It reports whether any operation was
// answered.
func (w *opWaits) settle(zone string, names []string, ops []*computepb.Operation, listed bool, err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	z := w.zones[zone]
	z.interrupt = nil
	answer := func(name string, r opResult) {
		for _, ch := range z.waiters[name] {
			ch <- r
		}
		delete(z.waiters, name)
		delete(z.missing, name)
	}
	if err != nil {
		for _, name := range names {
			answer(name, opResult{err: err})
		}
		return true
	}
	answered := false
	seen := map[string]bool{}
	for _, op := range ops {
		seen[op.GetName()] = true
		if op.GetStatus() == computepb.Operation_DONE && len(z.waiters[op.GetName()]) > 0 {
			answer(op.GetName(), opResult{op: op})
			answered = true
		}
	}
	if !listed {
		return answered
	}
	for _, name := range names {
		if seen[name] || len(z.waiters[name]) == 0 {
			delete(z.missing, name)
			continue
		}
		if z.missing[name]++; z.missing[name] >= opMissingLimit {
			answer(name, opResult{err: pluginapi.NewTransient("operation %s of zone %s is not listed by zoneOperations.list any more", name, zone)})
			answered = true
		}
	}
	return answered
}

// pollZone asks Compute Engine for the zone's operations waited for until
// no one waits.
func (p *provider) pollZone(cfg *config, zone string) {
	pause := opPauseMin
	for {
		names, ctx, cancel, ok := cfg.ops.round(zone)
		if !ok {
			return
		}
		start := p.Now()
		var (
			ops    []*computepb.Operation
			err    error
			listed = len(names) > 1
		)
		if listed {
			ops, err = p.listOps(ctx, cfg, zone, names)
		} else {
			var op *computepb.Operation
			if op, err = cfg.clients.zoneOps.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: cfg.project, Zone: zone, Operation: names[0]}); err == nil {
				ops = []*computepb.Operation{op}
			}
		}
		interrupted := ctx.Err() != nil && err != nil
		cancel()
		if interrupted {
			// Another operation joined, or no one waits: a new round.
			pause = opPauseMin
			continue
		}
		if cfg.ops.settle(zone, names, ops, listed, err) {
			pause = opPauseMin
			continue
		}
		// Nothing finished: a held wait that came back at once (an
		// endpoint that does not hold it) or a list pauses.
		if listed || p.Now().Sub(start) < time.Second {
			_ = p.Sleep(context.Background(), pause)
			pause = min(2*pause, opPauseMax)
		}
	}
}

// listOps returns the zone's operations of names, with one
// zoneOperations.list per opListNames names.
func (p *provider) listOps(ctx context.Context, cfg *config, zone string, names []string) ([]*computepb.Operation, error) {
	var out []*computepb.Operation
	for chunk := range slices.Chunk(names, opListNames) {
		terms := make([]string, len(chunk))
		for i, n := range chunk {
			terms[i] = fmt.Sprintf("(name = %q)", n)
		}
		it := cfg.clients.zoneOps.List(ctx, &computepb.ListZoneOperationsRequest{
			Project: cfg.project, Zone: zone,
			Filter:     proto.String(strings.Join(terms, " OR ")),
			MaxResults: proto.Uint32(aggregatedPage),
		})
		for {
			op, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				return nil, err
			}
			out = append(out, op)
		}
	}
	return out, nil
}
