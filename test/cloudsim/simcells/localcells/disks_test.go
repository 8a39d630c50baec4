package localcells

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/local"
	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// The handles of the clouds' disk IDs and names are valid handles of the
// local plugin (local.CreateVolume refuses any other), readable, and
// apart for different IDs.
func TestDiskHandle(t *testing.T) {
	arm := "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/disks/data_disk.1"
	tests := []struct {
		id, wantPrefix string
	}{
		{"vol-0123456789abcdef0", "vol-0123456789abcdef0-"},
		{"data-1", "data-1-"},
		{arm, "resourceGroups-rg-providers-Microsoft-Compute-disks-data-disk-1-"},
		{"/", "disk-"},
		{strings.Repeat("x", 300), strings.Repeat("x", 64) + "-"},
	}
	stateDir := t.TempDir()
	seen := map[string]string{}
	for _, tt := range append(tests, struct{ id, wantPrefix string }{"Data-1", "Data-1-"}) {
		h := diskHandle(tt.id)
		if !strings.HasPrefix(h, tt.wantPrefix) || h != diskHandle(tt.id) {
			t.Errorf("diskHandle(%q) = %q (again %q); want it to start with %q, the same each time", tt.id, h, diskHandle(tt.id), tt.wantPrefix)
		}
		if other, ok := seen[h]; ok {
			t.Errorf("diskHandle(%q) = diskHandle(%q) = %q", tt.id, other, h)
		}
		seen[h] = tt.id
		if err := local.CreateVolume(t.Context(), stateDir, h, "local", 1<<20); err != nil {
			t.Errorf("diskHandle(%q) = %q, which the local plugin refuses: %v", tt.id, h, err)
		}
	}
	if diskHandle("a/b") == diskHandle("a-b") {
		t.Error(`"a/b" and "a-b" have the same handle`)
	}
}

