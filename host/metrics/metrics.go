package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Namespace prefixes every metric kip registers.
const Namespace = "kip"

// Phase is one step of a cell's launch, measured from the pod's own
// timestamps (kip_launch_phase_seconds' phase label).
type Phase string

// The launch phases: bound (the pod's PodScheduled condition, or when kip
// first saw the pod) → launch issued (the first Launch call) → instance
// running (the cloud says it runs and it has an address) → agent connected
// (the cell's agent first answered) → pod Running (the agent reports the
// pod Running). PhaseBoundToPodRunning is the whole way.
const (
	PhaseBoundToLaunch     Phase = "bound_to_launch"
	PhaseLaunchToRunning   Phase = "launch_to_running"
	PhaseRunningToAgent    Phase = "running_to_agent"
	PhaseAgentToPodRunning Phase = "agent_to_pod_running"
	PhaseBoundToPodRunning Phase = "bound_to_pod_running"
)

// Phases lists every Phase, in the order a cell passes them (the total
// last).
var Phases = []Phase{PhaseBoundToLaunch, PhaseLaunchToRunning, PhaseRunningToAgent, PhaseAgentToPodRunning, PhaseBoundToPodRunning}

// Outcomes of a plugin call (kip_plugin_calls_total's outcome label)
// beyond the pluginapi error kinds host/plugin names.
const OutcomeOK = "ok"

// Metrics is kip's registry and the metrics in it. Build one with New; a
// nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	launchPhase       *prometheus.HistogramVec
	pluginCalls       *prometheus.CounterVec
	pluginSeconds     *prometheus.HistogramVec
	matchDecisions    *prometheus.CounterVec
	capacityFallbacks *prometheus.CounterVec
	apiRequests       *prometheus.CounterVec
	apiSeconds        *prometheus.HistogramVec

	instances *instances
	warm      *warm
	process   process
	cells     *cellsCollector
}

// Option changes how New builds Metrics.
type Option func(*Metrics)

// WithClock replaces time.Now, for the instance-hours of tests.
func WithClock(now func() time.Time) Option { return func(m *Metrics) { m.now = now } }

// callBuckets are the buckets of a call's seconds: 5 ms to a minute.
var callBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New builds kip's registry with the Go and process collectors and every
// kip_* metric.
func New(opts ...Option) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now}
	for _, opt := range opts {
		opt(m)
	}
	m.launchPhase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "launch_phase_seconds",
		Help: "Seconds a cell took for each phase of its launch: bound_to_launch (pod bound, from its PodScheduled condition or when kip first saw it, to the first Launch call), " +
			"launch_to_running (to the cloud reporting the instance running), running_to_agent (to the cell's agent first answering), " +
			"agent_to_pod_running (to the agent reporting the pod Running) and bound_to_pod_running (the whole way). Cells adopted after a restart are not measured.",
		// 0.25 s to about 68 minutes.
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 15),
	}, []string{"phase"})
	m.pluginCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "plugin_calls_total",
		Help: "Calls kip made to the cloud plugin, by method (Launch, Describe, ...) and outcome: ok, or the pluginapi error kind (not_found, insufficient_capacity, quota_exceeded, throttled, invalid_config, unsupported, transient, not_configured, unreachable, canceled, deadline_exceeded, other).",
	}, []string{"method", "outcome"})
	m.pluginSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "plugin_call_seconds",
		Help:    "Seconds each call to the cloud plugin took, by method, whatever its outcome.",
		Buckets: callBuckets,
	}, []string{"method"})
	m.matchDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "match_decisions_total",
		Help: "Rankings of a pod's instance offerings, by outcome: placed (at least one candidate), unsatisfiable (nothing fits the pod; it stays Pending), error (the catalog could not be read).",
	}, []string{"outcome"})
	m.capacityFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "capacity_fallbacks_total",
		Help: "Times a cell went past its best offering, by reason: insufficient_capacity and quota_exceeded (the cloud refused the offering; the next candidate is launched), spot_to_on_demand (a pod that asked for spot was ranked on on-demand first: no spot offering fits or has capacity).",
	}, []string{"reason"})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "api_requests_total",
		Help: "Requests kip's Kubernetes clients made to the API server, by HTTP verb and status code (<error> when no response came).",
	}, []string{"verb", "code"})
	m.apiSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "api_request_seconds",
		Help:    "Seconds each request of kip's Kubernetes clients to the API server took, by HTTP verb (watches count until their response headers).",
		Buckets: callBuckets,
	}, []string{"verb"})
	m.instances = newInstances(m.now)
	m.cells = &cellsCollector{}
	m.warm = newWarm()
	m.reg.MustRegister(m.warm.collectors()...)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.launchPhase, m.pluginCalls, m.pluginSeconds, m.matchDecisions, m.capacityFallbacks, m.apiRequests, m.apiSeconds,
		m.instances, m.cells,
	)
	m.registerProcess()
	return m
}

