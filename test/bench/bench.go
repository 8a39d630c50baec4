package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Stats are the percentiles of a set of durations.
type Stats struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// String is the one-line summary a benchmark logs:
// "n=20 p50=479ms p90=1.679s p99=1.684s max=1.684s".
func (s Stats) String() string {
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", s.N, s.P50, s.P90, s.P99, s.Max)
}

// Of returns the percentiles of ds (left unsorted); all zero for none.
func Of(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	sorted := slices.Sorted(slices.Values(ds))
	return Stats{
		N:   len(sorted),
		P50: Percentile(sorted, 50), P90: Percentile(sorted, 90), P99: Percentile(sorted, 99),
		Max: sorted[len(sorted)-1],
	}
}

// Percentile returns the p-th percentile (0 to 100) of sorted, a non-empty
// sorted slice: the sample at rank (n-1)·p/100, rounded down.
func Percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100]
}

// Report reports the p50, p90 and p99 of ds as b's metrics in unit:
// "p50-µs" for time.Microsecond, and "NAME-p50-ms" for name NAME and
// time.Millisecond. A benchmark without samples is an error.
func Report(b *testing.B, name string, unit time.Duration, ds []time.Duration) Stats {
	b.Helper()
	s := Of(ds)
	if s.N == 0 {
		b.Errorf("no %s samples", name)
		return s
	}
	prefix := ""
	if name != "" {
		prefix = name + "-"
	}
	for _, m := range []struct {
		p int
		d time.Duration
	}{{50, s.P50}, {90, s.P90}, {99, s.P99}} {
		b.ReportMetric(float64(m.d)/float64(unit), fmt.Sprintf("%sp%d-%s", prefix, m.p, unitName(unit)))
	}
	return s
}

// unitName is the metric suffix of unit: ns, µs, ms, s, or the duration
// itself ("10ms") for another.
func unitName(unit time.Duration) string {
	switch unit {
	case time.Nanosecond:
		return "ns"
	case time.Microsecond:
		return "µs"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	}
	return unit.String()
}
