// Package simknobs holds the knobs and counters every cloud simulator of
// test/cloudsim (ec2sim, gcesim) has: injected faults on any method,
// optionally after the call took effect (a lost answer); a token-bucket
// rate limit over all calls; per-method call counters with the busiest
// second and the calls the limit refused; the latency of every answer;
// and capacity shortages by instance type and zone. A simulator embeds a
// *Knobs, which gives it InjectFault, ClearFaults, SetRateLimit,
// SetLatency, Calls, MaxCallsPerSecond, Throttled and ResetCalls, and
// answers a fault or a refusal in its own cloud's words.
//
// This package is test support: it imports the standard library and
// golang.org/x/time/rate.
package simknobs
