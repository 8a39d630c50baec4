package aws

import (
	"context"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// bucket is a token bucket: it holds at most burst tokens, gains rate tokens
// per second, and every call takes one, waiting for it when the bucket is
// empty. Waiters queue in arrival order (each reserves the next token and
// sleeps until it exists), so no interval of length T ever sees more than
// burst + rate×T calls, however many goroutines call at once.
type bucket struct {
	rate  float64 // tokens per second
	burst float64

	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu     sync.Mutex
	tokens float64 // may be negative: tokens promised to waiters
	last   time.Time
}

func newBucket(rate float64, burst int, now func() time.Time, sleep func(context.Context, time.Duration) error) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), now: now, sleep: sleep, last: now()}
}

// reserve takes the next token and says when it exists (the grant) and
// how long that is from now.
func (b *bucket) reserve() (grant time.Time, wait time.Duration) {
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

// unreserve gives back a token whose call was never made.
func (b *bucket) unreserve() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+1)
}

// wait takes a token, sleeping until it exists or ctx ends.
func (b *bucket) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, d := b.reserve()
	if d <= 0 {
		return nil
	}
	if err := b.sleep(ctx, d); err != nil {
		b.unreserve()
		return err
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// limiter holds the plugin's two buckets.
type limiter struct {
	describe *bucket
	mutate   *bucket
}

func newLimiter(r RateLimit, now func() time.Time, sleep func(context.Context, time.Duration) error) *limiter {
	return &limiter{
		describe: newBucket(r.DescribePerSecond, r.Burst, now, sleep),
		mutate:   newBucket(r.MutatePerSecond, r.Burst, now, sleep),
	}
}

// bucketFor returns the bucket an EC2 operation spends: Describe* calls are
// EC2's non-mutating category, everything else mutates.
func (l *limiter) bucketFor(operation string) *bucket {
	if strings.HasPrefix(operation, "Describe") {
		return l.describe
	}
	return l.mutate
}

// middleware waits for a token before every attempt of a call, retries
// included: it sits in the Finalize step after the SDK's retry middleware,
// so what it limits is what EC2 receives.
func (l *limiter) middleware(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("KipRateLimit",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if err := l.bucketFor(awsmiddleware.GetOperationName(ctx)).wait(ctx); err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After)
}
