package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Bucket is a token bucket: it holds at most burst tokens, gains rate tokens
// per second, and every call takes one, waiting for it when the bucket is
// empty. Waiters queue in arrival order (each reserves the next token and
// sleeps until it exists), so no interval of length T ever sees more than
// burst + rate×T calls, however many goroutines call at once.
type Bucket struct {
	rate  float64 // tokens per second
	burst float64

	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu     sync.Mutex
	tokens float64 // may be negative: tokens promised to waiters
	last   time.Time
}

// New returns a full bucket of burst tokens refilled at rate per second.
// now and sleep are the clock (nil: time.Now and Sleep); tests pass their
// own.
func New(rate float64, burst int, now func() time.Time, sleep func(context.Context, time.Duration) error) *Bucket {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = Sleep
	}
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), now: now, sleep: sleep, last: now()}
}

// Reserve takes the next token and says when it exists (the grant) and
// how long that is from now. A caller that does not make its call after
// all gives the token back with Unreserve.
func (b *Bucket) Reserve() (grant time.Time, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return now, 0
	}
	wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	return now.Add(wait), wait
}

// Unreserve gives back a token whose call was never made.
func (b *Bucket) Unreserve() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+1)
}

// Wait takes a token, sleeping until it exists or ctx ends; a wait cut
// short by ctx gives its token back and returns ctx's error.
func (b *Bucket) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, d := b.Reserve()
	if d <= 0 {
		return nil
	}
	if err := b.sleep(ctx, d); err != nil {
		b.Unreserve()
		return err
	}
	return nil
}

// Sleep sleeps for d or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
