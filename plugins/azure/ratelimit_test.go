package azure

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// Every request the SDK sends passes the token buckets, operation polls
// and the final GET included: with the clock stopped and bursts of one,
// every read after the first and every write after the first waits, once
// each.
func TestEveryRequestPassesTheBuckets(t *testing.T) {
	f := newFakeARM(t)
	f.polls = 2
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	waits := 0
	cfg := testConfig(f)
	cfg["rateLimit"] = map[string]any{"readPerSecond": 1, "mutatePerSecond": 1, "burst": 1}
	p := configured(t, f, cfg, func(p *provider) {
		p.Now = func() time.Time { return frozen }
		p.Sleep = func(context.Context, time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits++
			return nil
		}
	})
	if _, err := p.Launch(t.Context(), launchRequest("kip-limited")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "kip-limited"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	reads, writes := 0, 0
	for op, n := range f.calls {
		switch op {
		case "VirtualMachines_CreateOrUpdate", "VirtualMachines_Delete":
			writes += n
		default:
			reads += n
		}
	}
	f.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if reads < 5 || writes != 2 || waits != reads-1+writes-1 {
		t.Errorf("%d reads and %d writes reached ARM, and %d waited for a token; want every one after each bucket's first to wait", reads, writes, waits)
	}
}

// Reads are GET and HEAD; everything else is a write.
func TestBucketFor(t *testing.T) {
	l := newLimiter(ratelimit.Config{ReadPerSecond: 1, MutatePerSecond: 1, Burst: 1}, time.Now, nil)
	for method, want := range map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPut: false, http.MethodDelete: false, http.MethodPost: false, http.MethodPatch: false} {
		if got := l.bucketFor(method) == l.read; got != want {
			t.Errorf("%s is a read: %v; want %v", method, got, want)
		}
	}
}