// Registry is kip's registry, for the admin server to serve and for a
// component to add a metric of its own (kip_leader, the node
// certificate's expiry); nil for a nil Metrics.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// LaunchPhase records how long a cell took for phase; a negative d (clocks
// a second apart: the API server's timestamps have seconds) counts as 0.
func (m *Metrics) LaunchPhase(phase Phase, d time.Duration) {
	if m == nil {
		return
	}
	m.launchPhase.WithLabelValues(string(phase)).Observe(max(d, 0).Seconds())
}

// PluginCall records one call to the plugin: its method, outcome (OutcomeOK
// or an error kind) and duration.
func (m *Metrics) PluginCall(method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.pluginCalls.WithLabelValues(method, outcome).Inc()
	m.pluginSeconds.WithLabelValues(method).Observe(d.Seconds())
}

// MatchDecision counts a ranking of a pod's offerings by its outcome
// (host/match's Outcome).
func (m *Metrics) MatchDecision(outcome string) {
	if m == nil {
		return
	}
	m.matchDecisions.WithLabelValues(outcome).Inc()
}

// Capacity fallback reasons (kip_capacity_fallbacks_total's reason label).
const (
	FallbackInsufficientCapacity = "insufficient_capacity"
	FallbackQuotaExceeded        = "quota_exceeded"
	FallbackSpotToOnDemand       = "spot_to_on_demand"
)

// CapacityFallback counts a cell going past its best offering for reason.
func (m *Metrics) CapacityFallback(reason string) {
	if m == nil {
		return
	}
	m.capacityFallbacks.WithLabelValues(reason).Inc()
}

// registerClientGo makes client-go's request metrics process-wide once.
var registerClientGo sync.Once

// RegisterClientGo makes every client-go client of this process report
// its requests into m (kip_api_requests_total, kip_api_request_seconds),
// through k8s.io/client-go/tools/metrics. client-go takes one set of
// adapters per process: the first call wins, later ones do nothing.
func (m *Metrics) RegisterClientGo() {
	if m == nil {
		return
	}
	registerClientGo.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResult{m}, RequestLatency: requestLatency{m}})
	})
}

// requestResult is client-go's ResultMetric over kip_api_requests_total.
type requestResult struct{ m *Metrics }

func (r requestResult) Increment(_ context.Context, code, method, _ string) {
	r.m.apiRequests.WithLabelValues(method, code).Inc()
}

// requestLatency is client-go's LatencyMetric over kip_api_request_seconds.
type requestLatency struct{ m *Metrics }

func (r requestLatency) Observe(_ context.Context, verb string, _ url.URL, latency time.Duration) {
	r.m.apiSeconds.WithLabelValues(verb).Observe(latency.Seconds())
}

var (
	_ clientmetrics.ResultMetric  = requestResult{}
	_ clientmetrics.LatencyMetric = requestLatency{}
)
