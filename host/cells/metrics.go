package cells

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/metrics"
)

// WithMetrics makes the Manager report to m: each cell's launch phases,
// the matcher's decisions and capacity fallbacks, the instances and their
// cost, and the cells by phase and the pending pods by reason (m.SetCells
// with Manager.Cells).
func WithMetrics(m *metrics.Metrics) Option {
	return func(d *cellDeps) { d.metrics = m }
}

// launchTimes are the moments of a cell's launch that its phases are
// measured between (metrics.Phase); zero until reached. A cell adopted
// after a restart is not measured: its launch happened before.
type launchTimes struct {
	measured   bool
	bound      time.Time // the pod's PodScheduled condition, or when the cell was made
	launched   time.Time // the first Launch call
	running    time.Time // the instance runs and has an address
	agent      time.Time // the agent first answered
	podRunning time.Time // the agent reported the pod Running
}

// newLaunchTimes starts the measure of pod's cell at its binding: the
// PodScheduled condition's time, or now when the pod has none.
func newLaunchTimes(pod *corev1.Pod, adopted bool, now time.Time) launchTimes {
	bound := now
	if cond := findCondition(pod.Status.Conditions, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionTrue && !cond.LastTransitionTime.IsZero() {
		bound = cond.LastTransitionTime.Time
	}
	return launchTimes{measured: !adopted, bound: bound}
}

// now is the cells' clock: Config.Now, or time.Now for deps built
// without one (tests of a single cell).
func (d *cellDeps) now() time.Time {
	if d.cfg.Now == nil {
		return time.Now()
	}
	return d.cfg.Now()
}

// reached records the moment at of the step *at (one of c.times' fields)
// once, when its previous step prev was reached, and reports the phase
// from prev to it (and the whole way, once the pod runs).
func (c *cell) reached(step func(*launchTimes) *time.Time, prev func(*launchTimes) time.Time, phase metrics.Phase) {
	now := c.d.now()
	c.mu.Lock()
	t := &c.times
	at, from := step(t), prev(t)
	if !t.measured || !at.IsZero() || from.IsZero() {
		c.mu.Unlock()
		return
	}
	*at = now
	bound := t.bound
	c.mu.Unlock()
	c.d.metrics.LaunchPhase(phase, now.Sub(from))
	if phase == metrics.PhaseAgentToPodRunning {
		c.d.metrics.LaunchPhase(metrics.PhaseBoundToPodRunning, now.Sub(bound))
	}
}

func (c *cell) launchIssued() {
	c.reached(func(t *launchTimes) *time.Time { return &t.launched }, func(t *launchTimes) time.Time { return t.bound }, metrics.PhaseBoundToLaunch)
}

func (c *cell) instanceRunning() {
	c.reached(func(t *launchTimes) *time.Time { return &t.running }, func(t *launchTimes) time.Time { return t.launched }, metrics.PhaseLaunchToRunning)
}

func (c *cell) agentConnected() {
	c.reached(func(t *launchTimes) *time.Time { return &t.agent }, func(t *launchTimes) time.Time { return t.running }, metrics.PhaseRunningToAgent)
}

func (c *cell) podRunning() {
	c.reached(func(t *launchTimes) *time.Time { return &t.podRunning }, func(t *launchTimes) time.Time { return t.agent }, metrics.PhaseAgentToPodRunning)
}

// instanceUp counts the cell's instance, placed as annotations say (the
// cell's placement annotations, or for an adopted cell its pod's), from
// now until terminator ends it.
func (c *cell) instanceUp(id string, annotations map[string]string) {
	c.d.metrics.InstanceUp(id, placementOf(annotations), c.d.now())
}

// placementOf reads a placement back from its annotations
// (placedAnnotations); a price that does not parse is unknown.
func placementOf(a map[string]string) metrics.Placement {
	p := metrics.Placement{InstanceType: a[AnnotationPlacedType], Zone: a[AnnotationPlacedZone], CapacityType: a[AnnotationPlacedCapacityType]}
	if price, err := strconv.ParseFloat(a[AnnotationPlacedPrice], 64); err == nil {
		p.HourlyPrice, p.PriceKnown = price, true
	}
	return p
}

// Cells is every cell of the node as it is now, for the admin server's
// /cells and the kip_cells and kip_pending_pods metrics.
func (m *Manager) Cells() []metrics.Cell {
	all := m.cells.all()
	out := make([]metrics.Cell, 0, len(all))
	for _, c := range all {
		out = append(out, c.snapshot())
	}
	return out
}

// snapshot is the cell as /cells shows it.
func (c *cell) snapshot() metrics.Cell {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := metrics.Cell{
		Namespace: c.namespace, Pod: c.name, PodUID: string(c.uid), CellID: c.id, Created: c.created,
		Phase: c.phase.metric(), PendingReason: pendingReason(&c.status),
	}
	if c.instance != nil {
		s.Instance = c.instance.ID
	}
	placed := c.placed
	if len(placed) == 0 && c.adopted != nil {
		placed = c.desired.Annotations
	}
	if p := placementOf(placed); p.InstanceType != "" {
		s.InstanceType, s.Zone, s.CapacityType = p.InstanceType, p.Zone, p.CapacityType
		if p.PriceKnown {
			s.HourlyPrice = &p.HourlyPrice
		}
	}
	return s
}

// pendingReason is why a Pending pod waits: its status reason, else its
// first waiting container's reason (init containers first), else
// "Unknown"; empty once the pod left Pending.
func pendingReason(st *corev1.PodStatus) string {
	if st.Phase != corev1.PodPending && st.Phase != "" {
		return ""
	}
	if st.Reason != "" {
		return st.Reason
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				return cs.State.Waiting.Reason
			}
		}
	}
	return "Unknown"
}
