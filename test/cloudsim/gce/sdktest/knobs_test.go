package sdktest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// TestQuotaExceeded: a regional quota is the insert operation's
// QUOTA_EXCEEDED, with its quotaInfo detail; Wait returns the 403 and the
// operation's error says which quota.
func TestQuotaExceeded(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	sim.InjectQuota(gcesim.Quota{Metric: "PREEMPTIBLE_CPUS", Limit: 8})
	op, err := insert(ctx, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"}) // Spot
	if err != nil {
		t.Fatalf("insert: %v (a quota is the operation's error, not the call's)", err)
	}
	if code, _ := apiReason(op.Wait(ctx)); code != http.StatusForbidden {
		t.Errorf("Wait: HTTP %d, want 403", code)
	}
	errs := op.Proto().GetError().GetErrors()
	if len(errs) != 1 || errs[0].GetCode() != gcesim.CodeQuotaExceeded ||
		errs[0].GetMessage() != "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 8.0 in region us-central1." {
		t.Fatalf("operation errors %v, want QUOTA_EXCEEDED of PREEMPTIBLE_CPUS", errs)
	}
	q := errs[0].GetErrorDetails()[0].GetQuotaInfo()
	got := map[string]any{"metric": q.GetMetricName(), "limitName": q.GetLimitName(), "limit": q.GetLimit(), "dimensions": q.GetDimensions()}
	want := map[string]any{
		"metric": "compute.googleapis.com/preemptible_cpus", "limitName": "PREEMPTIBLE_CPUS-per-project-region", "limit": 8.0,
		"dimensions": map[string]string{"region": "us-central1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quotaInfo (-want +got):\n%s", diff)
	}
}

// TestStockoutCodes: each stock-out code reaches the operation's error.
func TestStockoutCodes(t *testing.T) {
	for _, code := range []string{gcesim.CodeZoneResourcePoolExhausted, gcesim.CodeZoneResourcePoolExhaustedWithDetails, gcesim.CodeStockout} {
		t.Run(code, func(t *testing.T) {
			ctx := t.Context()
			sim, c := startSim(t, gcesim.Options{})
			sim.InjectStockout(gcesim.Stockout{Zone: zoneA, Code: code})
			op, err := insert(ctx, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			if status, _ := apiReason(op.Wait(ctx)); status != http.StatusServiceUnavailable {
				t.Errorf("Wait: HTTP %d, want 503", status)
			}
			if got := op.Proto().GetError().GetErrors()[0].GetCode(); got != code {
				t.Errorf("operation error %s, want %s", got, code)
			}
		})
	}
}

// TestRateLimitExceeded: over the rate limit, a call is an
// *apierror.APIError with HTTP 403 wrapping a *googleapi.Error whose
// reason is rateLimitExceeded; Get's retries (503 and 504 only) do not
// hide it. The body also carries GCE's google.rpc.ErrorInfo
// (RATE_LIMIT_EXCEEDED), but APIError.Reason() is "": gax parses the
// details strictly and GCE's body has the legacy "errors" list beside
// them, so a plugin reads the reason from the googleapi.Error.
func TestRateLimitExceeded(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now, RateLimit: gcesim.RateLimit{PerSecond: 1, Burst: 1}})
	if _, err := get(ctx, c, zoneA, "cell-a"); err == nil {
		t.Fatal("get of an unknown instance succeeded")
	}
	_, err := get(ctx, c, zoneA, "cell-a")
	var ae *apierror.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("throttled get = %v (%T), want an *apierror.APIError", err, err)
	}
	if code, reason := apiReason(err); code != http.StatusForbidden || reason != "rateLimitExceeded" {
		t.Errorf("throttled get: HTTP %d, reason %q; want 403 rateLimitExceeded", code, reason)
	}
	if sim.Throttled() != 1 {
		t.Errorf("Throttled = %d, want 1", sim.Throttled())
	}
}

