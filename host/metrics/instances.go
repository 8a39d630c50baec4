package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Placement is where an instance runs and what it costs: the cell's
// placement (the pod's cell.kipcell.io/* annotations).
type Placement struct {
	InstanceType string
	Zone         string
	CapacityType string
	// HourlyPrice is in US dollars; meaningless unless PriceKnown.
	HourlyPrice float64
	PriceKnown  bool
}

// offering is the labels an instance is counted under.
type offering struct{ instanceType, zone, capacityType string }

func (o offering) labels() []string { return []string{o.instanceType, o.zone, o.capacityType} }

// instance is a running instance: where, what it costs and since when.
type instance struct {
	offering
	price float64
	known bool
	since time.Time
}

// instances tracks the running instances (InstanceUp, InstanceDown) and
// collects their cost, count and hours.
type instances struct {
	now func() time.Time

	mu      sync.Mutex
	running map[string]instance   // by instance ID
	closed  map[offering]float64  // hours of instances that ended
	seen    map[offering]struct{} // every offering ever counted: its series stay, at 0
}

func newInstances(now func() time.Time) *instances {
	return &instances{now: now, running: map[string]instance{}, closed: map[offering]float64{}, seen: map[offering]struct{}{}}
}

var (
	labelsOffering  = []string{"instance_type", "zone", "capacity_type"}
	descHourlyCost  = prometheus.NewDesc(Namespace+"_hourly_cost", "Hourly cost in US dollars of the instances running now, from their placements' prices, by instance type, zone and capacity type. Instances whose price the plugin's catalog does not know are left out (kip_instances_unknown_price): a price is never guessed.", labelsOffering, nil)
	descInstances   = prometheus.NewDesc(Namespace+"_instances", "Instances running now for this node's cells, by instance type, zone and capacity type.", labelsOffering, nil)
	descUnknown     = prometheus.NewDesc(Namespace+"_instances_unknown_price", "Instances running now whose hourly price the plugin's catalog does not know, by instance type, zone and capacity type; kip_hourly_cost leaves them out.", labelsOffering, nil)
	descHours       = prometheus.NewDesc(Namespace+"_instance_hours_total", "Instance-hours of this node's cells since kip started, from each instance's launch (or adoption) to its termination, by instance type, zone and capacity type.", labelsOffering, nil)
	instanceMetrics = []*prometheus.Desc{descHourlyCost, descInstances, descUnknown, descHours}
)

// InstanceUp records instance id running at p since at. An instance
// already recorded keeps its first record.
func (m *Metrics) InstanceUp(id string, p Placement, at time.Time) {
	if m == nil || id == "" {
		return
	}
	s := m.instances
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[id]; ok {
		return
	}
	o := offering{p.InstanceType, p.Zone, p.CapacityType}
	s.running[id] = instance{offering: o, price: p.HourlyPrice, known: p.PriceKnown, since: at}
	s.seen[o] = struct{}{}
}

// InstanceDown records instance id ended at at (terminated, or found
// gone); an instance not recorded is ignored.
func (m *Metrics) InstanceDown(id string, at time.Time) {
	if m == nil {
		return
	}
	s := m.instances
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.running[id]
	if !ok {
		return
	}
	delete(s.running, id)
	s.closed[inst.offering] += max(at.Sub(inst.since), 0).Hours()
}

func (s *instances) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range instanceMetrics {
		ch <- d
	}
}

func (s *instances) Collect(ch chan<- prometheus.Metric) {
	now := s.now()
	type sums struct {
		cost, hours   float64
		count, nPrice int
	}
	s.mu.Lock()
	by := make(map[offering]*sums, len(s.seen))
	for o := range s.seen {
		by[o] = &sums{hours: s.closed[o]}
	}
	for _, inst := range s.running {
		t := by[inst.offering]
		t.count++
		t.hours += max(now.Sub(inst.since), 0).Hours()
		if inst.known {
			t.cost += inst.price
		} else {
			t.nPrice++
		}
	}
	s.mu.Unlock()
	for o, t := range by {
		l := o.labels()
		ch <- prometheus.MustNewConstMetric(descHourlyCost, prometheus.GaugeValue, t.cost, l...)
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(t.count), l...)
		ch <- prometheus.MustNewConstMetric(descUnknown, prometheus.GaugeValue, float64(t.nPrice), l...)
		ch <- prometheus.MustNewConstMetric(descHours, prometheus.CounterValue, t.hours, l...)
	}
}
