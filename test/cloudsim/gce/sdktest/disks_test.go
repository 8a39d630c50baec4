package sdktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const opDelay = 10 * time.Second

// diskClient is the SDK's disks client pointed at sim.
func diskClient(t *testing.T, sim *gcesim.Server) *compute.DisksClient {
	t.Helper()
	dc, err := compute.NewDisksRESTClient(t.Context(), option.WithEndpoint(sim.URL()), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("creating the disks client: %v", err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	return dc
}

func insertDisk(ctx context.Context, dc *compute.DisksClient, zone, name string) (*compute.Operation, error) {
	return dc.Insert(ctx, &computepb.InsertDiskRequest{Project: project, Zone: zone, DiskResource: &computepb.Disk{
		Name: proto.String(name), SizeGb: proto.Int64(10), Type: proto.String("zones/" + zone + "/diskTypes/pd-balanced"),
	}})
}

func attach(ctx context.Context, c clients, zone, instance, source, device, mode string) (*compute.Operation, error) {
	return c.instances.AttachDisk(ctx, &computepb.AttachDiskInstanceRequest{Project: project, Zone: zone, Instance: instance,
		AttachedDiskResource: &computepb.AttachedDisk{Source: proto.String(source), DeviceName: proto.String(device), Mode: proto.String(mode), AutoDelete: proto.Bool(false)}})
}

func detach(ctx context.Context, c clients, zone, instance, device string) (*compute.Operation, error) {
	return c.instances.DetachDisk(ctx, &computepb.DetachDiskInstanceRequest{Project: project, Zone: zone, Instance: instance, DeviceName: device})
}

func diskURL(zone, name string) string {
	return "https://www.googleapis.com/compute/v1/projects/" + project + "/zones/" + zone + "/disks/" + name
}

// poll reads op again from the simulator.
func poll(t *testing.T, c clients, zone string, op *compute.Operation) *computepb.Operation {
	t.Helper()
	got, err := c.operations.Get(t.Context(), &computepb.GetZoneOperationRequest{Project: project, Zone: zone, Operation: op.Name()})
	if err != nil {
		t.Fatalf("getting operation %s: %v", op.Name(), err)
	}
	return got
}

// opCode is the first error code of a DONE operation ("" without one), or
// "RUNNING" while it runs.
func opCode(op *computepb.Operation) string {
	if op.GetStatus() != computepb.Operation_DONE {
		return op.GetStatus().String()
	}
	if errs := op.GetError().GetErrors(); len(errs) > 0 {
		return errs[0].GetCode()
	}
	return ""
}

// attachedDisks are an instance's disks[] other than its boot disk, as
// deviceName=mode@index source.
func attachedDisks(t *testing.T, c clients, zone, name string) []string {
	t.Helper()
	in, err := get(t.Context(), c, zone, name)
	if err != nil {
		t.Fatalf("getting instance %s: %v", name, err)
	}
	var out []string
	for _, d := range in.GetDisks() {
		if d.GetBoot() {
			continue
		}
		out = append(out, fmt.Sprintf("%s=%s@%d %s autoDelete=%v", d.GetDeviceName(), d.GetMode(), d.GetIndex(), d.GetSource(), d.GetAutoDelete()))
	}
	return out
}

// A disk is CREATING, then READY; attaching and detaching are operations
// on the instance, whose disks[] and the disk's users[] change once they
// are DONE; a disk in use cannot be deleted; a deleted disk is DELETING,
// then gone.
func TestDiskLifecycle(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	sim, c := startSim(t, gcesim.Options{Now: clk.Now})
	dc := diskClient(t, sim)
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	sim.SetOperationDelay(opDelay)

	lifecycleInsert(ctx, t, clk, dc, c)
	lifecycleAttach(ctx, t, clk, dc, c)

	if _, err := detach(ctx, c, zoneA, "cell-a", "nothing"); !isStatus(err, http.StatusBadRequest, "invalid") {
		t.Errorf("detaching an unknown device name: %v; want 400 invalid", err)
	}
	op, err := detach(ctx, c, zoneA, "cell-a", "data-1")
	if err != nil {
		t.Fatalf("detachDisk: %v", err)
	}
	if got := attachedDisks(t, c, zoneA, "cell-a"); len(got) != 1 {
		t.Errorf("disks while detaching = %v; want data-1 until the operation is DONE", got)
	}
	if _, err := detach(ctx, c, zoneA, "cell-a", "data-1"); !isStatus(err, http.StatusBadRequest, "resourceNotReady") {
		t.Errorf("detaching while detaching: %v; want 400 resourceNotReady", err)
	}
	clk.Advance(opDelay)
	if got := poll(t, c, zoneA, op); got.GetOperationType() != "detachDisk" || opCode(got) != "" {
		t.Errorf("detach operation = %s, %s; want a DONE detachDisk", got.GetOperationType(), opCode(got))
	}
	if got := attachedDisks(t, c, zoneA, "cell-a"); len(got) != 0 {
		t.Errorf("disks once detached = %v; want none", got)
	}
	if _, err := detach(ctx, c, zoneA, "cell-a", "data-1"); !isStatus(err, http.StatusBadRequest, "invalid") {
		t.Errorf("detaching once detached: %v; want 400 invalid (no attached disk)", err)
	}

	if _, err := dc.Delete(ctx, &computepb.DeleteDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"}); err != nil {
		t.Fatalf("deleting the detached disk: %v", err)
	}
	if d, err := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"}); err != nil || d.GetStatus() != "DELETING" {
		t.Errorf("disk while deleted = %v, %v; want DELETING", d.GetStatus(), err)
	}
	clk.Advance(opDelay)
	if _, err := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"}); !isStatus(err, http.StatusNotFound, "notFound") {
		t.Errorf("getting the deleted disk: %v; want 404", err)
	}
	list, err := all(t, dc.List(ctx, &computepb.ListDisksRequest{Project: project, Zone: zoneA}).Next), nil
	if err != nil || len(list) != 0 {
		t.Errorf("disks listed after the delete: %d; want none", len(list))
	}
}

