package cellstest

import (
	"errors"
	"testing"
)

func TestDiskCells(t *testing.T) {
	ctx := t.Context()
	d := NewDiskCells()
	for _, id := range []string{"i-1", "i-2", "i-gone"} {
		if _, err := d.Start(ctx, id, "t3.small", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Stop(ctx, "i-gone"); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected")
	const lun0, lun1 = "/dev/disk/azure/scsi1/lun0", "/dev/disk/azure/scsi1/lun1"
	type step struct {
		name    string
		before  func() // Hold, Release, FailNext
		call    func() error
		wantErr bool
	}
	create := func(id string, size int64) func() error {
		return func() error { return d.CreateDisk(ctx, id, size) }
	}
	attach := func(instance, id, path string, ro bool) func() error {
		return func() error { return d.AttachDisk(ctx, instance, id, path, ro) }
	}
	detach := func(instance, id string) func() error {
		return func() error { return d.DetachDisk(ctx, instance, id) }
	}
	del := func(id string) func() error { return func() error { return d.DeleteDisk(ctx, id) } }
	steps := []step{
		{name: "create", call: create("vol-1", 1<<20)},
		{name: "create again, same size", call: create("vol-1", 1<<20)},
		{name: "create again, another size", call: create("vol-1", 2<<20), wantErr: true},
		{name: "create, not whole sectors", call: create("vol-odd", 1000), wantErr: true},
		{name: "create another", call: create("vol-2", 1<<20)},
		{name: "attach an unknown disk", call: attach("i-1", "vol-x", lun0, false), wantErr: true},
		{name: "attach to an instance without cell", call: attach("i-none", "vol-1", lun0, false), wantErr: true},
		{name: "attach to a stopped cell", call: attach("i-gone", "vol-1", lun0, false), wantErr: true},
		{name: "attach", call: attach("i-1", "vol-1", lun0, false)},
		{name: "attach again", call: attach("i-1", "vol-1", lun0, false)},
		{name: "attach again at another path", call: attach("i-1", "vol-1", lun1, false), wantErr: true},
		{name: "attach again read-only", call: attach("i-1", "vol-1", lun0, true), wantErr: true},
		{name: "attach to another instance", call: attach("i-2", "vol-1", lun0, false), wantErr: true},
		{name: "another disk at the same path", call: attach("i-1", "vol-2", lun0, false), wantErr: true},
		{name: "another disk at the same path of another instance", call: attach("i-2", "vol-2", lun0, true)},
		{name: "delete an attached disk", call: del("vol-1"), wantErr: true},
		{name: "injected attach failure", before: func() { d.FailNext(OpAttachDisk, injected) }, call: attach("i-1", "vol-1", lun0, false), wantErr: true},
		{name: "detach while held", before: func() { d.Hold("i-1", "vol-1") }, call: detach("i-1", "vol-1"), wantErr: true},
		{name: "detach once released", before: func() { d.Release("i-1", "vol-1") }, call: detach("i-1", "vol-1")},
		{name: "detach again", call: detach("i-1", "vol-1")},
		{name: "injected detach failure", before: func() { d.FailNext(OpDetachDisk, injected) }, call: detach("i-2", "vol-2"), wantErr: true},
		{name: "delete", call: del("vol-1")},
		{name: "delete again", call: del("vol-1")},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		if err := s.call(); (err != nil) != s.wantErr {
			t.Errorf("%s: %v; want an error: %t", s.name, err, s.wantErr)
		}
	}
	if _, ok := d.Disk("vol-1"); ok {
		t.Error("vol-1 exists after its delete")
	}
	if size, ok := d.Disk("vol-2"); !ok || size != 1<<20 {
		t.Errorf("vol-2: %d, %t; want 1 MiB", size, ok)
	}
	if a, ok := d.Attachment("i-2", "vol-2"); !ok || a != (DiskAttachment{Path: lun0, ReadOnly: true}) {
		t.Errorf("vol-2 on i-2: %+v, %t; want at %s read-only (the injected failure changed nothing)", a, ok, lun0)
	}

	// Stopping the cell detaches its disks, held or not.
	d.Hold("i-2", "vol-2")
	if err := d.Stop(ctx, "i-2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Attachment("i-2", "vol-2"); ok {
		t.Error("vol-2 still attached to i-2 after its cell stopped")
	}
	if err := d.DeleteDisk(ctx, "vol-2"); err != nil {
		t.Errorf("deleting vol-2 once its instance stopped: %v", err)
	}

	calls := d.Calls()
	if len(calls) != len(steps)+1 {
		t.Fatalf("%d calls recorded, want %d", len(calls), len(steps)+1)
	}
	for i, s := range steps {
		if (calls[i].Err != nil) != s.wantErr {
			t.Errorf("call %d (%s) recorded with error %v", i, s.name, calls[i].Err)
		}
	}
	if c := calls[16]; c != (DiskCall{Op: OpAttachDisk, Instance: "i-1", Disk: "vol-1", Path: lun0, Err: injected}) {
		t.Errorf("the injected attach recorded as %+v", c)
	}
	if c := calls[0]; c != (DiskCall{Op: OpCreateDisk, Disk: "vol-1", Size: 1 << 20}) {
		t.Errorf("the first call recorded as %+v", c)
	}
}
