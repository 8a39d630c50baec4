package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The lifecycle phases of a cell (kip_cells' phase label, Cell.Phase), as
// host/cells' doc names them.
const (
	CellPending     = "Pending"     // admitted, not launched yet (or nothing fits the pod)
	CellLaunching   = "Launching"   // Launch issued, no instance answered yet
	CellBooting     = "Booting"     // the instance exists and does not run yet
	CellConnecting  = "Connecting"  // the instance runs; its agent has not answered
	CellRunning     = "Running"     // the agent serves the pod
	CellTerminating = "Terminating" // the pod ended or was deleted; the instance is ending
	CellGone        = "Gone"        // the instance ended; the pod's status is kept until it is deleted
)

// CellPhases lists every cell phase, in lifecycle order.
var CellPhases = []string{CellPending, CellLaunching, CellBooting, CellConnecting, CellRunning, CellTerminating, CellGone}

// Cell is one cell as the admin server's /cells serves it and `kip cells`
// shows it.
type Cell struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	CellID    string `json:"cellID"`
	// Instance is the instance's ID; empty before Launch answered.
	Instance     string `json:"instance,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	// HourlyPrice is in US dollars; nil when unknown (or not placed).
	HourlyPrice *float64 `json:"hourlyPrice,omitempty"`
	// Phase is one of CellPhases.
	Phase string `json:"phase"`
	// PendingReason is why a Pending pod waits (its status reason, else
	// its first waiting container's reason); empty once the pod left
	// Pending.
	PendingReason string `json:"pendingReason,omitempty"`
	// Created is when this kip took the cell on (created or adopted).
	Created time.Time `json:"created"`
}

// cellsCollector collects kip_cells and kip_pending_pods from the cell
// manager's snapshot when scraped.
type cellsCollector struct {
	mu     sync.Mutex
	source func() []Cell
}

var (
	descCells   = prometheus.NewDesc(Namespace+"_cells", "Cells of this node by lifecycle phase (Pending, Launching, Booting, Connecting, Running, Terminating, Gone).", []string{"phase"}, nil)
	descPending = prometheus.NewDesc(Namespace+"_pending_pods", "Pods of this node still Pending, by reason: the pod's status reason (NoInstanceType: nothing fits) or its first waiting container's (ContainerCreating while the cell launches and boots, PodInitializing, ErrImagePull, ...).", []string{"reason"}, nil)
)

// SetCells makes source the cells kip_cells, kip_pending_pods and Cells
// report; host/cells' Manager.Cells is the one.
func (m *Metrics) SetCells(source func() []Cell) {
	if m == nil {
		return
	}
	m.cells.mu.Lock()
	m.cells.source = source
	m.cells.mu.Unlock()
}

// Cells is the cells now, as SetCells' source says; none before SetCells.
func (m *Metrics) Cells() []Cell {
	if m == nil {
		return nil
	}
	return m.cells.snapshot()
}

func (c *cellsCollector) snapshot() []Cell {
	c.mu.Lock()
	source := c.source
	c.mu.Unlock()
	if source == nil {
		return nil
	}
	return source()
}

func (c *cellsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCells
	ch <- descPending
}

func (c *cellsCollector) Collect(ch chan<- prometheus.Metric) {
	phases := make(map[string]int, len(CellPhases))
	for _, p := range CellPhases {
		phases[p] = 0 // every phase has a series, zero included
	}
	pending := map[string]int{}
	for _, cell := range c.snapshot() {
		phases[cell.Phase]++
		if cell.PendingReason != "" {
			pending[cell.PendingReason]++
		}
	}
	for p, n := range phases {
		ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(n), p)
	}
	for r, n := range pending {
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n), r)
	}
}