// lifecycleInsert inserts the disk data-1 in zoneA: CREATING, not to be
// attached or inserted again, then READY.
func lifecycleInsert(ctx context.Context, t *testing.T, clk *cellstest.Clock, dc *compute.DisksClient, c clients) {
	t.Helper()
	op, err := insertDisk(ctx, dc, zoneA, "data-1")
	if err != nil {
		t.Fatalf("disks.insert: %v", err)
	}
	if got := poll(t, c, zoneA, op); got.GetOperationType() != "insert" || got.GetTargetLink() != diskURL(zoneA, "data-1") || opCode(got) != "RUNNING" {
		t.Errorf("insert operation = %s on %s, %s; want a RUNNING insert of the disk", got.GetOperationType(), got.GetTargetLink(), opCode(got))
	}
	d, err := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"})
	if err != nil || d.GetStatus() != "CREATING" || d.GetSizeGb() != 10 || d.GetType() != "https://www.googleapis.com/compute/v1/projects/"+project+"/zones/"+zoneA+"/diskTypes/pd-balanced" {
		t.Fatalf("disk while inserted = %v, %v; want CREATING, 10 GB, pd-balanced", d, err)
	}
	if _, err := attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-1"), "data-1", "READ_WRITE"); !isStatus(err, http.StatusBadRequest, "resourceNotReady") {
		t.Errorf("attaching a CREATING disk: %v; want 400 resourceNotReady", err)
	}
	if _, err := insertDisk(ctx, dc, zoneA, "data-1"); !isStatus(err, http.StatusConflict, "alreadyExists") {
		t.Errorf("inserting data-1 again: %v; want 409 alreadyExists", err)
	}
	clk.Advance(opDelay)
	if d, err := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"}); err != nil || d.GetStatus() != "READY" {
		t.Fatalf("disk after its insert = %v, %v; want READY", d.GetStatus(), err)
	}
}