// needLoops skips a test where loop devices cannot be bound, as the local
// plugin's tests do.
func needLoops(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("binding loop devices needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
}

// A disk attached to two instances' cells in turn, at the same cloud path:
// each instance (and its agent, given {disks}) finds it under its own disk
// path root, and only while it is attached to it; a detach while the
// device is open fails and keeps it, one after the close finishes;
// deleting an attached disk fails.
func TestDisks(t *testing.T) {
	needLoops(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const disk, path, size = "disk-1", "/dev/disk/azure/scsi1/lun0", 8 << 20
	cells := startDiskCells(ctx, t, path, "vm-a", "vm-b")
	if err := cells.CreateDisk(ctx, disk, size); err != nil {
		t.Fatalf("CreateDisk: %v", err)
	}
	if err := cells.CreateDisk(ctx, disk, size); err != nil {
		t.Errorf("CreateDisk again: %v; want it idempotent", err)
	}
	if err := cells.CreateDisk(ctx, disk, 2*size); err == nil {
		t.Error("CreateDisk of another size succeeded")
	}

	// On vm-a: there, not on vm-b; written to.
	if err := cells.AttachDisk(ctx, "vm-a", disk, path, false); err != nil {
		t.Fatalf("AttachDisk to vm-a: %v", err)
	}
	if err := cells.AttachDisk(ctx, "vm-a", disk, path, false); err != nil {
		t.Errorf("AttachDisk to vm-a again: %v; want it idempotent", err)
	}
	devA := checkDisk(t, cells, "vm-a", path, size)
	if got := agentFound(ctx, t, cells, "vm-a", path); got != devA {
		t.Errorf("vm-a's agent found %q at %s; want %s", got, path, devA)
	}
	checkNoDisk(t, cells, "vm-b", path)
	if err := cells.AttachDisk(ctx, "vm-b", disk, path, false); err == nil || !pluginapi.IsVolumeConflict(err) {
		t.Errorf("AttachDisk to vm-b while on vm-a: %v; want an in-use conflict", err)
	}
	data := []byte("written on vm-a")
	if err := os.WriteFile(devA, data, 0); err != nil {
		t.Fatalf("writing to %s: %v", devA, err)
	}

	// Detached while open: refused, still there; after the close, gone.
	detachWhileOpen(ctx, t, cells, "vm-a", disk, path, devA, size)
	checkNoDisk(t, cells, "vm-a", path)
	if err := cells.DetachDisk(ctx, "vm-a", disk); err != nil {
		t.Errorf("DetachDisk again: %v; want it done", err)
	}
	if _, err := os.Stat(cells.DiskPathRoot("vm-b") + ".found"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vm-b's agent found a disk while it was vm-a's: %v", err)
	}

	// On vm-b, at the same path: the same data; not on vm-a.
	if err := cells.AttachDisk(ctx, "vm-b", disk, path, true); err != nil {
		t.Fatalf("AttachDisk to vm-b: %v", err)
	}
	devB := checkDisk(t, cells, "vm-b", path, size)
	if got := agentFound(ctx, t, cells, "vm-b", path); got != devB {
		t.Errorf("vm-b's agent found %q at %s; want %s", got, path, devB)
	}
	checkNoDisk(t, cells, "vm-a", path)
	checkData(t, devB, data)
	if err := os.WriteFile(devB, data, 0); err == nil {
		t.Error("wrote to a disk attached read-only")
	}

	if err := cells.DeleteDisk(ctx, disk); err == nil || !pluginapi.IsVolumeConflict(err) {
		t.Errorf("DeleteDisk of an attached disk: %v; want an in-use conflict", err)
	}
	if err := cells.DetachDisk(ctx, "vm-b", disk); err != nil {
		t.Fatalf("DetachDisk from vm-b: %v", err)
	}
	checkNoDisk(t, cells, "vm-b", path)
	if err := cells.DeleteDisk(ctx, disk); err != nil {
		t.Fatalf("DeleteDisk: %v", err)
	}
	if err := cells.DeleteDisk(ctx, disk); err != nil {
		t.Errorf("DeleteDisk again: %v; want it done", err)
	}
	if err := cells.AttachDisk(ctx, "vm-a", disk, path, false); !pluginapi.IsNotFound(err) {
		t.Errorf("AttachDisk of a deleted disk: %v; want NotFound", err)
	}
}

// startDiskCells starts local cells with the instances instanceIDs and
// their agents. Each agent looks for a block device at path under its disk
// path root ({disks}), as kip-cell --disk-path-root does, and writes the
// device it found beside the root.
func startDiskCells(ctx context.Context, t *testing.T, path string, instanceIDs ...string) *LocalCells {
	t.Helper()
	// Registered first, so run last, after the cells closed: no loop
	// device is left bound to a disk of this test's state directory (and
	// any that is, is unbound).
	var stateDir string
	t.Cleanup(func() { unbindLeftLoops(t, stateDir) })
	stateDir = t.TempDir()
	cells, err := New(ctx, Config{
		PluginPath: BuildPlugin(t), StateDir: stateDir, Network: "loopback",
		InstanceTypes: []simcells.InstanceType{{Name: "m.small", VCPUs: 1, MemoryMiB: 256}},
		AgentCommand: []string{"/bin/sh", "-c", `while [ ! -b "$0` + path + `" ]; do sleep 0.1; done; ` +
			`readlink -f "$0` + path + `" > "$0.found.tmp" && mv "$0.found.tmp" "$0.found"; exec sleep 300`, "{disks}"},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("starting local cells: %v", err)
	}
	t.Cleanup(func() {
		if err := cells.Close(); err != nil {
			t.Errorf("closing local cells: %v", err)
		}
	})
	for _, id := range instanceIDs {
		if _, err := cells.Start(ctx, id, "m.small", []byte(`{}`)); err != nil {
			t.Fatalf("starting %s: %v", id, err)
		}
		if err := cells.StartAgent(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return cells
}

// agentFound waits for what the instance's agent found at path.
func agentFound(ctx context.Context, t *testing.T, cells *LocalCells, instanceID, path string) string {
	t.Helper()
	for ctx.Err() == nil {
		if b, err := os.ReadFile(cells.DiskPathRoot(instanceID) + ".found"); err == nil {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the agent of %s found no disk at %s", instanceID, path)
	return ""
}

// detachWhileOpen opens the instance's disk device dev and detaches the
// disk: refused while the device is open, and the disk still there; done
// after the close.
func detachWhileOpen(ctx context.Context, t *testing.T, cells *LocalCells, instanceID, disk, path, dev string, size int64) {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() }) // before the cells close, if the test stops early
	err = cells.DetachDisk(ctx, instanceID, disk)
	if err == nil {
		t.Error("DetachDisk of an open device succeeded")
	}
	checkDisk(t, cells, instanceID, path, size)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel unbinds the device at its last close, maybe a moment
	// after: asked again, as a simulator does.
	for err != nil && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		err = cells.DetachDisk(ctx, instanceID, disk)
	}
	if err != nil {
		t.Fatalf("DetachDisk after the close: %v", err)
	}
}

// checkData checks that the device dev starts with data.
func checkData(t *testing.T, dev string, data []byte) {
	t.Helper()
	got := make([]byte, len(data))
	if b, err := os.Open(dev); err != nil {
		t.Error(err)
	} else {
		_, err := b.ReadAt(got, 0)
		_ = b.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("read on %s %q, %v; want %q", dev, got, err, data)
		}
	}
}

// checkDisk checks that the instance finds a block device of size bytes
// at path under its disk path root, as its agent would (symlinks
// followed), and returns it.
func checkDisk(t *testing.T, c *LocalCells, instanceID, path string, size int64) string {
	t.Helper()
	dev, err := filepath.EvalSymlinks(filepath.Join(c.DiskPathRoot(instanceID), path))
	if err != nil {
		t.Fatalf("%s's disk at %s: %v", instanceID, path, err)
	}
	info, err := os.Stat(dev)
	if err != nil || info.Mode()&fs.ModeDevice == 0 || info.Mode()&fs.ModeCharDevice != 0 {
		t.Fatalf("%s's disk at %s is %s (%v), not a block device", instanceID, path, dev, err)
	}
	sectors, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "size"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(sectors)), 10, 64); err != nil || n*512 != size {
		t.Errorf("%s's disk at %s (%s) has %s sectors of 512 bytes; want %d bytes", instanceID, path, dev, sectors, size)
	}
	return dev
}

// checkNoDisk checks that the instance has no disk at path.
func checkNoDisk(t *testing.T, c *LocalCells, instanceID, path string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(c.DiskPathRoot(instanceID), path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s has a disk at %s: %v", instanceID, path, err)
	}
}

// unbindLeftLoops fails the test for every loop device bound to a file
// under stateDir, and unbinds it (only those: the machine's other loop
// devices are not the test's).
func unbindLeftLoops(t *testing.T, stateDir string) {
	if stateDir == "" {
		return
	}
	// The kernel shows a backing file's path with its links resolved.
	if r, err := filepath.EvalSymlinks(stateDir); err == nil {
		stateDir = r
	}
	backings, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backings {
		file, err := os.ReadFile(b)
		if err != nil || !strings.HasPrefix(string(file), stateDir+"/") {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(b)))
		t.Errorf("loop device %s is still bound to %s", dev, strings.TrimSpace(string(file)))
		if fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			_ = unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
			_ = unix.Close(fd)
		}
	}
}
