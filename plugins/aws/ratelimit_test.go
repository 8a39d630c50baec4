package aws

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
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

// checkRate checks that the grant times never hold more than
// burst + rate×T calls in any window of length T.
func checkRate(t *testing.T, grants []time.Time, rate float64, burst int) {
	t.Helper()
	slices.SortFunc(grants, func(a, b time.Time) int { return a.Compare(b) })
	for i := range grants {
		for j := i; j < len(grants); j++ {
			calls := float64(j - i + 1)
			allowed := float64(burst) + rate*grants[j].Sub(grants[i]).Seconds()
			if calls > allowed+1e-6 {
				t.Fatalf("%v calls within %s (calls %d to %d); the bucket allows %.3f (rate %v/s, burst %d)",
					calls, grants[j].Sub(grants[i]), i, j, allowed, rate, burst)
			}
		}
	}
}

// Many goroutines at once, with a clock that moves while they call: the
// times their calls may go out (when their reserved tokens exist) never
// exceed the bucket's rate.
func TestBucketNeverExceedsItsRate(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{5, 20}, {10, 1}, {0.5, 3}, {100, 100}} {
		clock := newFakeClock()
		var mu sync.Mutex
		var grants []time.Time
		b := newBucket(tc.rate, tc.burst, clock.Now, nil)
		b.sleep = func(ctx context.Context, d time.Duration) error { return nil }
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range 25 {
					at, _ := b.reserve()
					mu.Lock()
					grants = append(grants, at)
					mu.Unlock()
					clock.Advance(time.Duration(r.IntN(int(50 * time.Millisecond))))
				}
			}()
		}
		wg.Wait()
		if len(grants) != 16*25 {
			t.Fatalf("%d grants, want %d", len(grants), 16*25)
		}
		checkRate(t, grants, tc.rate, tc.burst)
	}
}

// wait sleeps exactly as long as reserve says, and a waiter whose context
// ends gives its token back.
func TestBucketWaitAndCancel(t *testing.T) {
	clock := newFakeClock()
	var slept []time.Duration
	b := newBucket(2, 2, clock.Now, func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	})
	ctx := t.Context()
	for range 4 {
		if err := b.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Two from the burst, then one every half second.
	if want := []time.Duration{500 * time.Millisecond, time.Second}; !slices.Equal(slept, want) {
		t.Errorf("slept %v, want %v", slept, want)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context = %v", err)
	}
	// A waiter cancelled while sleeping gives its token back: the next
	// waiter waits as long as it would have.
	slept = nil
	short, cancelShort := context.WithCancel(ctx)
	b.sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		if ctx == short {
			cancelShort()
			return context.Canceled
		}
		return nil
	}
	if err := b.wait(short); !errors.Is(err, context.Canceled) {
		t.Errorf("wait cancelled while sleeping = %v", err)
	}
	if err := b.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 2 || slept[1] != slept[0] {
		t.Errorf("slept %v; the second waiter should wait as long as the cancelled one would have", slept)
	}
}

func TestLimiterBuckets(t *testing.T) {
	l := newLimiter(RateLimit{DescribePerSecond: 1, MutatePerSecond: 1, Burst: 1}, time.Now, sleepCtx)
	for op, want := range map[string]*bucket{
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
			p.now = clock.Now
			p.sleep = func(ctx context.Context, d time.Duration) error {
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