// lifecycleAttach attaches data-1 to cell-a: an attachDisk operation of the
// instance, the disk on it and its users once DONE, and not to be deleted.
func lifecycleAttach(ctx context.Context, t *testing.T, clk *cellstest.Clock, dc *compute.DisksClient, c clients) {
	t.Helper()
	op, err := attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-1"), "data-1", "READ_WRITE")
	if err != nil {
		t.Fatalf("attachDisk: %v", err)
	}
	if got := poll(t, c, zoneA, op); got.GetOperationType() != "attachDisk" || opCode(got) != "RUNNING" ||
		got.GetTargetLink() != "https://www.googleapis.com/compute/v1/projects/"+project+"/zones/"+zoneA+"/instances/cell-a" {
		t.Errorf("attach operation = %s on %s, %s; want a RUNNING attachDisk of the instance", got.GetOperationType(), got.GetTargetLink(), opCode(got))
	}
	if got := attachedDisks(t, c, zoneA, "cell-a"); len(got) != 0 {
		t.Errorf("disks while attaching = %v; want none until the operation is DONE", got)
	}
	clk.Advance(opDelay)
	if got := opCode(poll(t, c, zoneA, op)); got != "" {
		t.Fatalf("attach operation ended %s; want DONE without error", got)
	}
	want := []string{"data-1=READ_WRITE@1 " + diskURL(zoneA, "data-1") + " autoDelete=false"}
	if diff := cmp.Diff(want, attachedDisks(t, c, zoneA, "cell-a")); diff != "" {
		t.Errorf("disks once attached (-want +got):\n%s", diff)
	}
	d, _ := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"})
	if diff := cmp.Diff([]string{"https://www.googleapis.com/compute/v1/projects/" + project + "/zones/" + zoneA + "/instances/cell-a"}, d.GetUsers()); diff != "" || d.GetLastAttachTimestamp() == "" {
		t.Errorf("users of the attached disk (-want +got):\n%s, lastAttachTimestamp %q", diff, d.GetLastAttachTimestamp())
	}
	if _, err := dc.Delete(ctx, &computepb.DeleteDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"}); !isStatus(err, http.StatusBadRequest, "resourceInUseByAnotherResource") {
		t.Errorf("deleting an attached disk: %v; want 400 resourceInUseByAnotherResource", err)
	}
}

// What attachDisk refuses before it starts: answered as HTTP errors.
func TestAttachRefusedAtOnce(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	dc := diskClient(t, sim)
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	for _, d := range []struct{ zone, name string }{{zoneA, "data-a"}, {zoneA, "data-b"}, {zoneB, "data-other-zone"}} {
		op, err := insertDisk(ctx, dc, d.zone, d.name)
		if err == nil {
			err = op.Wait(ctx)
		}
		if err != nil {
			t.Fatalf("inserting disk %s: %v", d.name, err)
		}
	}
	if op, err := attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-a"), "data-a", "READ_WRITE"); err != nil || op.Wait(ctx) != nil {
		t.Fatalf("attaching data-a: %v", err)
	}
	for _, tc := range []struct {
		what, instance, source, device, mode string
		status                               int
		reason                               string
	}{
		{"a disk of another zone", "cell-a", diskURL(zoneB, "data-other-zone"), "x", "READ_WRITE", 400, "invalid"},
		{"a disk that does not exist", "cell-a", diskURL(zoneA, "nothing"), "x", "READ_WRITE", 404, "notFound"},
		{"to an instance that does not exist", "nobody", diskURL(zoneA, "data-b"), "x", "READ_WRITE", 404, "notFound"},
		{"a device name in use", "cell-a", diskURL(zoneA, "data-b"), "data-a", "READ_WRITE", 400, "invalid"},
		{"the boot disk's device name", "cell-a", diskURL(zoneA, "data-b"), "persistent-disk-0", "READ_WRITE", 400, "invalid"},
		{"a mode GCE does not know", "cell-a", diskURL(zoneA, "data-b"), "x", "READ_MOSTLY", 400, "invalid"},
		{"a regional disk", "cell-a", "projects/" + project + "/regions/us-central1/disks/data-b", "x", "READ_WRITE", 400, "invalid"},
	} {
		_, err := attach(ctx, c, zoneA, tc.instance, tc.source, tc.device, tc.mode)
		if !isStatus(err, tc.status, tc.reason) {
			t.Errorf("attaching %s: %v; want %d %s", tc.what, err, tc.status, tc.reason)
		}
	}
	if diff := cmp.Diff([]string{"data-a=READ_WRITE@1 " + diskURL(zoneA, "data-a") + " autoDelete=false"}, attachedDisks(t, c, zoneA, "cell-a")); diff != "" {
		t.Errorf("disks after the refusals (-want +got):\n%s", diff)
	}

	// An instance shutting down is busy; GCE attaches to a running or a
	// stopped one.
	sim.SetShutdownDelay(time.Hour)
	if _, err := c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a"}); err != nil {
		t.Fatalf("deleting cell-a: %v", err)
	}
	if _, err := attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-b"), "data-b", "READ_WRITE"); !isStatus(err, http.StatusBadRequest, "resourceNotReady") {
		t.Errorf("attaching to a STOPPING instance: %v; want 400 resourceNotReady", err)
	}
}

