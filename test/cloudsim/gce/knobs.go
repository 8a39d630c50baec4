package gcesim

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Operation error codes GCE puts in a failed insert's operation.
const (
	CodeZoneResourcePoolExhausted            = "ZONE_RESOURCE_POOL_EXHAUSTED"
	CodeZoneResourcePoolExhaustedWithDetails = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
	CodeStockout                             = "STOCKOUT"
	CodeQuotaExceeded                        = "QUOTA_EXCEEDED"
)

// Stockout makes instances.insert of a machine type in a zone fail as GCE
// fails it when the zone has no capacity: the operation is DONE with Code
// and no instance is created. Empty MachineType or Zone match any; the
// most specific stock-out applies.
type Stockout struct {
	MachineType string
	Zone        string
	// Code is ZONE_RESOURCE_POOL_EXHAUSTED (empty),
	// ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS or STOCKOUT.
	Code string
	// WithoutHTTPStatus leaves httpErrorStatusCode and httpErrorMessage
	// out of the failed operation, as some of GCE's do; the client's
	// Operation.Wait then returns nil and only the operation's error
	// tells.
	WithoutHTTPStatus bool
}

// InjectStockout makes inserts that match so fail until ClearStockouts
// (or another InjectStockout of the same type and zone replaces it).
func (s *Server) InjectStockout(so Stockout) { s.stockouts.Inject(so.MachineType, so.Zone, so) }

// ClearStockouts removes every injected stock-out.
func (s *Server) ClearStockouts() { s.stockouts.ClearAll() }

// stockoutError is the error of an insert's operation in a zone without
// capacity, as GCE writes it.
func (s *Server) stockoutError(zone string, so Stockout) *opError {
	code := cmp.Or(so.Code, CodeZoneResourcePoolExhausted)
	where := fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.", s.opts.Project, zone)
	e := &opError{code: code, message: where + "  Try a different zone, or try again later."}
	if code == CodeZoneResourcePoolExhaustedWithDetails {
		e.message = where + "  '(resource type:compute)'."
	}
	if !so.WithoutHTTPStatus {
		e.httpStatus, e.httpMessage = http.StatusServiceUnavailable, "SERVICE UNAVAILABLE"
	}
	return e
}

// Quota makes inserts that would exceed a regional quota fail as GCE
// fails them: the operation is DONE with QUOTA_EXCEEDED, "Quota 'CPUS'
// exceeded.  Limit: 24.0 in region us-central1.", a quotaInfo detail and
// httpErrorStatusCode 403, and no instance is created.
type Quota struct {
	// Metric is GCE's quota metric: CPUS (standard instances),
	// PREEMPTIBLE_CPUS (Spot), or a GPU's, <MODEL>_GPUS and
	// PREEMPTIBLE_<MODEL>_GPUS (NVIDIA_T4_GPUS for nvidia-tesla-t4,
	// NVIDIA_L4_GPUS for nvidia-l4).
	Metric string
	// Region is the quota's region; empty means Options.Region.
	Region string
	// Limit is the quota's limit in the message; zero means 24.
	Limit float64
}

// InjectQuota makes every insert that uses q's metric in its region fail
// until ClearQuotas.
func (s *Server) InjectQuota(q Quota) {
	q.Region, q.Limit = cmp.Or(q.Region, s.opts.Region), cmp.Or(q.Limit, 24)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas = append(s.quotas, q)
}

// ClearQuotas removes every injected quota.
func (s *Server) ClearQuotas() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas = nil
}

// quotaError is the error of an insert's operation over q, as GCE writes
// it.
func quotaError(q Quota) *opError {
	return &opError{
		code:    CodeQuotaExceeded,
		message: fmt.Sprintf("Quota '%s' exceeded.  Limit: %s in region %s.", q.Metric, strconv.FormatFloat(q.Limit, 'f', 1, 64), q.Region),
		quota: &quotaInfoJSON{
			MetricName: "compute.googleapis.com/" + strings.ToLower(q.Metric), LimitName: q.Metric + "-per-project-region",
			Dimensions: map[string]string{"region": q.Region}, Limit: q.Limit,
		},
		httpStatus: http.StatusForbidden, httpMessage: "FORBIDDEN",
	}
}

// metrics are the quota metrics an insert uses: CPUS or PREEMPTIBLE_CPUS,
// and its GPUs'.
func metrics(spot bool, body map[string]any) []string {
	prefix := ""
	if spot {
		prefix = "PREEMPTIBLE_"
	}
	out := []string{prefix + "CPUS"}
	accels, _ := body["guestAccelerators"].([]any)
	for _, a := range accels {
		m, _ := a.(map[string]any)
		t, _ := m["acceleratorType"].(string)
		model := t[strings.LastIndex(t, "/")+1:]
		model = strings.TrimPrefix(strings.TrimPrefix(model, "nvidia-tesla-"), "nvidia-")
		if model != "" {
			out = append(out, prefix+"NVIDIA_"+strings.ToUpper(strings.ReplaceAll(model, "-", "_"))+"_GPUS")
		}
	}
	return out
}

