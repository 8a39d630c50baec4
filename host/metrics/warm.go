package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Standby cell states (kip_warm_cells' state label): booting (launched,
// its agent not joined yet) and ready (joined, waiting for a pod).
const (
	WarmBooting = "booting"
	WarmReady   = "ready"
)

// Reasons a standby cell was terminated (kip_warm_terminations_total's
// reason label).
const (
	WarmEndAged       = "max_age"     // it waited longer than its pool's maxAge
	WarmEndBootFail   = "boot_failed" // it did not boot or join in time
	WarmEndLost       = "lost"        // its instance ended under it
	WarmEndUnneeded   = "unneeded"    // found after a restart: its pool is gone, full, or it aged
	WarmEndUnknowable = "unreachable" // found after a restart: its agent did not say whether it runs a pod
)

// warm holds the warm pool's metrics.
type warm struct {
	cells        *prometheus.GaugeVec
	assignments  *prometheus.CounterVec
	misses       prometheus.Counter
	launches     *prometheus.CounterVec
	terminations *prometheus.CounterVec
}

func newWarm() *warm {
	return &warm{
		cells: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "warm_cells",
			Help: "Standby cells of the warm pool now, by pool and state: booting (launched, its agent not joined yet) or ready (waiting for a pod).",
		}, []string{"pool", "state"}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warm_assignments_total",
			Help: "Pods placed on a ready standby cell of the warm pool (hits), by pool.",
		}, []string{"pool"}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warm_misses_total",
			Help: "Pods launched a cell of their own while a warm pool is configured: no ready standby fitted them within warmPool.maxPremium.",
		}),
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warm_launches_total",
			Help: "Standby cells launched to fill the warm pool, by pool.",
		}, []string{"pool"}),
		terminations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warm_terminations_total",
			Help: "Standby cells terminated without a pod, by pool and reason: max_age, boot_failed, lost (its instance ended), unneeded (found after a restart, its pool gone or full), unreachable (found after a restart, its agent silent). Cells given to a pod end as any pod's cell does.",
		}, []string{"pool", "reason"}),
	}
}

func (w *warm) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.cells, w.assignments, w.misses, w.launches, w.terminations}
}

// WarmCells sets the number of standby cells of pool in state.
func (m *Metrics) WarmCells(pool, state string, n int) {
	if m == nil {
		return
	}
	m.warm.cells.WithLabelValues(pool, state).Set(float64(n))
}

// WarmAssigned counts a pod placed on a standby cell of pool.
func (m *Metrics) WarmAssigned(pool string) {
	if m == nil {
		return
	}
	m.warm.assignments.WithLabelValues(pool).Inc()
}

// WarmMissed counts a pod that no standby cell fitted.
func (m *Metrics) WarmMissed() {
	if m == nil {
		return
	}
	m.warm.misses.Inc()
}

// WarmLaunched counts a standby cell launched for pool.
func (m *Metrics) WarmLaunched(pool string) {
	if m == nil {
		return
	}
	m.warm.launches.WithLabelValues(pool).Inc()
}

// WarmTerminated counts a standby cell of pool terminated for reason.
func (m *Metrics) WarmTerminated(pool, reason string) {
	if m == nil {
		return
	}
	m.warm.terminations.WithLabelValues(pool, reason).Inc()
}