// A disk READ_WRITE on one instance, or READ_ONLY anywhere when asked
// READ_WRITE, fails the attach's operation with
// RESOURCE_IN_USE_BY_ANOTHER_RESOURCE; READ_ONLY on several instances is
// allowed. A deleted instance lets go of its disks.
func TestAttachModes(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	dc := diskClient(t, sim)
	for _, n := range []string{"cell-a", "cell-b", "cell-c"} {
		mustInsert(t, c, spec{name: n, zone: zoneA, machineType: "e2-small"})
	}
	for _, n := range []string{"rw", "ro"} {
		if op, err := insertDisk(ctx, dc, zoneA, n); err != nil || op.Wait(ctx) != nil {
			t.Fatalf("inserting disk %s: %v", n, err)
		}
	}
	step := func(instance, disk, mode, want string) {
		t.Helper()
		op, err := attach(ctx, c, zoneA, instance, diskURL(zoneA, disk), disk, mode)
		if err != nil {
			t.Fatalf("attaching %s %s to %s: %v", disk, mode, instance, err)
		}
		// Wait answers a failed operation's error as a googleapi.Error; its
		// code is in the operation.
		if err := op.Wait(ctx); err != nil && !op.Done() {
			t.Fatalf("waiting: %v", err)
		}
		if got := opCode(op.Proto()); got != want {
			t.Errorf("attaching %s %s to %s ended %q (%s); want %q", disk, mode, instance, got, op.Proto().GetError(), want)
		}
	}
	const inUse = "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
	step("cell-a", "rw", "READ_WRITE", "")
	step("cell-b", "rw", "READ_WRITE", inUse)
	step("cell-b", "rw", "READ_ONLY", inUse)
	step("cell-a", "ro", "READ_ONLY", "")
	step("cell-b", "ro", "READ_ONLY", "")
	step("cell-c", "ro", "READ_WRITE", inUse)
	if got := attachedDisks(t, c, zoneA, "cell-b"); len(got) != 1 || got[0] != "ro=READ_ONLY@1 "+diskURL(zoneA, "ro")+" autoDelete=false" {
		t.Errorf("cell-b's disks = %v; want ro alone, READ_ONLY (the refused attaches attached nothing)", got)
	}
	if d, _ := sim.Disk(zoneA, "ro"); !slices.Equal(d.Users, []string{zoneA + "/cell-a", zoneA + "/cell-b"}) {
		t.Errorf("users of ro = %v; want cell-a and cell-b", d.Users)
	}

	op, err := c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a"})
	if err != nil || op.Wait(ctx) != nil {
		t.Fatalf("deleting cell-a: %v", err)
	}
	d, err := dc.Get(ctx, &computepb.GetDiskRequest{Project: project, Zone: zoneA, Disk: "rw"})
	if err != nil || d.GetStatus() != "READY" || len(d.GetUsers()) != 0 {
		t.Errorf("disk rw after its instance's delete = %v, users %v, %v; want READY, kept (autoDelete false), unused", d.GetStatus(), d.GetUsers(), err)
	}
	step("cell-b", "rw", "READ_WRITE", "")
}

