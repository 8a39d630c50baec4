package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// StatsProvider is an optional interface of Pods: the stats behind the
// kubelet API's /stats/summary and /metrics/resource. Without it both
// answer 501 Not Implemented.
type StatsProvider interface {
	// PodStats returns the stats of the node's running pods as the
	// kubelet's summary API reports them, read from their cells now;
	// with onlyCPUAndMemory, CPU and memory alone (what metrics-server
	// reads). A pod whose cell does not answer in time is left out, not
	// an error; an error means no answer at all.
	PodStats(ctx context.Context, onlyCPUAndMemory bool) ([]statsv1alpha1.PodStats, error)
}

// Paths of the kubelet API's stats routes.
const (
	summaryPath         = "/stats/summary"
	metricsResourcePath = "/metrics/resource"
)

// statsRoutes serves /stats/summary and /metrics/resource from a
// StatsProvider, for the node name and the time kip started (the node's
// startTime in the summary).
type statsRoutes struct {
	stats StatsProvider
	node  string
	start time.Time
	log   *slog.Logger
}

// summary is the kubelet's Summary: the pods, and the node as their sums
// (a virtual node has no machine of its own to measure).
func (s statsRoutes) summary(ctx context.Context, onlyCPUAndMemory bool) (*statsv1alpha1.Summary, error) {
	pods, err := s.stats.PodStats(ctx, onlyCPUAndMemory)
	if err != nil {
		return nil, err
	}
	return &statsv1alpha1.Summary{Node: nodeStats(s.node, s.start, pods), Pods: pods}, nil
}

// nodeStats is the virtual node's CPU and memory: the sums of its pods',
// at the latest of their sample times. The node's usage in nano-cores is
// given only when every pod's is known. Its cumulative CPU falls when a
// pod ends, which metrics-server takes as a counter reset.
func nodeStats(name string, start time.Time, pods []statsv1alpha1.PodStats) statsv1alpha1.NodeStats {
	n := statsv1alpha1.NodeStats{NodeName: name, StartTime: metav1.NewTime(start)}
	var cpu statsv1alpha1.CPUStats
	var mem statsv1alpha1.MemoryStats
	var cores, coreNanos, usage, workingSet, rss, faults, majorFaults uint64
	ratesKnown := true
	for _, p := range pods {
		if c := p.CPU; c != nil {
			if c.Time.After(cpu.Time.Time) {
				cpu.Time = c.Time
			}
			coreNanos += ptr.Deref(c.UsageCoreNanoSeconds, 0)
			if c.UsageNanoCores == nil {
				ratesKnown = false
			}
			cores += ptr.Deref(c.UsageNanoCores, 0)
		}
		if m := p.Memory; m != nil {
			if m.Time.After(mem.Time.Time) {
				mem.Time = m.Time
			}
			usage += ptr.Deref(m.UsageBytes, 0)
			workingSet += ptr.Deref(m.WorkingSetBytes, 0)
			rss += ptr.Deref(m.RSSBytes, 0)
			faults += ptr.Deref(m.PageFaults, 0)
			majorFaults += ptr.Deref(m.MajorPageFaults, 0)
		}
	}
	if cpu.Time.IsZero() {
		cpu.Time = metav1.Now()
		mem.Time = cpu.Time
	}
	cpu.UsageCoreNanoSeconds = ptr.To(coreNanos)
	if ratesKnown {
		cpu.UsageNanoCores = ptr.To(cores)
	}
	mem.UsageBytes, mem.WorkingSetBytes, mem.RSSBytes = ptr.To(usage), ptr.To(workingSet), ptr.To(rss)
	mem.PageFaults, mem.MajorPageFaults = ptr.To(faults), ptr.To(majorFaults)
	n.CPU, n.Memory = &cpu, &mem
	return n
}

