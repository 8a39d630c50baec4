package metrics

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clock is a settable clock for the instance-hours.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestInstancesCostAndHours(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	small := Placement{InstanceType: "m.small", Zone: "z-a", CapacityType: "spot", HourlyPrice: 0.25, PriceKnown: true}
	odd := Placement{InstanceType: "x.odd", Zone: "z-b", CapacityType: "on-demand"}
	const (
		smallLabels = `{capacity_type="spot",instance_type="m.small",zone="z-a"}`
		oddLabels   = `{capacity_type="on-demand",instance_type="x.odd",zone="z-b"}`
	)
	tests := []struct {
		name  string
		steps func(m *Metrics, c *clock)
		want  map[string]float64 // every kip_ instance sample
	}{
		{
			name:  "nothing launched: no series",
			steps: func(*Metrics, *clock) {},
			want:  map[string]float64{},
		},
		{
			name: "two running at a known price: their sum, hours so far",
			steps: func(m *Metrics, c *clock) {
				m.InstanceUp("i-1", small, t0)
				m.InstanceUp("i-2", small, t0.Add(30*time.Minute))
				c.t = t0.Add(time.Hour)
			},
			want: map[string]float64{
				"kip_hourly_cost" + smallLabels: 0.5, "kip_instance_hours_total" + smallLabels: 1.5,
				"kip_instances" + smallLabels: 2, "kip_instances_unknown_price" + smallLabels: 0,
			},
		},
		{
			name: "an ended instance keeps its hours and leaves the cost at 0",
			steps: func(m *Metrics, c *clock) {
				m.InstanceUp("i-1", small, t0)
				m.InstanceDown("i-1", t0.Add(2*time.Hour))
				m.InstanceDown("i-1", t0.Add(3*time.Hour)) // twice: once counted
				m.InstanceDown("i-unknown", t0)
				c.t = t0.Add(5 * time.Hour)
			},
			want: map[string]float64{
				"kip_hourly_cost" + smallLabels: 0, "kip_instance_hours_total" + smallLabels: 2,
				"kip_instances" + smallLabels: 0, "kip_instances_unknown_price" + smallLabels: 0,
			},
		},
		{
			name: "an unknown price is counted, never guessed",
			steps: func(m *Metrics, c *clock) {
				m.InstanceUp("i-3", odd, t0)
				m.InstanceUp("i-3", small, t0) // again: the first record stays
				c.t = t0.Add(15 * time.Minute)
			},
			want: map[string]float64{
				"kip_hourly_cost" + oddLabels: 0, "kip_instance_hours_total" + oddLabels: 0.25,
				"kip_instances" + oddLabels: 1, "kip_instances_unknown_price" + oddLabels: 1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: t0}
			m := New(WithClock(c.now))
			tt.steps(m, c)
			got := map[string]float64{}
			for name, v := range gathered(t, m) {
				for _, prefix := range []string{"kip_hourly_cost{", "kip_instance_hours_total{", "kip_instances{", "kip_instances_unknown_price{"} {
					if strings.HasPrefix(name, prefix) {
						got[name] = v
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("instance samples (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCellsByPhaseAndPendingReason(t *testing.T) {
	tests := []struct {
		name        string
		cells       []Cell
		wantPhase   map[string]float64
		wantPending map[string]float64
	}{
		{name: "no source: every phase 0", wantPhase: map[string]float64{CellRunning: 0, CellPending: 0}},
		{
			name: "cells counted by phase and pending reason",
			cells: []Cell{
				{Phase: CellPending, PendingReason: "NoInstanceType"},
				{Phase: CellLaunching, PendingReason: "ContainerCreating"},
				{Phase: CellBooting, PendingReason: "ContainerCreating"},
				{Phase: CellRunning},
				{Phase: CellRunning},
			},
			wantPhase:   map[string]float64{CellPending: 1, CellLaunching: 1, CellBooting: 1, CellConnecting: 0, CellRunning: 2, CellTerminating: 0},
			wantPending: map[string]float64{"NoInstanceType": 1, "ContainerCreating": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			if tt.cells != nil {
				m.SetCells(func() []Cell { return tt.cells })
			}
			got := gathered(t, m)
			for phase, want := range tt.wantPhase {
				if v := got[`kip_cells{phase="`+phase+`"}`]; v != want {
					t.Errorf("kip_cells{phase=%q} = %v, want %v", phase, v, want)
				}
			}
			for reason, want := range tt.wantPending {
				if v := got[`kip_pending_pods{reason="`+reason+`"}`]; v != want {
					t.Errorf("kip_pending_pods{reason=%q} = %v, want %v", reason, v, want)
				}
			}
			if n := len(m.Cells()); n != len(tt.cells) {
				t.Errorf("Cells() has %d cells, want %d", n, len(tt.cells))
			}
		})
	}
}

// gathered is Samples of m's registry.
func gathered(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	got, err := Samples(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEvents(t *testing.T) {
	m := New()
	m.LaunchPhase(PhaseBoundToLaunch, -time.Second) // clocks apart: 0
	m.LaunchPhase(PhaseBoundToLaunch, 2*time.Second)
	m.PluginCall("Launch", OutcomeOK, time.Second)
	m.PluginCall("Launch", "insufficient_capacity", time.Second)
	m.MatchDecision("placed")
	m.CapacityFallback(FallbackQuotaExceeded)
	requestResult{m}.Increment(t.Context(), "200", "GET", "api")
	requestLatency{m}.Observe(t.Context(), "GET", url.URL{}, time.Second)
	got := gathered(t, m)
	for name, want := range map[string]float64{
		`kip_launch_phase_seconds_count{phase="bound_to_launch"}`:                 2,
		`kip_launch_phase_seconds_sum{phase="bound_to_launch"}`:                   2,
		`kip_plugin_calls_total{method="Launch",outcome="ok"}`:                    1,
		`kip_plugin_calls_total{method="Launch",outcome="insufficient_capacity"}`: 1,
		`kip_plugin_call_seconds_count{method="Launch"}`:                          2,
		`kip_match_decisions_total{outcome="placed"}`:                             1,
		`kip_capacity_fallbacks_total{reason="quota_exceeded"}`:                   1,
		`kip_api_requests_total{code="200",verb="GET"}`:                           1,
		`kip_api_request_seconds_count{verb="GET"}`:                               1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("the Go collector is not registered")
	}
	if _, ok := got["process_start_time_seconds"]; !ok {
		t.Error("the process collector is not registered")
	}
}

func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.LaunchPhase(PhaseBoundToLaunch, time.Second)
	m.PluginCall("Launch", OutcomeOK, time.Second)
	m.MatchDecision("placed")
	m.CapacityFallback(FallbackSpotToOnDemand)
	m.InstanceUp("i-1", Placement{}, time.Now())
	m.InstanceDown("i-1", time.Now())
	m.SetCells(func() []Cell { return []Cell{{}} })
	m.WarmCells("p", WarmReady, 1)
	m.WarmAssigned("p")
	m.WarmMissed()
	m.WarmLaunched("p")
	m.WarmTerminated("p", WarmEndAged)
	m.RegisterClientGo()
	if m.Cells() != nil || m.Registry() != nil {
		t.Error("a nil Metrics has cells or a registry")
	}
}

func TestWarmPool(t *testing.T) {
	m := New()
	m.WarmCells("small", WarmBooting, 1)
	m.WarmCells("small", WarmReady, 2)
	m.WarmCells("small", WarmReady, 1) // a gauge: the latest count
	m.WarmAssigned("small")
	m.WarmAssigned("small")
	m.WarmMissed()
	m.WarmLaunched("small")
	m.WarmTerminated("small", WarmEndAged)
	got := gathered(t, m)
	for name, want := range map[string]float64{
		`kip_warm_cells{pool="small",state="booting"}`:               1,
		`kip_warm_cells{pool="small",state="ready"}`:                 1,
		`kip_warm_assignments_total{pool="small"}`:                   2,
		`kip_warm_misses_total`:                                      1,
		`kip_warm_launches_total{pool="small"}`:                      1,
		`kip_warm_terminations_total{pool="small",reason="max_age"}`: 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
