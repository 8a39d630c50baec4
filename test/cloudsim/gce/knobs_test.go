package gcesim

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const (
	rid1 = "8f2d1c3a-0b4e-4d6f-9a1b-2c3d4e5f6a7b"
	rid2 = "1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d"
)

// opError is the first error of a DONE operation: its code, message,
// httpErrorStatusCode and errorDetails.
func opErrorOf(op map[string]any) (code, message string, status float64, details []any) {
	e, _ := op["error"].(map[string]any)
	errs, _ := e["errors"].([]any)
	if len(errs) == 0 {
		return "", "", 0, nil
	}
	first := errs[0].(map[string]any)
	code, _ = first["code"].(string)
	message, _ = first["message"].(string)
	details, _ = first["errorDetails"].([]any)
	status, _ = op["httpErrorStatusCode"].(float64)
	return code, message, status, details
}

// TestFaults: a fault answers instead of the call; one AfterEffect
// answers after the call took effect (the instance exists), and a retry
// with the same requestId is answered with the first operation.
func TestFaults(t *testing.T) {
	sim := startSim(t, Options{})
	sim.InjectFault(Fault{Operation: "compute.instances.get", Code: "backendError", HTTPStatus: http.StatusServiceUnavailable})
	code, body := sim.get("kip-a")
	if r, d := reason(body); code != http.StatusServiceUnavailable || r != "backendError" || d != "global" {
		t.Errorf("get with a fault: %d %s/%s, want 503 backendError/global", code, r, d)
	}
	if code, _ := sim.get("kip-a"); code != http.StatusNotFound {
		t.Errorf("get after the fault was used: %d, want 404", code)
	}

	sim.InjectFault(Fault{Operation: "compute.instances.insert", Code: "backendError", HTTPStatus: http.StatusInternalServerError, AfterEffect: true})
	if code, _ := sim.insert(insertBody("kip-a", "e2-small", "", "", ""), rid1); code != http.StatusInternalServerError {
		t.Fatalf("insert with a lost answer: %d, want 500", code)
	}
	if _, ok := sim.Instance(testZone, "kip-a"); !ok {
		t.Fatal("the insert whose answer was lost created no instance")
	}
	code, op := sim.insert(insertBody("kip-a", "e2-small", "", "", ""), rid1)
	if code != http.StatusOK || op["operationType"] != "insert" || op["error"] != nil {
		t.Errorf("retry with the same requestId: %d %v, want the insert's operation", code, op)
	}
	if code, body := sim.insert(insertBody("kip-a", "e2-small", "", "", ""), rid2); code != http.StatusConflict {
		t.Errorf("insert of the name with another requestId: %d %v, want 409 alreadyExists", code, body)
	}
	if got := sim.Calls()["compute.instances.insert"]; got != 3 {
		t.Errorf("inserts counted: %d, want 3", got)
	}
}

// TestRateLimit: a call beyond the bucket is 403 rateLimitExceeded in
// the usageLimits domain, counted by Throttled.
func TestRateLimit(t *testing.T) {
	clk := newClock()
	sim := startSim(t, Options{Now: clk.Now, RateLimit: RateLimit{PerSecond: 1, Burst: 2}})
	var codes []int
	for range 3 {
		code, body := sim.get("kip-a")
		codes = append(codes, code)
		if code == http.StatusForbidden {
			if r, d := reason(body); r != "rateLimitExceeded" || d != "usageLimits" {
				t.Errorf("throttled: %s/%s, want rateLimitExceeded/usageLimits", r, d)
			}
		}
	}
	if diff := cmp.Diff([]int{404, 404, 403}, codes); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if sim.Throttled() != 1 || sim.MaxCallsPerSecond() != 3 || sim.Calls()["compute.instances.get"] != 3 {
		t.Errorf("throttled %d, max/s %d, calls %v; want 1, 3, 3 gets", sim.Throttled(), sim.MaxCallsPerSecond(), sim.Calls())
	}
	clk.Advance(time.Second)
	if code, _ := sim.get("kip-a"); code != http.StatusNotFound {
		t.Errorf("get after the bucket refilled: %d, want 404", code)
	}
	sim.ResetCalls()
	if len(sim.Calls()) != 0 || sim.Throttled() != 0 || sim.MaxCallsPerSecond() != 0 {
		t.Error("ResetCalls left counts")
	}
}

