package sdktest

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// TestOperations: get and wait follow the clock; wait answers an
// unfinished operation as it is once MaxWait passed; an unknown
// operation is notFound.
func TestOperations(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now, OperationDelay: 20 * time.Second, MaxWait: 50 * time.Millisecond})
	op, err := insert(ctx, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small", requestID: rid1})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	if got := op.Proto().GetStatus(); got != computepb.Operation_RUNNING {
		t.Errorf("insert operation %s, want RUNNING before the operation delay", got)
	}

	// wait gives up after MaxWait (real time) and answers RUNNING.
	waited, err := c.operations.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: project, Zone: zoneA, Operation: op.Name()})
	if err != nil || waited.GetStatus() != computepb.Operation_RUNNING {
		t.Fatalf("wait before the delay = %v, %v; want RUNNING", waited.GetStatus(), err)
	}

	// wait holds the request until the clock reaches the operation's end.
	done := make(chan *computepb.Operation, 1)
	sim.SetOperationDelay(0)
	go func() {
		got, err := c.operations.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: project, Zone: zoneA, Operation: op.Name()})
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- got
	}()
	clk.Advance(20 * time.Second)
	got := <-done
	if got.GetStatus() != computepb.Operation_DONE || got.GetEndTime() != "2026-11-24T09:00:20.000+00:00" || got.GetProgress() != 100 {
		t.Errorf("wait after the delay = %s, end %s, progress %d; want DONE at 09:00:20, 100", got.GetStatus(), got.GetEndTime(), got.GetProgress())
	}
	polled, err := c.operations.Get(ctx, &computepb.GetZoneOperationRequest{Project: project, Zone: zoneA, Operation: op.Name()})
	if err != nil || polled.GetStatus() != computepb.Operation_DONE || polled.GetOperationType() != "insert" ||
		polled.GetTargetLink() != "https://www.googleapis.com/compute/v1/projects/"+project+"/zones/"+zoneA+"/instances/cell-a" {
		t.Errorf("get = %v, %v; want the DONE insert of cell-a", polled, err)
	}

	// list finds operations by an OR of their names, as the plugin asks
	// for the operations of launches under way together.
	other, err := insert(ctx, c, spec{name: "cell-b", zone: zoneA, machineType: "e2-small"})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	var listed []string
	for o, err := range c.operations.List(ctx, &computepb.ListZoneOperationsRequest{
		Project: project, Zone: zoneA, Filter: proto.String(`(name = "` + op.Name() + `") OR (name = "` + other.Name() + `") OR (name = "operation-0-none")`),
	}).All() {
		if err != nil {
			t.Fatalf("listing operations by name: %v", err)
		}
		listed = append(listed, o.GetName())
	}
	if want := []string{op.Name(), other.Name()}; !slices.Equal(listed, want) {
		t.Errorf("operations listed by name: %v, want %v", listed, want)
	}

	_, err = c.operations.Get(ctx, &computepb.GetZoneOperationRequest{Project: project, Zone: zoneA, Operation: "operation-0-none"})
	if code, reason := apiReason(err); code != http.StatusNotFound || reason != "notFound" {
		t.Errorf("get of an unknown operation = %v; want 404 notFound", err)
	}
	_, err = c.operations.Get(ctx, &computepb.GetZoneOperationRequest{Project: project, Zone: zoneB, Operation: op.Name()})
	if code, _ := apiReason(err); code != http.StatusNotFound {
		t.Errorf("get of the operation in another zone = %v; want 404", err)
	}
}

// TestDeleteIsIdempotentOnRequestID: a repeated delete returns the first
// operation; deleting what is gone is notFound.
func TestDeleteIsIdempotentOnRequestID(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	_, c := startSim(t, gcesim.Options{Now: clk.Now, ShutdownDelay: 5 * time.Second})
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	del := func(rid string) (string, error) {
		op, err := c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a", RequestId: &rid})
		if err != nil {
			return "", err
		}
		return op.Name(), nil
	}
	first, err := del(rid1)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	again, err := del(rid1)
	if err != nil || again != first {
		t.Errorf("repeated delete = %s, %v; want the first operation %s", again, err, first)
	}
	clk.Advance(5 * time.Second)
	if _, err := del(rid2); err == nil {
		t.Errorf("delete of a gone instance succeeded, want 404")
	} else if code, reason := apiReason(err); code != http.StatusNotFound || reason != "notFound" {
		t.Errorf("delete of a gone instance = %v; want 404 notFound", err)
	}
}
