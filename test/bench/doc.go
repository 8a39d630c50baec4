// Package bench reports the latency percentiles of a benchmark's samples:
// every benchmark that times its iterations (host/plugin's round trips,
// test/e2e's pod start-up) reports p50, p90 and p99 the same way, with
// b.ReportMetric.
//
// It imports the standard library only; benchmarks import it, production
// code never does.
package bench
