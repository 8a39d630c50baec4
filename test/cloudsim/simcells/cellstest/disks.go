package cellstest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// DiskOp names a call of simcells.DiskStarter.
type DiskOp string

// The calls of simcells.DiskStarter.
const (
	OpCreateDisk DiskOp = "CreateDisk"
	OpDeleteDisk DiskOp = "DeleteDisk"
	OpAttachDisk DiskOp = "AttachDisk"
	OpDetachDisk DiskOp = "DetachDisk"
)

// DiskCall is one call of a DiskCells, as it was made, with what it
// answered.
type DiskCall struct {
	Op       DiskOp
	Instance string // AttachDisk, DetachDisk
	Disk     string
	Path     string // AttachDisk
	ReadOnly bool   // AttachDisk
	Size     int64  // CreateDisk
	Err      error
}

// DiskAttachment is where a disk is attached to an instance's cell.
type DiskAttachment struct {
	Path     string
	ReadOnly bool
}

// DiskCells is a FakeCells whose cells have disks (a
// simcells.DiskStarter) that records every call and keeps what
// localcells.LocalCells would do, so that a simulator tested with it
// holds on the real one: CreateDisk is idempotent for the same size, and
// refuses another; AttachDisk needs a started cell that is not stopped and
// a disk attached nowhere else, is idempotent for the same instance, disk
// and path, and refuses another path for the disk or another disk at the
// path; DetachDisk of a disk the cell holds open (Hold) fails and keeps
// it attached; DeleteDisk refuses an attached disk, and a disk or an
// attachment that is not there is already gone; Stop detaches the cell's
// disks. FailNext makes the next call of an operation fail, changing
// nothing.
type DiskCells struct {
	*FakeCells

	mu       sync.Mutex
	calls    []DiskCall
	failNext map[DiskOp][]error
	disks    map[string]int64                     // disk → size
	attached map[string]map[string]DiskAttachment // instance → disk → attachment
	held     map[[2]string]bool                   // {instance, disk} the cell holds open
}

var _ simcells.DiskStarter = (*DiskCells)(nil)

// NewDiskCells returns a DiskCells without disks.
func NewDiskCells() *DiskCells {
	return &DiskCells{FakeCells: NewFakeCells(), failNext: map[DiskOp][]error{}, disks: map[string]int64{},
		attached: map[string]map[string]DiskAttachment{}, held: map[[2]string]bool{}}
}

// FailNext makes the next call of op answer err and change nothing; called
// again, the errors are answered in turn.
func (d *DiskCells) FailNext(op DiskOp, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext[op] = append(d.failNext[op], err)
}

// Hold makes the instance's cell hold the disk open, as a mounted disk
// is: DetachDisk fails until Release.
func (d *DiskCells) Hold(instanceID, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[[2]string{instanceID, id}] = true
}

// Release lets the instance's cell let the disk go.
func (d *DiskCells) Release(instanceID, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.held, [2]string{instanceID, id})
}

// Calls returns the calls made so far, in order.
func (d *DiskCells) Calls() []DiskCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Disk returns the size of a disk that exists.
func (d *DiskCells) Disk(id string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	size, ok := d.disks[id]
	return size, ok
}

// Attachment returns the disk's attachment to the instance's cell.
func (d *DiskCells) Attachment(instanceID, id string) (DiskAttachment, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.attached[instanceID][id]
	return a, ok
}

// do records call and runs it under d.mu, unless an error was injected
// for its operation.
func (d *DiskCells) do(call DiskCall, run func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if errs := d.failNext[call.Op]; len(errs) > 0 {
		call.Err, d.failNext[call.Op] = errs[0], errs[1:]
	} else {
		call.Err = run()
	}
	d.calls = append(d.calls, call)
	return call.Err
}

// attachedTo is the instance the disk is attached to, or "". Under d.mu.
func (d *DiskCells) attachedTo(id string) string {
	for instance, disks := range d.attached {
		if _, ok := disks[id]; ok {
			return instance
		}
	}
	return ""
}