// TestLostInsertAnswer: an insert whose answer is lost took effect; the
// SDK does not retry an insert, and the caller's retry with the same
// requestId gets the operation instead of alreadyExists.
func TestLostInsertAnswer(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	sim.InjectFault(gcesim.Fault{Operation: "compute.instances.insert", Code: "backendError", HTTPStatus: http.StatusServiceUnavailable, AfterEffect: true})
	s := spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: rid1}
	if _, err := insert(ctx, c, s); err == nil {
		t.Fatal("insert with a lost answer succeeded")
	} else if code, reason := apiReason(err); code != http.StatusServiceUnavailable || reason != "backendError" {
		t.Errorf("lost answer: HTTP %d %s, want 503 backendError", code, reason)
	}
	mustInsert(t, c, s)
	if n := len(sim.Instances()); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

// TestPreemptionAsTheSDKSeesIt: the compute.instances.preempted operation
// is found by zoneOperations.list's filter and by
// globalOperations.aggregatedList; the instance goes STOPPING, then is
// deleted (instanceTerminationAction DELETE).
func TestPreemptionAsTheSDKSeesIt(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now, ShutdownDelay: 30 * time.Second})
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	mustInsert(t, c, spec{name: "cell-b", zone: zoneA, machineType: "e2-small"})
	if err := sim.Preempt(zoneA, "cell-a"); err != nil {
		t.Fatal(err)
	}
	it := c.operations.List(ctx, &computepb.ListZoneOperationsRequest{
		Project: project, Zone: zoneA, Filter: proto.String(`operationType="compute.instances.preempted"`),
	})
	var preempted []*computepb.Operation
	for op, err := range it.All() {
		if err != nil {
			t.Fatalf("listing operations: %v", err)
		}
		preempted = append(preempted, op)
	}
	if len(preempted) != 1 || preempted[0].GetTargetLink() != "https://www.googleapis.com/compute/v1/projects/"+project+"/zones/"+zoneA+"/instances/cell-a" ||
		preempted[0].GetStatus() != computepb.Operation_DONE || preempted[0].GetStatusMessage() != "Instance was preempted." {
		t.Fatalf("preempted operations %v, want the DONE preemption of cell-a", preempted)
	}

	agg := c.global.AggregatedList(ctx, &computepb.AggregatedListGlobalOperationsRequest{
		Project: project, Filter: proto.String(`operationType="compute.instances.preempted"`),
	})
	scopes := map[string]int{}
	for pair, err := range agg.All() {
		if err != nil {
			t.Fatalf("aggregated operations: %v", err)
		}
		scopes[pair.Key] = len(pair.Value.GetOperations())
	}
	want := map[string]int{"global": 0, "regions/us-central1": 0, "zones/" + zoneA: 1, "zones/" + zoneB: 0, "zones/us-central1-c": 0}
	if diff := cmp.Diff(want, scopes); diff != "" {
		t.Errorf("aggregated preemptions per scope (-want +got):\n%s", diff)
	}

	if in, err := get(ctx, c, zoneA, "cell-a"); err != nil || in.GetStatus() != "STOPPING" {
		t.Errorf("preempted instance: %v, %v; want STOPPING", in.GetStatus(), err)
	}
	clk.Advance(30 * time.Second)
	if _, err := get(ctx, c, zoneA, "cell-a"); err == nil {
		t.Error("the preempted instance (DELETE) is still there")
	}
	if _, err := c.global.Get(ctx, &computepb.GetGlobalOperationRequest{Project: project, Operation: preempted[0].GetName()}); err == nil {
		t.Error("globalOperations.get found a zonal operation")
	}
}

// TestMaintenanceAsTheSDKSeesIt: ScheduleMaintenance is the instance's
// resourceStatus.upcomingMaintenance.
func TestMaintenanceAsTheSDKSeesIt(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{Now: newClock().Now})
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	if err := sim.ScheduleMaintenance(zoneA, "cell-a"); err != nil {
		t.Fatal(err)
	}
	in, err := get(ctx, c, zoneA, "cell-a")
	if err != nil {
		t.Fatal(err)
	}
	m := in.GetResourceStatus().GetUpcomingMaintenance()
	got := []string{m.GetType(), m.GetMaintenanceStatus(), m.GetWindowStartTime(), m.GetWindowEndTime()}
	want := []string{"SCHEDULED", "PENDING", "2026-11-25T09:00:00.000+00:00", "2026-11-25T11:00:00.000+00:00"}
	if diff := cmp.Diff(want, got); diff != "" || !m.GetCanReschedule() {
		t.Errorf("upcomingMaintenance (-want +got):\n%s; canReschedule %v", diff, m.GetCanReschedule())
	}
}