// TestRefusals: quotas and stock-outs end the insert's operation with
// GCE's error and create no instance; a quota applies to the inserts
// that use its metric.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name        string
		quota       *Quota
		stockout    *Stockout
		body        map[string]any
		wantCode    string
		wantMessage string
		wantStatus  float64
		wantDetails []any
	}{
		{
			name: "CPUS", quota: &Quota{Metric: "CPUS"}, body: insertBody("kip-a", "e2-small", "", "", ""),
			wantCode: "QUOTA_EXCEEDED", wantMessage: "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.", wantStatus: 403,
			wantDetails: []any{map[string]any{"quotaInfo": map[string]any{
				"metricName": "compute.googleapis.com/cpus", "limitName": "CPUS-per-project-region",
				"dimensions": map[string]any{"region": "us-central1"}, "limit": 24.0,
			}}},
		},
		{name: "CPUS spares Spot", quota: &Quota{Metric: "CPUS"}, body: insertBody("kip-a", "e2-small", "SPOT", "DELETE", "")},
		{
			name: "PREEMPTIBLE_CPUS", quota: &Quota{Metric: "PREEMPTIBLE_CPUS", Limit: 8}, body: insertBody("kip-a", "e2-small", "SPOT", "DELETE", ""),
			wantCode: "QUOTA_EXCEEDED", wantMessage: "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 8.0 in region us-central1.", wantStatus: 403,
			wantDetails: []any{map[string]any{"quotaInfo": map[string]any{
				"metricName": "compute.googleapis.com/preemptible_cpus", "limitName": "PREEMPTIBLE_CPUS-per-project-region",
				"dimensions": map[string]any{"region": "us-central1"}, "limit": 8.0,
			}}},
		},
		{name: "another region's quota", quota: &Quota{Metric: "CPUS", Region: "europe-west1"}, body: insertBody("kip-a", "e2-small", "", "", "")},
		{
			name: "GPUS", quota: &Quota{Metric: "NVIDIA_T4_GPUS", Limit: 1},
			body: func() map[string]any {
				b := insertBody("kip-a", "n1-standard-4", "", "", "")
				b["guestAccelerators"] = []any{map[string]any{"acceleratorType": "zones/" + testZone + "/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}}
				return b
			}(),
			wantCode: "QUOTA_EXCEEDED", wantMessage: "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 1.0 in region us-central1.", wantStatus: 403,
			wantDetails: []any{map[string]any{"quotaInfo": map[string]any{
				"metricName": "compute.googleapis.com/nvidia_t4_gpus", "limitName": "NVIDIA_T4_GPUS-per-project-region",
				"dimensions": map[string]any{"region": "us-central1"}, "limit": 1.0,
			}}},
		},
		{
			name: "stock-out", stockout: &Stockout{MachineType: "e2-small", Zone: testZone}, body: insertBody("kip-a", "e2-small", "", "", ""),
			wantCode:    "ZONE_RESOURCE_POOL_EXHAUSTED",
			wantMessage: "The zone 'projects/kip-test/zones/us-central1-a' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.",
			wantStatus:  503,
		},
		{
			name: "stock-out with details", stockout: &Stockout{Zone: testZone, Code: CodeZoneResourcePoolExhaustedWithDetails}, body: insertBody("kip-a", "e2-small", "", "", ""),
			wantCode:    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
			wantMessage: "The zone 'projects/kip-test/zones/us-central1-a' does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
			wantStatus:  503,
		},
		{
			name: "STOCKOUT without HTTP status", stockout: &Stockout{MachineType: "e2-small", Code: CodeStockout, WithoutHTTPStatus: true}, body: insertBody("kip-a", "e2-small", "", "", ""),
			wantCode:    "STOCKOUT",
			wantMessage: "The zone 'projects/kip-test/zones/us-central1-a' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.",
		},
		{name: "stock-out of another type", stockout: &Stockout{MachineType: "e2-medium"}, body: insertBody("kip-a", "e2-small", "", "", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startSim(t, Options{})
			if tt.quota != nil {
				sim.InjectQuota(*tt.quota)
			}
			if tt.stockout != nil {
				sim.InjectStockout(*tt.stockout)
			}
			code, op := sim.insert(tt.body, "")
			if code != http.StatusOK || op["status"] != "DONE" {
				t.Fatalf("insert: %d %v, want a DONE operation", code, op)
			}
			gotCode, gotMessage, gotStatus, gotDetails := opErrorOf(op)
			if gotCode != tt.wantCode || gotMessage != tt.wantMessage || gotStatus != tt.wantStatus {
				t.Errorf("operation error %s %q (HTTP %v), want %s %q (HTTP %v)", gotCode, gotMessage, gotStatus, tt.wantCode, tt.wantMessage, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantDetails, gotDetails); diff != "" {
				t.Errorf("errorDetails (-want +got):\n%s", diff)
			}
			if _, created := sim.Instance(testZone, "kip-a"); created != (tt.wantCode == "") {
				t.Errorf("instance created: %v, want %v", created, tt.wantCode == "")
			}
			sim.ClearQuotas()
			sim.ClearStockouts()
			if code, op := sim.insert(insertBody("kip-b", "e2-small", "", "", ""), ""); code != http.StatusOK || op["error"] != nil {
				t.Errorf("insert after clearing: %d %v", code, op)
			}
		})
	}
}

// TestPreempt: a Spot instance preempted gets the zone's
// compute.instances.preempted operation, is STOPPING then TERMINATED, and
// is deleted with instanceTerminationAction DELETE; with STOP it stays
// TERMINATED; a standard instance is not preempted.
func TestPreempt(t *testing.T) {
	clk := newClock()
	cells := cellstest.NewFakeCells()
	sim := startSim(t, Options{Now: clk.Now, Cells: cells, ShutdownDelay: 30 * time.Second})
	sim.insert(insertBody("kip-del", "e2-small", "SPOT", "DELETE", "{}"), "")
	sim.insert(insertBody("kip-stop", "e2-small", "SPOT", "", "{}"), "")
	sim.insert(insertBody("kip-std", "e2-small", "STANDARD", "", "{}"), "")
	for _, n := range []string{"kip-del", "kip-stop", "kip-std"} {
		eventually(t, n+" running", func() bool { return sim.status(n) == "RUNNING" })
	}
	if err := sim.Preempt(testZone, "kip-std"); err == nil {
		t.Error("Preempt of a standard instance succeeded")
	}
	for _, n := range []string{"kip-del", "kip-stop"} {
		if err := sim.Preempt(testZone, n); err != nil {
			t.Fatalf("Preempt %s: %v", n, err)
		}
		if st := sim.status(n); st != "STOPPING" {
			t.Errorf("%s right after preemption: %s, want STOPPING", n, st)
		}
	}
	if err := sim.Preempt(testZone, "kip-del"); err == nil {
		t.Error("a second Preempt succeeded")
	}

	filter := url.QueryEscape(`operationType="compute.instances.preempted"`)
	code, list := sim.do(http.MethodGet, "zones/"+testZone+"/operations?filter="+filter, nil)
	items, _ := list["items"].([]any)
	if code != http.StatusOK || len(items) != 2 {
		t.Fatalf("preempted operations: %d, %d items; want 2", code, len(items))
	}
	op := items[0].(map[string]any)
	want := map[string]any{
		"operationType": "compute.instances.preempted", "status": "DONE", "statusMessage": "Instance was preempted.", "user": "system",
		"targetLink": "https://www.googleapis.com/compute/v1/projects/kip-test/zones/us-central1-a/instances/kip-del",
	}
	for k, v := range want {
		if op[k] != v {
			t.Errorf("preempted operation's %s = %v, want %v", k, op[k], v)
		}
	}
	link := url.QueryEscape(`targetLink="https://www.googleapis.com/compute/v1/projects/kip-test/zones/us-central1-a/instances/kip-stop"`)
	if _, l := sim.do(http.MethodGet, "zones/"+testZone+"/operations?filter="+link, nil); len(l["items"].([]any)) != 2 {
		t.Errorf("operations of kip-stop: %d, want its insert and its preemption", len(l["items"].([]any)))
	}
	_, l := sim.do(http.MethodGet, "zones/"+testZone+"/operations?filter="+filter+"+AND+"+link, nil)
	if items, _ := l["items"].([]any); len(items) != 1 || items[0].(map[string]any)["targetLink"] != "https://www.googleapis.com/compute/v1/projects/kip-test/zones/us-central1-a/instances/kip-stop" {
		t.Errorf("preemptions of kip-stop: %v, want one", l["items"])
	}

	eventually(t, "cells stopped", func() bool { return cells.Stops("kip-del") == 1 && cells.Stops("kip-stop") == 1 })
	clk.Advance(30 * time.Second)
	if st := sim.status("kip-del"); st != "" {
		t.Errorf("kip-del (DELETE) after shutdown: %q, want gone", st)
	}
	if st := sim.status("kip-stop"); st != "TERMINATED" {
		t.Errorf("kip-stop (STOP) after shutdown: %q, want TERMINATED", st)
	}
	if cells.Stops("kip-std") != 0 || sim.status("kip-std") != "RUNNING" {
		t.Error("the standard instance was stopped")
	}
}

// TestScheduleMaintenance: resourceStatus.upcomingMaintenance is PENDING
// before the window, ONGOING in it, gone after.
func TestScheduleMaintenance(t *testing.T) {
	clk := newClock()
	sim := startSim(t, Options{Now: clk.Now})
	sim.insert(insertBody("kip-a", "e2-small", "", "", ""), "")
	if err := sim.ScheduleMaintenance(testZone, "kip-none"); err == nil {
		t.Error("maintenance of an unknown instance scheduled")
	}
	if err := sim.ScheduleMaintenance(testZone, "kip-a"); err != nil {
		t.Fatal(err)
	}
	upcoming := func() map[string]any {
		_, in := sim.get("kip-a")
		rs, _ := in["resourceStatus"].(map[string]any)
		m, _ := rs["upcomingMaintenance"].(map[string]any)
		return m
	}
	want := map[string]any{
		"type": "SCHEDULED", "maintenanceStatus": "PENDING", "canReschedule": true,
		"windowStartTime": "2026-11-25T09:00:00.000+00:00", "windowEndTime": "2026-11-25T11:00:00.000+00:00",
	}
	if diff := cmp.Diff(want, upcoming()); diff != "" {
		t.Errorf("upcomingMaintenance (-want +got):\n%s", diff)
	}
	clk.Advance(25 * time.Hour)
	if got := upcoming(); got["maintenanceStatus"] != "ONGOING" || got["canReschedule"] != false {
		t.Errorf("in the window: %v, want ONGOING, not reschedulable", got)
	}
	clk.Advance(time.Hour)
	if got := upcoming(); got != nil {
		t.Errorf("after the window: %v, want none", got)
	}
}

// TestOperationEndpoints: global operations are notFound by name and an
// empty scope of the aggregated list; the aggregated list has the zones'
// operations; an unknown filter field is invalid.
func TestOperationEndpoints(t *testing.T) {
	sim := startSim(t, Options{})
	_, op := sim.insert(insertBody("kip-a", "e2-small", "", "", ""), "")
	if code, body := sim.do(http.MethodGet, "global/operations/operation-1", nil); code != http.StatusNotFound {
		t.Errorf("globalOperations.get of an unknown operation: %d %v, want 404", code, body)
	}
	if code, _ := sim.do(http.MethodPost, "global/operations/operation-1/wait", nil); code != http.StatusNotFound {
		t.Errorf("globalOperations.wait of an unknown operation: %d, want 404", code)
	}
	code, agg := sim.do(http.MethodGet, "aggregated/operations", nil)
	items, _ := agg["items"].(map[string]any)
	zone, _ := items["zones/"+testZone].(map[string]any)
	ops, _ := zone["operations"].([]any)
	if code != http.StatusOK || len(ops) != 1 || ops[0].(map[string]any)["name"] != op["name"] {
		t.Errorf("aggregated operations of %s: %d %v, want the insert", testZone, code, zone)
	}
	for _, scope := range []string{"global", "regions/us-central1", "zones/us-central1-b"} {
		if s, _ := items[scope].(map[string]any); s["warning"] == nil {
			t.Errorf("scope %s: %v, want the NO_RESULTS_ON_PAGE warning", scope, s)
		}
	}
	if code, _ := sim.do(http.MethodGet, "zones/"+testZone+"/operations?filter="+url.QueryEscape(`progress = 100`), nil); code != http.StatusBadRequest {
		t.Errorf("operations filter on progress: %d, want 400", code)
	}
	if code, _ := sim.do(http.MethodGet, "zones/"+testZone+"/operations?maxResults=1", nil); code != http.StatusOK {
		t.Errorf("operations list: %d", code)
	}
	if code, body := sim.do(http.MethodPost, "zones/"+testZone+"/operations/"+op["name"].(string)+"/wait", nil); code != http.StatusOK || body["status"] != "DONE" {
		t.Errorf("zoneOperations.wait: %d %v", code, body)
	}
}

// TestSchedulingChecked: GCE refuses a termination action without Spot
// and an unknown provisioning model.
func TestSchedulingChecked(t *testing.T) {
	sim := startSim(t, Options{})
	for _, b := range []map[string]any{insertBody("kip-a", "e2-small", "STANDARD", "DELETE", ""), insertBody("kip-b", "e2-small", "CHEAP", "", "")} {
		if code, body := sim.insert(b, ""); code != http.StatusBadRequest {
			t.Errorf("insert %v: %d %v, want 400 invalid", b["scheduling"], code, body)
		}
	}
}
