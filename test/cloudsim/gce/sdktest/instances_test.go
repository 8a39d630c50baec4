package sdktest

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

const (
	rid1 = "6f1c2a3b-0000-4000-8000-000000000001"
	rid2 = "6f1c2a3b-0000-4000-8000-000000000002"
	rid3 = "6f1c2a3b-0000-4000-8000-000000000003"
)

// TestInstanceLifecycle walks an instance through GCE's states with the
// clock: PROVISIONING, STAGING, RUNNING, then STOPPING, TERMINATED and gone.
func TestInstanceLifecycle(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now, BootDelay: 30 * time.Second, ShutdownDelay: 10 * time.Second, TerminatedVisible: time.Minute})

	op, err := insert(ctx, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: rid1, labels: map[string]string{"kip-cluster": "c1"}})
	if err != nil {
		t.Fatalf("inserting: %v", err)
	}
	if !op.Done() {
		t.Errorf("insert operation %s is %s, want DONE at once without an operation delay", op.Name(), op.Proto().GetStatus())
	}
	if err := op.Wait(ctx); err != nil || op.Proto().GetError() != nil {
		t.Fatalf("waiting for the insert: %v, operation error %v", err, op.Proto().GetError())
	}

	steps := []struct {
		name    string
		advance time.Duration
		del     bool
		want    string // status, or "" for notFound
	}{
		{name: "inserted", want: "PROVISIONING"},
		{name: "half the boot delay", advance: 15 * time.Second, want: "STAGING"},
		{name: "booted", advance: 15 * time.Second, want: "RUNNING"},
		{name: "deleted", del: true, want: "STOPPING"},
		{name: "shut down", advance: 10 * time.Second, want: "TERMINATED"},
		{name: "no longer visible", advance: time.Minute, want: ""},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		if st.del {
			op, err := c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a", RequestId: proto.String(rid2)})
			if err != nil {
				t.Fatalf("%s: deleting: %v", st.name, err)
			}
			if op.Done() {
				t.Errorf("%s: delete operation DONE before the shutdown delay passed", st.name)
			}
		}
		in, err := get(ctx, c, zoneA, "cell-a")
		if st.want == "" {
			if code, reason := apiReason(err); code != http.StatusNotFound || reason != "notFound" {
				t.Errorf("%s: get = %v, %v; want 404 notFound", st.name, in.GetStatus(), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: get: %v", st.name, err)
		}
		if in.GetStatus() != st.want {
			t.Errorf("%s: status %s, want %s", st.name, in.GetStatus(), st.want)
		}
	}

	got, _ := sim.Instance(zoneA, "cell-a")
	if !got.Gone || got.MachineType != "e2-small" || got.RequestID != rid1 || got.ID == 0 {
		t.Errorf("sim.Instance = %+v, want gone, e2-small, %s, an ID", got, rid1)
	}
	wantCalls := map[string]int{
		"compute.instances.insert": 1, "compute.instances.get": 6, "compute.instances.delete": 1,
		"compute.zoneOperations.get": 1, // Operation.Wait polls once: the insert is DONE
	}
	if diff := cmp.Diff(wantCalls, sim.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestInstanceAsGCEWritesIt checks the fields GCE fills in, as the client
// decodes them.
func TestInstanceAsGCEWritesIt(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	_, c := startSim(t, gcesim.Options{Now: clk.Now})
	mustInsert(t, c, spec{name: "cell-b", zone: zoneB, machineType: "n2-standard-2", labels: map[string]string{"kip-cell": "cell-b"}})
	in, err := get(ctx, c, zoneB, "cell-b")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	base := "https://www.googleapis.com/compute/v1/projects/" + project + "/zones/" + zoneB
	got := map[string]string{
		"zone": in.GetZone(), "machineType": in.GetMachineType(), "selfLink": in.GetSelfLink(),
		"creationTimestamp": in.GetCreationTimestamp(), "status": in.GetStatus(),
		"provisioningModel": in.GetScheduling().GetProvisioningModel(), "label": in.GetLabels()["kip-cell"],
		"nic": in.GetNetworkInterfaces()[0].GetName(), "subnetwork": in.GetNetworkInterfaces()[0].GetSubnetwork(),
		"network": in.GetNetworkInterfaces()[0].GetNetwork(),
	}
	want := map[string]string{
		"zone": base, "machineType": base + "/machineTypes/n2-standard-2", "selfLink": base + "/instances/cell-b",
		"creationTimestamp": "2026-11-24T09:00:00.000+00:00", "status": "RUNNING",
		"provisioningModel": "SPOT", "label": "cell-b",
		"nic": "nic0", "subnetwork": "https://www.googleapis.com/compute/v1/projects/" + project + "/regions/us-central1/subnetworks/kip",
		"network": "https://www.googleapis.com/compute/v1/projects/" + project + "/global/networks/kip",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance (-want +got):\n%s", diff)
	}
	if in.GetId() == 0 || in.GetNetworkInterfaces()[0].GetNetworkIP() == "" {
		t.Errorf("instance has id %d, networkIP %q; want both set", in.GetId(), in.GetNetworkInterfaces()[0].GetNetworkIP())
	}
}

// TestInsertIdempotency: requestId makes a repeat harmless; the name is
// GCE's uniqueness key otherwise.
func TestInsertIdempotency(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now})
	first, err := insert(ctx, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: rid1})
	if err != nil {
		t.Fatalf("first insert: %v", err)
	}

	tests := []struct {
		name       string
		spec       spec
		wantStatus int    // 0: an operation
		wantReason string //
		sameOp     bool   // the operation is the first insert's
	}{
		{name: "same requestId, other type", spec: spec{name: "cell-a", zone: zoneA, machineType: "e2-medium", requestID: rid1}, sameOp: true},
		{name: "other requestId", spec: spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: rid2}, wantStatus: http.StatusConflict, wantReason: "alreadyExists"},
		{name: "no requestId", spec: spec{name: "cell-a", zone: zoneA, machineType: "e2-small"}, wantStatus: http.StatusConflict, wantReason: "alreadyExists"},
		{name: "same name in another zone", spec: spec{name: "cell-a", zone: zoneB, machineType: "e2-small", requestID: rid3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, err := insert(ctx, c, tt.spec)
			if tt.wantStatus != 0 {
				if code, reason := apiReason(err); code != tt.wantStatus || reason != tt.wantReason {
					t.Fatalf("insert = %v; want %d %s", err, tt.wantStatus, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			if same := op.Name() == first.Name(); same != tt.sameOp {
				t.Errorf("operation %s, first %s: same = %v, want %v", op.Name(), first.Name(), same, tt.sameOp)
			}
		})
	}
	var names []string
	for _, in := range sim.Instances() {
		names = append(names, in.Zone+"/"+in.Name+"/"+in.MachineType)
	}
	if diff := cmp.Diff([]string{zoneA + "/cell-a/e2-small", zoneB + "/cell-a/e2-small"}, names); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
}

// TestInsertRefusesWhatGCERefuses: the 400s of a malformed insert.
func TestInsertRefusesWhatGCERefuses(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{Now: newClock().Now})
	tests := []struct {
		name string
		spec spec
	}{
		{name: "upper-case name", spec: spec{name: "Cell-A", zone: zoneA, machineType: "e2-small"}},
		{name: "name over 63 characters", spec: spec{name: "c" + string(slices.Repeat([]byte("x"), 63)), zone: zoneA, machineType: "e2-small"}},
		{name: "label value in upper case", spec: spec{name: "cell-a", zone: zoneA, machineType: "e2-small", labels: map[string]string{"pod": "Default-Nginx"}}},
		{name: "requestId not a UUID", spec: spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: "cell-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := insert(ctx, c, tt.spec)
			if code, reason := apiReason(err); code != http.StatusBadRequest || reason != "invalid" {
				t.Errorf("insert = %v; want 400 invalid", err)
			}
		})
	}
	_, err := c.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: project, Zone: zoneA, InstanceResource: &computepb.Instance{
		Name: proto.String("cell-a"), MachineType: proto.String("zones/" + zoneB + "/machineTypes/e2-small"),
	}})
	if code, reason := apiReason(err); code != http.StatusBadRequest || reason != "invalid" {
		t.Errorf("insert with another zone's machine type = %v; want 400 invalid", err)
	}
	_, err = get(ctx, c, "mars-north1-a", "cell-a")
	if code, reason := apiReason(err); code != http.StatusBadRequest || reason != "invalid" {
		t.Errorf("get in an unknown zone = %v; want 400 invalid", err)
	}
	if n := len(sim.Instances()); n != 0 {
		t.Errorf("%d instances after refused inserts, want 0", n)
	}
}

