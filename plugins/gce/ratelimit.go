package gce

import (
	"context"
	"net/http"
	"strings"
	"time"

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

// bucketFor returns the bucket a request spends: Compute Engine counts GET
// requests and operation polls (GET, or POST …/operations/{op}/wait) as
// reads, every other call as a write.
func (l *limiter) bucketFor(r *http.Request) *ratelimit.Bucket {
	if r.Method == http.MethodGet || (r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/wait") && strings.Contains(r.URL.Path, "/operations/")) {
		return l.read
	}
	return l.mutate
}

// transport waits for a token before every request the SDK sends, its
// retries included: it is the HTTP client's transport under the SDK, so
// what it limits is what Compute Engine receives.
type transport struct {
	limiter *limiter
	next    http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.limiter.bucketFor(r).Wait(r.Context()); err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}
