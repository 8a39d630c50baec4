package gce

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func TestLimiterBuckets(t *testing.T) {
	l := newLimiter(ratelimit.Config{ReadPerSecond: 1, MutatePerSecond: 1, Burst: 1}, time.Now, nil)
	for _, tc := range []struct {
		verb, path string
		read       bool
	}{
		{"GET", "/compute/v1/projects/p/aggregated/instances", true},
		{"GET", "/compute/v1/projects/p/zones/z/instances/i", true},
		{"POST", "/compute/v1/projects/p/zones/z/operations/op-1/wait", true},
		{"POST", "/compute/v1/projects/p/zones/z/instances", false},
		{"DELETE", "/compute/v1/projects/p/zones/z/instances/i", false},
		{"POST", "/compute/v1/projects/p/zones/z/instances/wait", false},
	} {
		r := &http.Request{Method: tc.verb, URL: &url.URL{Path: tc.path}}
		if got := l.bucketFor(r) == l.read; got != tc.read {
			t.Errorf("%s %s: read bucket %v, want %v", tc.verb, tc.path, got, tc.read)
		}
	}
}

// Every Compute Engine request goes through the limiter, and what it holds
// back never reaches Compute Engine: with a burst of 5 and a rate of one
// call in 1000 s, the sixth read waits (here: until its context ends) and
// the fake sees five, while the inserts spend their own bucket.
func TestLimiterHoldsCallsBack(t *testing.T) {
	f := newFakeCompute(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var waits []time.Duration
	var mu sync.Mutex
	p := configured(t, with(testConfig(f), "rateLimit", map[string]any{"readPerSecond": 0.001, "mutatePerSecond": 0.001, "burst": 5}),
		func(p *provider) {
			p.Now = clock.Now
			p.Sleep = func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				return context.DeadlineExceeded // the caller gives up
			}
		})
	// Configure spent 3 of the 5 read tokens (regions.get,
	// subnetworks.get, images.getFromFamily); the first Launch's view
	// refresh and its wait the others; later launches insert and wait in
	// vain.
	ctx := t.Context()
	for i := range 4 {
		req := launchRequest("kip-rate-" + string(rune('a'+i)))
		if _, err := p.Launch(ctx, req); err != nil && i < 1 {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	mu.Lock()
	waited := append([]time.Duration(nil), waits...)
	mu.Unlock()
	if got := f.callCount("instances.insert"); got != 4 {
		t.Errorf("Compute Engine saw %d inserts, want 4 (within their bucket's burst)", got)
	}
	reads := f.callCount("regions.get") + f.callCount("subnetworks.get") + f.callCount("images.getFromFamily") +
		f.callCount("instances.aggregatedList") + f.callCount("zoneOperations.wait")
	if reads != 5 {
		t.Errorf("Compute Engine saw %d reads, want the burst of 5", reads)
	}
	if len(waited) == 0 || waited[0] < 900*time.Second {
		t.Errorf("waits = %v, want some of about 1000s", waited)
	}
	before := f.callCount("instances.aggregatedList")
	p.SnapshotAge = 0
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err == nil {
		t.Error("List with no read token left succeeded")
	}
	if n := f.callCount("instances.aggregatedList"); n != before {
		t.Errorf("a List held back reached Compute Engine (%d aggregatedList, was %d)", n, before)
	}
}