// TestStockout: a zone without capacity for a machine type fails the
// insert's operation, in both forms GCE sends; Operation.Wait only sees
// the one with httpErrorStatusCode.
func TestStockout(t *testing.T) {
	tests := []struct {
		name       string
		stockout   gcesim.Stockout
		spec       spec
		wantFail   bool
		wantWaitOK bool // Wait returns nil although the operation failed
	}{
		{name: "with httpErrorStatusCode", stockout: gcesim.Stockout{MachineType: "g2-standard-4", Zone: zoneA},
			spec: spec{name: "cell-g", zone: zoneA, machineType: "g2-standard-4"}, wantFail: true},
		{name: "without httpErrorStatusCode", stockout: gcesim.Stockout{MachineType: "g2-standard-4", Zone: zoneA, WithoutHTTPStatus: true},
			spec: spec{name: "cell-g", zone: zoneA, machineType: "g2-standard-4"}, wantFail: true, wantWaitOK: true},
		{name: "any type in the zone", stockout: gcesim.Stockout{Zone: zoneA},
			spec: spec{name: "cell-e", zone: zoneA, machineType: "e2-small"}, wantFail: true},
		{name: "another type", stockout: gcesim.Stockout{MachineType: "g2-standard-4", Zone: zoneA},
			spec: spec{name: "cell-e", zone: zoneA, machineType: "e2-small"}},
		{name: "another zone", stockout: gcesim.Stockout{MachineType: "g2-standard-4", Zone: zoneA},
			spec: spec{name: "cell-g", zone: zoneB, machineType: "g2-standard-4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			sim, c := startSim(t, gcesim.Options{Now: newClock().Now})
			sim.InjectStockout(tt.stockout)
			op, err := insert(ctx, c, tt.spec)
			if err != nil {
				t.Fatalf("insert: %v (a stock-out is the operation's error, not the call's)", err)
			}
			waitErr := op.Wait(ctx)
			opErr := op.Proto().GetError()
			if !tt.wantFail {
				if waitErr != nil || opErr != nil {
					t.Fatalf("Wait = %v, operation error %v; want success", waitErr, opErr)
				}
				return
			}
			if code := opErr.GetErrors()[0].GetCode(); code != gcesim.CodeZoneResourcePoolExhausted {
				t.Errorf("operation error code %q, want %s", code, gcesim.CodeZoneResourcePoolExhausted)
			}
			if tt.wantWaitOK {
				if waitErr != nil || op.Proto().HttpErrorStatusCode != nil {
					t.Errorf("Wait = %v, httpErrorStatusCode %v; want nil and none", waitErr, op.Proto().HttpErrorStatusCode)
				}
			} else if code, _ := apiReason(waitErr); code != http.StatusServiceUnavailable {
				t.Errorf("Wait = %v; want a 503", waitErr)
			}
			if _, err := get(ctx, c, tt.spec.zone, tt.spec.name); err == nil {
				t.Errorf("the stocked-out instance exists")
			}
			sim.ClearStockouts()
			mustInsert(t, c, tt.spec) // the name is free
		})
	}
}

