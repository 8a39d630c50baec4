package aws

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// fakeClock is a clock tests move by hand. Its sleep returns at once and
// records when the sleeper would have woken.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestLimiterBuckets(t *testing.T) {
	l := newLimiter(ratelimit.Config{ReadPerSecond: 1, MutatePerSecond: 1, Burst: 1}, time.Now, ratelimit.Sleep)
	for op, want := range map[string]*ratelimit.Bucket{
		"DescribeInstances": l.describe, "DescribeInstanceTypeOfferings": l.describe, "DescribeSubnets": l.describe,
		"DescribeImages": l.describe, "DescribeInstanceStatus": l.describe,
		"RunInstances": l.mutate, "TerminateInstances": l.mutate,
	} {
		if l.bucketFor(op) != want {
			t.Errorf("%s spends the wrong bucket", op)
		}
	}
}

// Every EC2 call goes through the limiter, and what it holds back never
// reaches EC2: with a burst of 2 and a rate of one call in 1000 s, the
// third RunInstances waits (here: until its context ends) and the fake
// sees two, while Describe calls spend their own bucket.
func TestLimiterHoldsCallsBack(t *testing.T) {
	f := newFakeEC2(t)
	clock := newFakeClock()
	var waits []time.Duration
	var mu sync.Mutex
	p := configured(t, with(testConfig(f), "rateLimit", map[string]any{"describePerSecond": 0.001, "mutatePerSecond": 0.001, "burst": 4}),
		func(p *provider) {
			p.Now = clock.Now
			p.Sleep = func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				return context.DeadlineExceeded // the caller gives up
			}
		})
	// Configure spent 2 of the 4 Describe tokens (DescribeSubnets,
	// DescribeImages).
	ctx := t.Context()
	for i := range 4 {
		if _, err := p.Launch(ctx, launchRequest("c-"+string(rune('a'+i)))); err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	_, err := p.Launch(ctx, launchRequest("c-e"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the fifth launch = %v, want the wait's error", err)
	}
	if got := f.callCount("RunInstances"); got != 4 {
		t.Errorf("EC2 saw %d RunInstances, want 4 (the burst)", got)
	}
	if len(waits) != 1 || waits[0] < 900*time.Second {
		t.Errorf("waits = %v, want one of about 1000s", waits)
	}
	// Describe calls spend their own bucket, which has tokens left.
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := f.callCount("DescribeInstances"); got != 1 {
		t.Errorf("EC2 saw %d DescribeInstances, want 1", got)
	}
}