// refusal is the error an insert's operation ends with, from the
// injected quotas and stock-outs, or nil. The caller holds s.mu.
func (s *Server) refusal(zone, machineType string, spot bool, body map[string]any) *opError {
	for _, m := range metrics(spot, body) {
		for _, q := range s.quotas {
			if q.Metric == m && q.Region == s.opts.Region {
				return quotaError(q)
			}
		}
	}
	if so, ok := s.stockouts.Short(machineType, zone); ok {
		return s.stockoutError(zone, so)
	}
	return nil
}

// scheduling is what the simulator reads of an instance's scheduling.
type scheduling struct {
	spot   bool
	action string // instanceTerminationAction
}

// parseScheduling checks scheduling as GCE does: provisioningModel
// STANDARD or SPOT, instanceTerminationAction STOP or DELETE (Spot only).
func parseScheduling(v any) (scheduling, error) {
	m, _ := v.(map[string]any)
	model, _ := m["provisioningModel"].(string)
	action, _ := m["instanceTerminationAction"].(string)
	switch model {
	case "", "STANDARD", "SPOT":
	default:
		return scheduling{}, invalid("resource.scheduling.provisioningModel", model, "Must be one of [SPOT, STANDARD].")
	}
	switch action {
	case "", "STOP", "DELETE":
	default:
		return scheduling{}, invalid("resource.scheduling.instanceTerminationAction", action, "Must be one of [DELETE, STOP].")
	}
	if action != "" && model != "SPOT" {
		if p, _ := m["preemptible"].(bool); !p {
			return scheduling{}, invalid("resource.scheduling.instanceTerminationAction", action,
				"Instance termination action can only be specified for Spot or preemptible VMs.")
		}
	}
	spot := model == "SPOT"
	if p, _ := m["preemptible"].(bool); p {
		spot = true
	}
	if spot && action == "" {
		action = "STOP"
	}
	return scheduling{spot: spot, action: action}, nil
}

// Preempt reclaims a Spot instance as GCE does: the zone gets a DONE
// compute.instances.preempted operation on it ("Instance was
// preempted."), it is STOPPING for the shutdown delay while its cell
// stops, then TERMINATED; with instanceTerminationAction DELETE it is
// then deleted (gone Options.TerminatedVisible later).
func (s *Server) Preempt(zone, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	in := s.live(zone, name, now)
	switch {
	case in == nil:
		return fmt.Errorf("preempting %s/%s: no such instance", zone, name)
	case !in.spot:
		return fmt.Errorf("preempting %s/%s: not a Spot instance", zone, name)
	case in.stopping:
		return fmt.Errorf("preempting %s/%s: instance is %s", zone, name, in.status(now))
	}
	in.preempted = true
	if in.action == "DELETE" {
		in.deleted, in.visibleFor = true, s.opts.TerminatedVisible
	}
	s.stop(in, now)
	op := s.newOperation(zone, "compute.instances.preempted", apiBase+s.instancePath(zone, name), in.id, "", now, now, nil)
	op.user, op.message = "system", "Instance was preempted."
	s.log.Info("instance preempted", "instance", name, "zone", zone, "cell", in.cell.LogAttr, "action", in.action)
	return nil
}

// ScheduleMaintenance schedules a host maintenance of a running instance
// in a day, for two hours: its resourceStatus.upcomingMaintenance is
// {type SCHEDULED, maintenanceStatus PENDING, windowStartTime,
// windowEndTime, canReschedule true}, ONGOING once the window started,
// and gone once it ended.
func (s *Server) ScheduleMaintenance(zone, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	in := s.live(zone, name, now)
	if in == nil || in.stopping {
		return fmt.Errorf("scheduling maintenance of %s/%s: no such running instance", zone, name)
	}
	in.maintenance = &maintenance{start: now.Add(24 * time.Hour), end: now.Add(26 * time.Hour)}
	s.log.Info("maintenance scheduled", "instance", name, "zone", zone, "cell", in.cell.LogAttr, "window_start", in.maintenance.start)
	return nil
}

// resourceStatus is the instance's resourceStatus, or nil.
func (s *Server) resourceStatus(in *instance, now time.Time) map[string]any {
	m := in.maintenance
	if m == nil || in.stopping || !now.Before(m.end) {
		return nil
	}
	status := "PENDING"
	if !now.Before(m.start) {
		status = "ONGOING"
	}
	return map[string]any{"upcomingMaintenance": map[string]any{
		"type": "SCHEDULED", "canReschedule": status == "PENDING", "maintenanceStatus": status,
		"windowStartTime": formatTime(m.start), "windowEndTime": formatTime(m.end),
	}}
}
