package simknobs

import (
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is a token bucket over all of a simulator's calls, like a
// cloud's request-rate limits: Burst calls at once, refilled at
// PerSecond. A call finding the bucket empty is refused in the cloud's
// words (EC2: RequestLimitExceeded; GCE: 403 rateLimitExceeded).
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// Fault is an error answered instead of a call's result.
type Fault struct {
	// Operation is the method it applies to, as the simulator names its
	// methods ("RunInstances", "compute.instances.insert"); empty means
	// any.
	Operation string
	// Code and Message are the error (EC2: its code; GCE: the reason);
	// HTTPStatus zero means 400.
	Code       string
	Message    string
	HTTPStatus int
	// Times is how many calls get it; zero means one.
	Times int
	// AfterEffect lets the call take effect first and then answers the
	// fault: the response was lost, and a retry must be idempotent.
	AfterEffect bool
}

// Knobs are a simulator's faults, rate limit, latency and call counters.
// Create them with New; they are safe for concurrent use.
type Knobs struct {
	mu           sync.Mutex
	faults       []*Fault
	limiter      *rate.Limiter
	latency      time.Duration
	calls        map[string]int
	recent       []time.Time
	maxPerSecond int
	throttled    int
}

// New returns Knobs with the given latency and rate limit.
func New(latency time.Duration, limit RateLimit) *Knobs {
	k := &Knobs{latency: latency, calls: map[string]int{}}
	k.SetRateLimit(limit)
	return k
}

// Count records a call of op at now for Calls and MaxCallsPerSecond.
func (k *Knobs) Count(op string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[op]++
	cut := 0
	for cut < len(k.recent) && !k.recent[cut].After(now.Add(-time.Second)) {
		cut++
	}
	k.recent = append(k.recent[cut:], now)
	k.maxPerSecond = max(k.maxPerSecond, len(k.recent))
}

// Allow takes a token from the rate limit's bucket at now, and reports
// false (counted by Throttled) when it is empty.
func (k *Knobs) Allow(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.limiter == nil || k.limiter.AllowN(now, 1) {
		return true
	}
	k.throttled++
	return false
}

// TakeFault returns the first injected fault for op and uses one of its
// times, or nil.
func (k *Knobs) TakeFault(op string) *Fault {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, f := range k.faults {
		if f.Operation != "" && f.Operation != op {
			continue
		}
		out := *f
		if f.Times--; f.Times <= 0 {
			k.faults = slices.Delete(k.faults, i, i+1)
		}
		return &out
	}
	return nil
}

// Latency is how long every answer waits.
func (k *Knobs) Latency() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.latency
}

// Delay waits the latency.
func (k *Knobs) Delay() {
	if d := k.Latency(); d > 0 {
		time.Sleep(d)
	}
}

// SetLatency sets how long every answer waits; it applies to calls from
// now on.
func (k *Knobs) SetLatency(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.latency = d
}

// SetRateLimit replaces the rate limit over all calls; the zero RateLimit
// removes it. The bucket starts full.
func (k *Knobs) SetRateLimit(l RateLimit) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.PerSecond <= 0 {
		k.limiter = nil
		return
	}
	k.limiter = rate.NewLimiter(rate.Limit(l.PerSecond), max(l.Burst, 1))
}

// InjectFault queues f; calls take queued faults in order.
func (k *Knobs) InjectFault(f Fault) {
	f.Times = max(f.Times, 1)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = append(k.faults, &f)
}

// ClearFaults drops every queued fault.
func (k *Knobs) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = nil
}

// Calls returns how many requests each method received, including the
// ones answered with an error.
func (k *Knobs) Calls() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.calls)
}

// MaxCallsPerSecond is the largest number of requests (all methods)
// received within one second.
func (k *Knobs) MaxCallsPerSecond() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxPerSecond
}

// Throttled is how many calls the rate limit refused (injected faults not
// included).
func (k *Knobs) Throttled() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.throttled
}

// ResetCalls zeroes Calls, MaxCallsPerSecond and Throttled.
func (k *Knobs) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls, k.recent, k.maxPerSecond, k.throttled = map[string]int{}, nil, 0, 0
}
