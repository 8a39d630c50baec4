package azure

import (
	"context"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// limiter holds the plugin's two token buckets (pluginapi/ratelimit).
type limiter struct {
	read   *ratelimit.Bucket
	mutate *ratelimit.Bucket
}

func newLimiter(r ratelimit.Config, now func() time.Time, sleep func(context.Context, time.Duration) error) *limiter {
	l := &limiter{}
	l.read, l.mutate = r.Buckets(now, sleep)
	return l
}

// bucketFor returns the bucket a request spends: Azure Resource Manager
// counts GET (and HEAD) requests as reads, operation polls included, and
// every other call as a write.
func (l *limiter) bucketFor(method string) *ratelimit.Bucket {
	if method == http.MethodGet || method == http.MethodHead {
		return l.read
	}
	return l.mutate
}

// Do makes limiter an azcore per-retry policy: it waits for a token before
// every request the SDK sends, its retries and operation polls included,
// so what it limits is what Azure Resource Manager receives.
func (l *limiter) Do(req *policy.Request) (*http.Response, error) {
	if err := l.bucketFor(req.Raw().Method).Wait(req.Raw().Context()); err != nil {
		return nil, err
	}
	return req.Next()
}