// serveSummary is GET /stats/summary, as JSON;
// ?only_cpu_and_memory=true asks for CPU and memory alone, as
// metrics-server and the kubelet's own resource metrics do.
func (s statsRoutes) serveSummary(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	only := r.URL.Query().Get("only_cpu_and_memory") == "true"
	sum, err := s.summary(r.Context(), only)
	if err != nil {
		s.log.ErrorContext(r.Context(), "reading the pods' stats", "error", err)
		http.Error(w, fmt.Sprintf("reading the pods' stats: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(sum); err != nil {
		s.log.DebugContext(r.Context(), "writing the stats summary", "error", err)
	}
}

// serveMetricsResource is GET /metrics/resource: the kubelet's resource
// metrics (pkg/kubelet/metrics/collectors/resource_metrics.go) in the
// Prometheus text format, from the pods' CPU and memory.
func (s statsRoutes) serveMetricsResource(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	sum, err := s.summary(r.Context(), true)
	if err != nil {
		s.log.ErrorContext(r.Context(), "reading the pods' stats for the resource metrics", "error", err)
		sum = nil
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := writeResourceMetrics(w, sum); err != nil {
		s.log.DebugContext(r.Context(), "writing the resource metrics", "error", err)
	}
}

// A metric family of /metrics/resource: the kubelet's name, help text
// (with its stability level, as component-base prints it) and type.
type family struct {
	name, help, typ string
	samples         []sample
}

// sample is one series: its label pairs in order, its value, and its
// timestamp (zero: none).
type sample struct {
	labels [][2]string
	value  float64
	at     time.Time
}

// writeResourceMetrics writes the kubelet's resource metrics of sum (nil:
// reading the stats failed, resource_scrape_error 1 alone) in the
// Prometheus text format, families sorted by name and empty ones left out
// as a Prometheus registry gathers them.
func writeResourceMetrics(w io.Writer, sum *statsv1alpha1.Summary) error {
	var (
		ctrCPU   = family{name: "container_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the container in core-seconds", typ: "counter"}
		ctrMem   = family{name: "container_memory_working_set_bytes", help: "[STABLE] Current working set of the container in bytes", typ: "gauge"}
		ctrStart = family{name: "container_start_time_seconds", help: "[STABLE] Start time of the container since unix epoch in seconds", typ: "gauge"}
		nodeCPU  = family{name: "node_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the node in core-seconds", typ: "counter"}
		nodeMem  = family{name: "node_memory_working_set_bytes", help: "[STABLE] Current working set of the node in bytes", typ: "gauge"}
		podCPU   = family{name: "pod_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", typ: "counter"}
		podMem   = family{name: "pod_memory_working_set_bytes", help: "[STABLE] Current working set of the pod in bytes", typ: "gauge"}
		scrape   = family{name: "resource_scrape_error", help: "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", typ: "gauge"}
	)
	if sum == nil {
		scrape.samples = []sample{{value: 1}}
	} else {
		scrape.samples = []sample{{value: 0}}
		cpuSample(&nodeCPU, nil, sum.Node.CPU)
		memSample(&nodeMem, nil, sum.Node.Memory)
		for _, p := range sum.Pods {
			podLabels := [][2]string{{"namespace", p.PodRef.Namespace}, {"pod", p.PodRef.Name}}
			for _, c := range p.Containers {
				labels := [][2]string{{"container", c.Name}, podLabels[0], podLabels[1]}
				if c.StartTime.Unix() > 0 {
					ctrStart.samples = append(ctrStart.samples, sample{labels: labels, value: float64(c.StartTime.UnixNano()) / float64(time.Second)})
				}
				cpuSample(&ctrCPU, labels, c.CPU)
				memSample(&ctrMem, labels, c.Memory)
			}
			cpuSample(&podCPU, podLabels, p.CPU)
			memSample(&podMem, podLabels, p.Memory)
		}
	}
	var b strings.Builder
	for _, f := range []family{ctrCPU, ctrMem, ctrStart, nodeCPU, nodeMem, podCPU, podMem, scrape} {
		if len(f.samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for _, s := range f.samples {
			b.WriteString(f.name)
			if len(s.labels) > 0 {
				b.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `%s="%s"`, l[0], labelEscaper.Replace(l[1]))
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(s.value, 'g', -1, 64))
			if !s.at.IsZero() {
				b.WriteByte(' ')
				b.WriteString(strconv.FormatInt(s.at.UnixMilli(), 10))
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cpuSample(f *family, labels [][2]string, c *statsv1alpha1.CPUStats) {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return
	}
	f.samples = append(f.samples, sample{labels: labels, value: float64(*c.UsageCoreNanoSeconds) / float64(time.Second), at: c.Time.Time})
}

func memSample(f *family, labels [][2]string, m *statsv1alpha1.MemoryStats) {
	if m == nil || m.WorkingSetBytes == nil {
		return
	}
	f.samples = append(f.samples, sample{labels: labels, value: float64(*m.WorkingSetBytes), at: m.Time.Time})
}

// labelEscaper escapes a label value as the Prometheus text format does:
// backslash, double quote and line feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
