package simknobs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTakeFault(t *testing.T) {
	k := New(0, RateLimit{})
	k.InjectFault(Fault{Operation: "insert", Code: "a", Times: 2})
	k.InjectFault(Fault{Code: "b"})
	var got []string
	for _, op := range []string{"get", "insert", "insert", "insert", "get"} {
		code := "-"
		if f := k.TakeFault(op); f != nil {
			code = f.Code
		}
		got = append(got, code)
	}
	// get takes the fault for any method; insert its own twice; then none.
	if diff := cmp.Diff([]string{"b", "a", "a", "-", "-"}, got); diff != "" {
		t.Errorf("faults taken (-want +got):\n%s", diff)
	}
	k.InjectFault(Fault{Code: "c", Times: 5})
	k.ClearFaults()
	if f := k.TakeFault("get"); f != nil {
		t.Errorf("fault after ClearFaults: %+v", f)
	}
}

func TestCountersAndRateLimit(t *testing.T) {
	k := New(0, RateLimit{PerSecond: 1, Burst: 2})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var allowed []bool
	for i, d := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		now := t0.Add(d)
		k.Count([]string{"a", "b"}[i%2], now)
		allowed = append(allowed, k.Allow(now))
	}
	if diff := cmp.Diff([]bool{true, true, false, true, true}, allowed); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 3, "b": 2}, k.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if k.MaxCallsPerSecond() != 3 || k.Throttled() != 1 {
		t.Errorf("max/s %d, throttled %d; want 3, 1", k.MaxCallsPerSecond(), k.Throttled())
	}
	k.SetRateLimit(RateLimit{})
	if !k.Allow(t0) {
		t.Error("refused without a rate limit")
	}
	k.ResetCalls()
	if len(k.Calls()) != 0 || k.MaxCallsPerSecond() != 0 || k.Throttled() != 0 {
		t.Error("ResetCalls left counts")
	}
}

func TestShortages(t *testing.T) {
	var s Shortages[string]
	if _, ok := s.Short("t", "z"); ok {
		t.Error("the zero Shortages is short")
	}
	s.Inject("", "", "any")
	s.Inject("t", "", "type")
	s.Inject("", "z", "zone")
	s.Inject("t", "z", "both")
	tests := []struct{ typ, zone, want string }{
		{"t", "z", "both"}, {"u", "z", "zone"}, {"t", "y", "type"}, {"u", "y", "any"},
	}
	for _, tt := range tests {
		if got, _ := s.Short(tt.typ, tt.zone); got != tt.want {
			t.Errorf("Short(%s, %s) = %s, want %s", tt.typ, tt.zone, got, tt.want)
		}
	}
	s.Clear("t", "z")
	if got, _ := s.Short("t", "z"); got != "zone" {
		t.Errorf("after Clear: %s, want zone", got)
	}
	s.ClearAll()
	if _, ok := s.Short("t", "z"); ok {
		t.Error("short after ClearAll")
	}
}