// TestListFilterAndPages: list with label filters, page by page.
func TestListFilterAndPages(t *testing.T) {
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now})
	for i, name := range []string{"cell-1", "cell-2", "cell-3", "cell-4", "cell-5"} {
		cluster := []string{"a", "b"}[i%2]
		mustInsert(t, c, spec{name: name, zone: zoneA, machineType: "e2-small", labels: map[string]string{"kip-cluster": cluster, "kip-cell": name}})
	}
	mustInsert(t, c, spec{name: "cell-6", zone: zoneB, machineType: "e2-small", labels: map[string]string{"kip-cluster": "a"}})

	tests := []struct {
		name       string
		filter     string
		maxResults uint32
		want       []string
		wantPages  int
	}{
		{name: "all", want: []string{"cell-1", "cell-2", "cell-3", "cell-4", "cell-5"}, wantPages: 1},
		{name: "by label, quoted", filter: `labels.kip-cluster = "a"`, want: []string{"cell-1", "cell-3", "cell-5"}, wantPages: 1},
		{name: "by label, two pages", filter: `labels.kip-cluster=a`, maxResults: 2, want: []string{"cell-1", "cell-3", "cell-5"}, wantPages: 2},
		{name: "one a page", maxResults: 1, want: []string{"cell-1", "cell-2", "cell-3", "cell-4", "cell-5"}, wantPages: 5},
		{name: "conjunction", filter: `(labels.kip-cluster = "a") AND (labels.kip-cell != "cell-3")`, want: []string{"cell-1", "cell-5"}, wantPages: 1},
		{name: "label set", filter: `labels.kip-cell:*`, want: []string{"cell-1", "cell-2", "cell-3", "cell-4", "cell-5"}, wantPages: 1},
		{name: "status", filter: `status = RUNNING labels.kip-cluster = "b"`, want: []string{"cell-2", "cell-4"}, wantPages: 1},
		{name: "nothing", filter: `labels.kip-cluster = "z"`, wantPages: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim.ResetCalls()
			req := &computepb.ListInstancesRequest{Project: project, Zone: zoneA}
			if tt.filter != "" {
				req.Filter = proto.String(tt.filter)
			}
			if tt.maxResults != 0 {
				req.MaxResults = proto.Uint32(tt.maxResults)
			}
			var got []string
			it := c.instances.List(t.Context(), req)
			for {
				in, err := it.Next()
				if errors.Is(err, iterator.Done) {
					break
				}
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				got = append(got, in.GetName())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if pages := sim.Calls()["compute.instances.list"]; pages != tt.wantPages {
				t.Errorf("%d list calls, want %d", pages, tt.wantPages)
			}
		})
	}

	_, err := c.instances.List(t.Context(), &computepb.ListInstancesRequest{Project: project, Zone: zoneA, Filter: proto.String(`metadata.startup-script = "x"`)}).Next()
	if code, reason := apiReason(err); code != http.StatusBadRequest || reason != "invalid" {
		t.Errorf("list with a field the simulator does not evaluate = %v; want 400 invalid", err)
	}
}