// The machine type's maximumPersistentDisks counts the boot disk: 16 on a
// shared-core e2-small, so the sixteenth data disk fails LIMIT_EXCEEDED.
func TestAttachLimit(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	dc := diskClient(t, sim)
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	for i := range 16 {
		name := fmt.Sprintf("data-%d", i)
		if op, err := insertDisk(ctx, dc, zoneA, name); err != nil || op.Wait(ctx) != nil {
			t.Fatalf("inserting %s: %v", name, err)
		}
		op, err := attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, name), name, "READ_WRITE")
		if err == nil {
			if err = op.Wait(ctx); op.Done() {
				err = nil
			}
		}
		if err != nil {
			t.Fatalf("attaching %s: %v", name, err)
		}
		want := ""
		if i == 15 {
			want = "LIMIT_EXCEEDED"
		}
		if got := opCode(op.Proto()); got != want {
			t.Errorf("attaching disk %d ended %q; want %q", i+1, got, want)
		}
	}
	if got := len(attachedDisks(t, c, zoneA, "cell-a")); got != 15 {
		t.Errorf("cell-a has %d data disks; want 15 (and the boot disk)", got)
	}
}

// diskCells is a DiskStarter that records its disks' calls; DetachDisk
// fails while busy says the disk is still held (mounted in the cell).
type diskCells struct {
	*cellstest.FakeCells
	mu    sync.Mutex
	calls []string
	busy  int // DetachDisk fails this many more times
}

func (d *diskCells) record(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
}

func (d *diskCells) CreateDisk(_ context.Context, id string, size int64) error {
	d.record(fmt.Sprintf("create %d", size))
	return nil
}

func (d *diskCells) DeleteDisk(context.Context, string) error { d.record("delete"); return nil }

func (d *diskCells) AttachDisk(_ context.Context, instance, _, path string, ro bool) error {
	d.record(fmt.Sprintf("attach %s %s ro=%v", instance, path, ro))
	return nil
}

func (d *diskCells) DetachDisk(_ context.Context, instance, _ string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy > 0 {
		d.busy--
		return errors.New("device busy")
	}
	d.calls = append(d.calls, "detach "+instance)
	return nil
}

func (d *diskCells) recorded() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// With a DiskStarter the disks reach the cells: created at insert,
// attached at the device's by-id path, detached (the operation RUNNING
// while the cell still holds the disk), deleted.
func TestDisksReachTheCells(t *testing.T) {
	ctx := t.Context()
	cells := &diskCells{FakeCells: cellstest.NewFakeCells(), busy: 2}
	sim, c := startSim(t, gcesim.Options{Cells: cells})
	dc := diskClient(t, sim)
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if in, _ := sim.Instance(zoneA, "cell-a"); in.Status == "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cell-a did not run")
		}
	}
	steps := []func() (*compute.Operation, error){
		func() (*compute.Operation, error) { return insertDisk(ctx, dc, zoneA, "data-1") },
		func() (*compute.Operation, error) {
			return attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-1"), "data-1", "READ_ONLY")
		},
		func() (*compute.Operation, error) { return detach(ctx, c, zoneA, "cell-a", "data-1") },
		func() (*compute.Operation, error) {
			return dc.Delete(ctx, &computepb.DeleteDiskRequest{Project: project, Zone: zoneA, Disk: "data-1"})
		},
	}
	for i, step := range steps {
		op, err := step()
		if err == nil {
			err = op.Wait(ctx)
		}
		if err != nil || opCode(op.Proto()) != "" {
			t.Fatalf("step %d: %v, %v", i, err, op.Proto().GetError())
		}
	}
	// A deleted instance's disks leave its cell.
	op, err := insertDisk(ctx, dc, zoneA, "data-2")
	if err == nil {
		err = op.Wait(ctx)
	}
	if err == nil {
		op, err = attach(ctx, c, zoneA, "cell-a", diskURL(zoneA, "data-2"), "data-2", "READ_WRITE")
	}
	if err == nil {
		err = op.Wait(ctx)
	}
	if err == nil {
		op, err = c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a"})
	}
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("attaching data-2 and deleting cell-a: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(cells.recorded()) < 7 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	want := []string{"create 10737418240", "attach cell-a /dev/disk/by-id/google-data-1 ro=true", "detach cell-a", "delete",
		"create 10737418240", "attach cell-a /dev/disk/by-id/google-data-2 ro=false", "detach cell-a"}
	if diff := cmp.Diff(want, cells.recorded()); diff != "" {
		t.Errorf("DiskStarter calls (-want +got):\n%s", diff)
	}
	if cells.busy != 0 {
		t.Errorf("the detach's operation ended while the cell still held the disk (%d refusals left)", cells.busy)
	}
}

