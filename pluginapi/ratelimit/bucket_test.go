package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
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
		b := New(tc.rate, tc.burst, clock.Now, nil)
		b.sleep = func(ctx context.Context, d time.Duration) error { return nil }
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range 25 {
					at, _ := b.Reserve()
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

// Wait sleeps exactly as long as Reserve says, and a waiter whose context
// ends gives its token back.
func TestBucketWaitAndCancel(t *testing.T) {
	clock := newFakeClock()
	var slept []time.Duration
	b := New(2, 2, clock.Now, func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	})
	ctx := t.Context()
	for range 4 {
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Two from the burst, then one every half second.
	if want := []time.Duration{500 * time.Millisecond, time.Second}; !slices.Equal(slept, want) {
		t.Errorf("slept %v, want %v", slept, want)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Wait(cancelled); !errors.Is(err, context.Canceled) {
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
	if err := b.Wait(short); !errors.Is(err, context.Canceled) {
		t.Errorf("wait cancelled while sleeping = %v", err)
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 2 || slept[1] != slept[0] {
		t.Errorf("slept %v; the second waiter should wait as long as the cancelled one would have", slept)
	}
}
