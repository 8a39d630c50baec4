package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ms(ns ...int) []time.Duration {
	ds := make([]time.Duration, len(ns))
	for i, n := range ns {
		ds[i] = time.Duration(n) * time.Millisecond
	}
	return ds
}

func TestOf(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	tests := []struct {
		name string
		ds   []time.Duration
		want Stats
	}{
		{name: "none", ds: nil, want: Stats{}},
		{name: "one", ds: ms(7), want: Stats{N: 1, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{name: "rank rounds down", ds: ms(4, 1, 3, 2), want: Stats{N: 4, P50: 2 * time.Millisecond, P90: 3 * time.Millisecond, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond}},
		{name: "a hundred", ds: ms(hundred...), want: Stats{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := append([]time.Duration(nil), tt.ds...)
			if diff := cmp.Diff(tt.want, Of(tt.ds)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tt.ds); diff != "" {
				t.Errorf("Of changed its argument (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatsString(t *testing.T) {
	got := Of(ms(479, 1679, 1684)).String()
	if want := "n=3 p50=1.679s p90=1.679s p99=1.679s max=1.684s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name string
		unit time.Duration
		want map[string]float64
	}{
		{name: "", unit: time.Microsecond, want: map[string]float64{"p50-µs": 2000, "p90-µs": 3000, "p99-µs": 3000}},
		{name: "created-to-running", unit: time.Millisecond, want: map[string]float64{
			"created-to-running-p50-ms": 2, "created-to-running-p90-ms": 3, "created-to-running-p99-ms": 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.unit.String(), func(t *testing.T) {
			r := testing.Benchmark(func(b *testing.B) {
				for b.Loop() {
				}
				Report(b, tt.name, tt.unit, ms(4, 1, 3, 2))
			})
			got := map[string]float64{}
			for k, v := range r.Extra {
				if k != "ns/op" {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reported metrics (-want +got):\n%s", diff)
			}
		})
	}
}