// CreateDisk makes a disk of sizeBytes; again with the same size it
// succeeds, with another it fails.
func (d *DiskCells) CreateDisk(_ context.Context, id string, sizeBytes int64) error {
	return d.do(DiskCall{Op: OpCreateDisk, Disk: id, Size: sizeBytes}, func() error {
		switch size, ok := d.disks[id]; {
		case ok && size != sizeBytes:
			return fmt.Errorf("creating disk %s of %d bytes: it exists with %d", id, sizeBytes, size)
		case sizeBytes <= 0 || sizeBytes%512 != 0:
			return fmt.Errorf("creating disk %s: size %d is not a positive multiple of 512 bytes", id, sizeBytes)
		}
		d.disks[id] = sizeBytes
		return nil
	})
}

// DeleteDisk deletes a disk attached nowhere; an unknown one is deleted.
func (d *DiskCells) DeleteDisk(_ context.Context, id string) error {
	return d.do(DiskCall{Op: OpDeleteDisk, Disk: id}, func() error {
		if instance := d.attachedTo(id); instance != "" {
			return fmt.Errorf("deleting disk %s: it is attached to %s", id, instance)
		}
		delete(d.disks, id)
		return nil
	})
}

// AttachDisk attaches the disk to the instance's cell at path.
func (d *DiskCells) AttachDisk(_ context.Context, instanceID, id, path string, readOnly bool) error {
	// FakeCells' own lock, not under d.mu.
	running := d.IsStarted(instanceID) && d.Stops(instanceID) == 0
	return d.do(DiskCall{Op: OpAttachDisk, Instance: instanceID, Disk: id, Path: path, ReadOnly: readOnly}, func() error {
		want := DiskAttachment{Path: path, ReadOnly: readOnly}
		if _, ok := d.disks[id]; !ok {
			return fmt.Errorf("attaching disk %s to %s: no such disk", id, instanceID)
		}
		if !running {
			return fmt.Errorf("attaching disk %s to %s: the instance has no running cell", id, instanceID)
		}
		if other := d.attachedTo(id); other != "" && other != instanceID {
			return fmt.Errorf("attaching disk %s to %s: it is attached to %s", id, instanceID, other)
		}
		for disk, a := range d.attached[instanceID] {
			switch {
			case disk == id && a != want:
				return fmt.Errorf("attaching disk %s to %s at %s (read-only %t): it is attached at %s (read-only %t)", id, instanceID, path, readOnly, a.Path, a.ReadOnly)
			case disk != id && a.Path == path:
				return fmt.Errorf("attaching disk %s to %s at %s: disk %s is there", id, instanceID, path, disk)
			}
		}
		if d.attached[instanceID] == nil {
			d.attached[instanceID] = map[string]DiskAttachment{}
		}
		d.attached[instanceID][id] = want
		return nil
	})
}

// DetachDisk detaches the disk from the instance's cell, unless the cell
// holds it (Hold); a disk not attached there is detached.
func (d *DiskCells) DetachDisk(_ context.Context, instanceID, id string) error {
	return d.do(DiskCall{Op: OpDetachDisk, Instance: instanceID, Disk: id}, func() error {
		if _, ok := d.attached[instanceID][id]; !ok {
			return nil
		}
		if d.held[[2]string{instanceID, id}] {
			return fmt.Errorf("detaching disk %s from %s: the cell still holds it open", id, instanceID)
		}
		delete(d.attached[instanceID], id)
		return nil
	})
}

// Stop stops the cell and detaches its disks, as terminating a local cell
// does, whether the cell holds them or not.
func (d *DiskCells) Stop(ctx context.Context, instanceID string) error {
	d.mu.Lock()
	delete(d.attached, instanceID)
	for k := range d.held {
		if k[0] == instanceID {
			delete(d.held, k)
		}
	}
	d.mu.Unlock()
	return d.FakeCells.Stop(ctx, instanceID)
}
