package metrics

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// dashboard is deploy/grafana/kip.json, the Grafana dashboard built on
// these metrics.
const dashboard = "../../deploy/grafana/kip.json"

// panel is what the test reads of a Grafana panel: its queries, and the
// panels of a row.
type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// metricName is a metric name in a PromQL query: a word of the names
// kip's registry holds (kip_, go_, process_), not a label or function.
var metricName = regexp.MustCompile(`\b(?:kip|go|process)_[a-zA-Z0-9_]+`)

// TestDashboardQueriesRegisteredMetrics fails when a query of the
// dashboard names a metric kip does not register (a misspelling, a
// rename).
func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("parsing %s: %v", dashboard, err)
	}
	registered := registeredNames(t)
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, target := range p.Targets {
				exprs = append(exprs, target.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(exprs) == 0 {
		t.Fatalf("%s has no queries", dashboard)
	}
	used := map[string]bool{}
	for _, expr := range exprs {
		for _, name := range metricName.FindAllString(expr, -1) {
			used[name] = true
			if !registered[name] {
				t.Errorf("%s queries %s, which kip does not register (in %q)", dashboard, name, expr)
			}
		}
	}
	// Every kip_ metric is on the dashboard (a histogram through any of
	// its series).
	for name := range registered {
		if !strings.HasPrefix(name, Namespace+"_") || histogramSeries(name, registered) {
			continue
		}
		if !used[name] && !used[name+"_bucket"] && !used[name+"_count"] && !used[name+"_sum"] {
			t.Errorf("%s shows no panel of %s", dashboard, name)
		}
	}
}

// histogramSeries reports whether name is a registered histogram's
// _bucket, _count or _sum series.
func histogramSeries(name string, registered map[string]bool) bool {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
			return true
		}
	}
	return false
}

// registeredNames is every series name kip's registry serves once each
// metric has a sample: a histogram's _bucket, _count and _sum too.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	m.LaunchPhase(PhaseBoundToLaunch, time.Second)
	m.PluginCall("Launch", OutcomeOK, time.Second)
	m.MatchDecision("placed")
	m.CapacityFallback(FallbackSpotToOnDemand)
	m.WarmCells("small", WarmReady, 2)
	m.WarmAssigned("small")
	m.WarmLaunched("small")
	m.WarmTerminated("small", WarmEndAged)
	m.InstanceUp("i-1", Placement{InstanceType: "t", PriceKnown: true}, time.Now())
	m.SetCells(func() []Cell { return []Cell{{Phase: CellPending, PendingReason: "NoInstanceType"}} })
	requestResult{m}.Increment(t.Context(), "200", "GET", "")
	requestLatency{m}.Observe(t.Context(), "GET", url.URL{}, time.Second)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	var kip []string
	for n := range names {
		if strings.HasPrefix(n, Namespace+"_") {
			kip = append(kip, n)
		}
	}
	sort.Strings(kip)
	t.Logf("kip's metrics: %s", strings.Join(kip, " "))
	return names
}