// A machine series that cannot take a disk type ends the attach's
// operation with UNSUPPORTED_OPERATION "[<type>] features are not
// compatible for creating instance" and attaches nothing: N4 takes no
// Persistent Disk, C3 neither pd-standard nor pd-extreme.
func TestAttachDiskTypeTheSeriesRefuses(t *testing.T) {
	ctx := t.Context()
	sim, c := startSim(t, gcesim.Options{})
	dc := diskClient(t, sim)
	for i, tc := range []struct {
		machineType, diskType string
		refused               bool
	}{
		{"n4-standard-2", "pd-balanced", true},
		{"n4-standard-4", "pd-ssd", true},
		{"c3-standard-4", "pd-standard", true},
		{"c3-standard-4", "pd-extreme", true},
		{"c3-standard-8", "pd-ssd", false},
		{"e2-standard-2", "pd-standard", false},
		{"n2-standard-2", "pd-balanced", false},
	} {
		cell, disk := fmt.Sprintf("cell-%d", i), fmt.Sprintf("disk-%d", i)
		mustInsert(t, c, spec{name: cell, zone: zoneA, machineType: tc.machineType})
		op, err := dc.Insert(ctx, &computepb.InsertDiskRequest{Project: project, Zone: zoneA, DiskResource: &computepb.Disk{
			Name: proto.String(disk), SizeGb: proto.Int64(10), Type: proto.String("zones/" + zoneA + "/diskTypes/" + tc.diskType),
		}})
		if err != nil || op.Wait(ctx) != nil {
			t.Fatalf("inserting %s disk %s: %v", tc.diskType, disk, err)
		}
		op, err = attach(ctx, c, zoneA, cell, diskURL(zoneA, disk), disk, "READ_WRITE")
		if err != nil {
			t.Fatalf("attaching a %s disk to %s: %v; want the call accepted and its operation to say", tc.diskType, tc.machineType, err)
		}
		waitErr := op.Wait(ctx)
		got := op.Proto()
		wantCode, wantMsg := "", ""
		if tc.refused {
			wantCode, wantMsg = "UNSUPPORTED_OPERATION", "["+tc.diskType+"] features are not compatible for creating instance."
		}
		if code := opCode(got); code != wantCode {
			t.Errorf("attaching a %s disk to %s ended %q (%v); want %q", tc.diskType, tc.machineType, code, waitErr, wantCode)
		}
		if errs := got.GetError().GetErrors(); tc.refused && (len(errs) != 1 || errs[0].GetMessage() != wantMsg) {
			t.Errorf("the refusal's errors = %v; want one saying %q", errs, wantMsg)
		}
		wantDisks := 1
		if tc.refused {
			wantDisks = 0
		}
		if n := len(attachedDisks(t, c, zoneA, cell)); n != wantDisks {
			t.Errorf("%s has %d data disks after the attach of a %s disk; want %d", tc.machineType, n, tc.diskType, wantDisks)
		}
	}
}
