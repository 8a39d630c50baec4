package scale

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Markdown renders results as the Markdown table of docs/benchmarks.md,
// one row per burst, and below it each burst's requests by kind, most
// first.
func Markdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| node | pods | all created | all Running | start p50 | start p90 | start p99 | all gone | peak RSS | CPU per pod | idle CPU | API requests per pod | idle API requests |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %.0f MiB | %.2f ms | %.2f %% of a core | %.2f | %d in %s |\n",
			r.Node, r.Pods, secs(r.AllCreated), secs(r.AllRunning), secs(r.Start.P50), secs(r.Start.P90), secs(r.Start.P99), secs(r.AllGone),
			float64(r.PeakRSS)/(1<<20), float64(r.CPUPerPod().Microseconds())/1000, 100*r.IdleCores(), r.RequestsPerPod(),
			r.IdleRequests.Total, secs(r.Idle))
	}
	b.WriteString("\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s, %d pods: %s; idle (%s): %s", r.Node, r.Pods, byKind(r.Requests), idleStart(r), byKind(r.IdleRequests))
		if len(r.Counters) > 0 {
			fmt.Fprintf(&b, "; its own counters: %s", counters(r.Counters))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// idleStart says when r's idle window started: "from 12.50 s after all
// Running", and whether the node's events had stopped by then.
func idleStart(r Result) string {
	if !r.Settled {
		return fmt.Sprintf("from %s after all Running, events still being created", secs(r.Settle))
	}
	return fmt.Sprintf("from %s after all Running, once its event creates had stopped", secs(r.Settle))
}

// byKind lists reqs's kinds, the most frequent first: "patch pods/status
// 100, update leases 3".
func byKind(reqs Requests) string {
	kinds := slices.SortedFunc(maps.Keys(reqs.ByKind), func(a, b string) int {
		return cmp.Or(cmp.Compare(reqs.ByKind[b], reqs.ByKind[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, reqs.ByKind[k]))
	}
	if len(parts) == 0 {
		return "no API requests"
	}
	return strings.Join(parts, ", ")
}

// counters lists a node's counters by name.
func counters(c map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// secs formats d in seconds with two decimals: "1.25 s".
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// Counters of a Metered node that Ratios reports per pod: kip's calls to
// its plugin (kip_plugin_calls_total) and, behind a simulated cloud, the
// calls the plugin made to the cloud's API (the simulator's own count).
const (
	PluginCalls = "kip_plugin_calls_total"
	CloudCalls  = "cloud_calls_total"
)

// Ratios renders the table of each node's figures beside the reference's
// at the same burst size (isReference picks the reference, the mock): the
// figure and, in parentheses, the node's over the reference's; then the
// node's plugin calls and cloud calls per pod (PluginCalls, CloudCalls;
// "–" where it has none). A burst size without a reference has no ratios.
func Ratios(results []Result, isReference func(Result) bool) string {
	refs := map[int]Result{}
	for _, r := range results {
		if isReference(r) {
			refs[r.Pods] = r
		}
	}
	var b strings.Builder
	b.WriteString("| node | pods | all Running | start p50 | start p99 | peak RSS | CPU per pod | API requests per pod | plugin calls per pod | cloud calls per pod |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		if isReference(r) {
			continue
		}
		ref, ok := refs[r.Pods]
		ratio := func(v, of float64) string {
			if !ok || of == 0 {
				return ""
			}
			return fmt.Sprintf(" (%.2f×)", v/of)
		}
		fmt.Fprintf(&b, "| %s | %d | %s%s | %s%s | %s%s | %.0f MiB%s | %.2f ms%s | %.2f%s | %s | %s |\n", r.Node, r.Pods,
			secs(r.AllRunning), ratio(r.AllRunning.Seconds(), ref.AllRunning.Seconds()),
			secs(r.Start.P50), ratio(r.Start.P50.Seconds(), ref.Start.P50.Seconds()),
			secs(r.Start.P99), ratio(r.Start.P99.Seconds(), ref.Start.P99.Seconds()),
			float64(r.PeakRSS)/(1<<20), ratio(float64(r.PeakRSS), float64(ref.PeakRSS)),
			float64(r.CPUPerPod().Microseconds())/1000, ratio(r.CPUPerPod().Seconds(), ref.CPUPerPod().Seconds()),
			r.RequestsPerPod(), ratio(r.RequestsPerPod(), ref.RequestsPerPod()),
			perPod(r, PluginCalls), perPod(r, CloudCalls))
	}
	return b.String()
}

// perPod is counter name's growth over r per pod, or "–" if r has no such
// counter.
func perPod(r Result, name string) string {
	v, ok := r.Counters[name]
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f", v/float64(max(r.Pods, 1)))
}
