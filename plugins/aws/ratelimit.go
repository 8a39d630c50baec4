package aws

import (
	"context"
	"strings"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// limiter holds the plugin's two token buckets (pluginapi/ratelimit).
type limiter struct {
	describe *ratelimit.Bucket
	mutate   *ratelimit.Bucket
}

func newLimiter(r ratelimit.Config, now func() time.Time, sleep func(context.Context, time.Duration) error) *limiter {
	l := &limiter{}
	l.describe, l.mutate = r.Buckets(now, sleep)
	return l
}

// bucketFor returns the bucket an EC2 operation spends: Describe* calls are
// EC2's non-mutating category, everything else mutates.
func (l *limiter) bucketFor(operation string) *ratelimit.Bucket {
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
			if err := l.bucketFor(awsmiddleware.GetOperationName(ctx)).Wait(ctx); err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After)
}