// TestAggregatedList: every zone is a scope; a zone without instances on
// the page carries GCE's warning.
func TestAggregatedList(t *testing.T) {
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now})
	mustInsert(t, c, spec{name: "cell-1", zone: zoneA, machineType: "e2-small", labels: map[string]string{"kip-cluster": "a"}})
	mustInsert(t, c, spec{name: "cell-2", zone: zoneB, machineType: "e2-small", labels: map[string]string{"kip-cluster": "a"}})
	mustInsert(t, c, spec{name: "cell-3", zone: zoneB, machineType: "e2-small", labels: map[string]string{"kip-cluster": "b"}})

	tests := []struct {
		name       string
		maxResults uint32
		want       map[string][]string // scope → names, over every page
		wantPages  int
	}{
		{name: "one page", want: map[string][]string{"zones/" + zoneA: {"cell-1"}, "zones/" + zoneB: {"cell-2"}}, wantPages: 1},
		{name: "one instance a page", maxResults: 1, want: map[string][]string{"zones/" + zoneA: {"cell-1"}, "zones/" + zoneB: {"cell-2"}}, wantPages: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim.ResetCalls()
			req := &computepb.AggregatedListInstancesRequest{Project: project, Filter: proto.String(`labels.kip-cluster = "a"`)}
			if tt.maxResults != 0 {
				req.MaxResults = proto.Uint32(tt.maxResults)
			}
			got := map[string][]string{}
			warnings := 0
			it := c.instances.AggregatedList(t.Context(), req)
			for {
				pair, err := it.Next()
				if errors.Is(err, iterator.Done) {
					break
				}
				if err != nil {
					t.Fatalf("aggregatedList: %v", err)
				}
				if w := pair.Value.GetWarning(); w != nil {
					warnings++
					if w.GetCode() != "NO_RESULTS_ON_PAGE" || len(pair.Value.GetInstances()) != 0 {
						t.Errorf("scope %s: warning %v with %d instances", pair.Key, w, len(pair.Value.GetInstances()))
					}
				}
				for _, in := range pair.Value.GetInstances() {
					got[pair.Key] = append(got[pair.Key], in.GetName())
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scopes (-want +got):\n%s", diff)
			}
			if warnings == 0 {
				t.Errorf("no NO_RESULTS_ON_PAGE warning, want one for us-central1-c at least")
			}
			if pages := sim.Calls()["compute.instances.aggregatedList"]; pages != tt.wantPages {
				t.Errorf("%d aggregatedList calls, want %d", pages, tt.wantPages)
			}
		})
	}
}
