package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/cell/runtime"
	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// sharedEnv is a containerd namespace shared by cells, as the local
// plugin's cells on one machine share one.
type sharedEnv struct {
	d     *containerdtest.Daemon
	ns    string
	nsCtx context.Context
}

func (e *sharedEnv) runtime(t *testing.T, cell string) *runtime.Containerd {
	t.Helper()
	rt, err := runtime.NewContainerd(e.d.Client, runtime.ContainerdConfig{
		Namespace: e.ns, Cell: cell, StateDir: filepath.Join(e.d.Dir, cell), RuncRoot: e.d.RuncRoot,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// snapshots returns the names of the namespace's snapshots of kind.
func (e *sharedEnv) snapshots(t *testing.T, kind snapshots.Kind) []string {
	t.Helper()
	var names []string
	err := e.d.Client.SnapshotService(runtime.Snapshotter).Walk(e.nsCtx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == kind {
			names = append(names, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// cellsOfContainers returns the cell label of every container.
func (e *sharedEnv) cellsOfContainers(t *testing.T) []string {
	t.Helper()
	ctrs, err := e.d.Client.Containers(e.nsCtx)
	if err != nil {
		t.Fatal(err)
	}
	var cells []string
	for _, c := range ctrs {
		labels, err := c.Labels(e.nsCtx)
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, labels[runtime.CellLabel])
	}
	return cells
}

// hasLease reports whether the lease id exists.
func (e *sharedEnv) hasLease(t *testing.T, id string) bool {
	t.Helper()
	_, err := e.d.Client.LeasesService().ListResources(e.nsCtx, leases.Lease{ID: id})
	if err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// collect runs containerd's garbage collection.
func (e *sharedEnv) collect(t *testing.T) {
	t.Helper()
	if _, err := e.d.Client.LeasesService().Create(e.nsCtx, leases.WithID("gc")); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Client.LeasesService().Delete(e.nsCtx, leases.Lease{ID: "gc"}, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
}

// TestContainerdSharedNamespace runs two cells' runtimes over one
// containerd namespace, as the local plugin's cells on one machine: the
// second cell finds the first one's image, fetching and unpacking
// nothing (the registry is gone by then), their containers with the same
// attempt IDs do not meet, and one cell's Cleanup leaves the other's
// running container and its image; the cell's lease holds the image's
// layers when the image record goes.
func TestContainerdSharedNamespace(t *testing.T) {
	containerdtest.Require(t)
	ctx := t.Context()
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := images.PushAll(ctx, reg)
	if err != nil {
		_ = reg.Close()
		t.Fatalf("pushing test images: %v", err)
	}
	e := &sharedEnv{d: containerdtest.StartDaemon(t), ns: "kip-shared-" + containerdtest.Random(6)}
	e.nsCtx = namespaces.WithNamespace(ctx, e.ns)
	// The longest IDs kip makes: a cell ID of 46 characters, a container
	// name of 63.
	cellA, cellB := "kip-"+strings.Repeat("a", 36), "kip-"+strings.Repeat("b", 36)+"-r12345"
	longName := strings.Repeat("n", 63)
	a, b := e.runtime(t, cellA), e.runtime(t, cellB)

	imgA, err := a.EnsureImage(ctx, set.Busybox.Ref, runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatalf("cell A EnsureImage: %v", err)
	}
	unpacked := e.snapshots(t, snapshots.KindCommitted)
	if len(unpacked) == 0 {
		t.Fatal("no unpacked layer after cell A's pull")
	}
	// Nothing can be fetched any more.
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	imgB, err := b.EnsureImage(ctx, set.Busybox.Ref, runtime.PullIfNotPresent, nil)
	if err != nil {
		t.Fatalf("cell B EnsureImage with the registry gone: %v (the image was pulled again)", err)
	}
	if imgB.ID != imgA.ID {
		t.Errorf("cell B's image %s, cell A's %s", imgB.ID, imgA.ID)
	}
	if got := e.snapshots(t, snapshots.KindCommitted); len(got) != len(unpacked) {
		t.Errorf("committed snapshots after cell B's EnsureImage %v, want cell A's %v (unpacked again)", got, unpacked)
	}

	sleep := []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}
	start := func(rt *runtime.Containerd, name string, img runtime.Image) runtime.Task {
		t.Helper()
		task, err := rt.Start(ctx, runtime.ContainerSpec{ID: name + "-0", Name: name, Image: img, Args: sleep})
		if err != nil {
			t.Fatalf("Start %s: %v", name, err)
		}
		return task
	}
	// The same attempt IDs in both cells.
	taskA, longA := start(a, "app", imgA), start(a, longName, imgA)
	start(b, "app", imgB)
	start(b, longName, imgB)
	if taskA.ID() != "app-0" || longA.ID() != longName+"-0" {
		t.Errorf("task IDs %q, %q; want the attempt IDs the cell gave", taskA.ID(), longA.ID())
	}

	if err := b.Cleanup(ctx); err != nil {
		t.Fatalf("cell B Cleanup: %v", err)
	}
	if got := e.cellsOfContainers(t); strings.Join(got, " ") != cellA+" "+cellA {
		t.Errorf("containers of cells %q after cell B's Cleanup, want cell A's 2", got)
	}
	select {
	case <-taskA.Exited():
		t.Fatalf("cell A's container exited (%+v) with cell B's Cleanup", taskA.Status())
	default:
	}
	if e.hasLease(t, cellB) || !e.hasLease(t, cellA) {
		t.Errorf("after cell B's Cleanup: lease of cell B %t, of cell A %t; want only cell A's", e.hasLease(t, cellB), e.hasLease(t, cellA))
	}
	// Cell A still has its image, unpacked: another attempt starts
	// without the registry.
	if _, err := a.EnsureImage(ctx, set.Busybox.Ref, runtime.PullNever, nil); err != nil {
		t.Fatalf("cell A's image after cell B's Cleanup: %v", err)
	}
	again, err := a.Start(ctx, runtime.ContainerSpec{ID: "app-1", Name: "app", Image: imgA, Args: []string{"true"}})
	if err != nil {
		t.Fatalf("cell A's next attempt after cell B's Cleanup: %v", err)
	}
	<-again.Exited()
	if err := again.Delete(ctx); err != nil {
		t.Fatal(err)
	}

	// Cell A's agent restarts: a new runtime of the cell takes its
	// container over.
	a2 := e.runtime(t, cellA)
	re, err := a2.Reattach(ctx, runtime.ReattachSpec{ID: "app-0", StartedAt: taskA.StartedAt()})
	if err != nil {
		t.Fatalf("Reattach: %v", err)
	}
	if re.ID() != "app-0" || re.Pid() != taskA.Pid() {
		t.Errorf("reattached %s pid %d, want app-0 pid %d", re.ID(), re.Pid(), taskA.Pid())
	}

	// The image record gone (an operator's prune) and containerd's
	// garbage collection run: cell A's lease still holds the image's
	// unpacked layers.
	if err := e.d.Client.ImageService().Delete(e.nsCtx, imgA.Ref, ctrimages.SynchronousDelete()); err != nil {
		t.Fatal(err)
	}
	if got := e.snapshots(t, snapshots.KindCommitted); len(got) != len(unpacked) {
		t.Errorf("committed snapshots with cell A's lease and no image %v, want %v", got, unpacked)
	}

	if err := a2.Cleanup(ctx); err != nil {
		t.Fatalf("cell A Cleanup: %v", err)
	}
	e.checkEmpty(t, re)
}

// checkEmpty checks, after the Cleanup of the last cell, whose task was
// last, that nothing of the cells is left and that garbage collection
// takes the image no lease holds any more; then it removes the namespace.
func (e *sharedEnv) checkEmpty(t *testing.T, last runtime.Task) {
	t.Helper()
	select {
	case <-last.Exited():
	case <-time.After(10 * time.Second):
		t.Error("the last cell's container still runs after its Cleanup")
	}
	if got := e.cellsOfContainers(t); len(got) != 0 {
		t.Errorf("containers of cells %q after every Cleanup", got)
	}
	if left := e.snapshots(t, snapshots.KindActive); len(left) != 0 {
		t.Errorf("rootfs snapshots left after every Cleanup: %v", left)
	}
	e.collect(t)
	if got := e.snapshots(t, snapshots.KindCommitted); len(got) != 0 {
		t.Errorf("committed snapshots with no image and no lease: %v", got)
	}
	containerdtest.CleanupNamespace(t, e.d.Client, e.ns)
}

// TestContainerdImageViews: image volumes of two cells over one shared
// namespace (MountImage): cell A's view of the hello image (two layers:
// an overlay of lower directories) and cell B's of busybox (one layer: a
// bind) are mounted read-only where they asked, a second MountImage at
// the same place changes nothing, one
// cell's UnmountImage and Cleanup leave the other's view and its mount,
// which garbage collection does not take (the view is a root until it is
// removed), and the last cell's Cleanup removes a view its agent left
// mounted (an agent that died), after which collection takes the layers.
func TestContainerdImageViews(t *testing.T) {
	containerdtest.Require(t)
	ctx := t.Context()
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	set, err := images.PushAll(ctx, reg)
	if err != nil {
		t.Fatalf("pushing test images: %v", err)
	}
	e := &sharedEnv{d: containerdtest.StartDaemon(t), ns: "kip-views-" + containerdtest.Random(6)}
	e.nsCtx = namespaces.WithNamespace(ctx, e.ns)
	a, b := e.runtime(t, "kip-cell-a"), e.runtime(t, "kip-cell-b")
	dirA, dirB := filepath.Join(t.TempDir(), "a", "img"), filepath.Join(t.TempDir(), "b", "img")
	t.Cleanup(func() {
		_ = unix.Unmount(dirA, unix.MNT_DETACH)
		_ = unix.Unmount(dirB, unix.MNT_DETACH)
	})
	mountIn := func(rt *runtime.Containerd, ref, dir string) {
		t.Helper()
		img, err := rt.EnsureImage(ctx, ref, runtime.PullIfNotPresent, nil)
		if err != nil {
			t.Fatalf("EnsureImage: %v", err)
		}
		if err := rt.MountImage(ctx, img, dir); err != nil {
			t.Fatalf("MountImage at %s: %v", dir, err)
		}
	}
	mountIn(a, set.Hello.Ref, dirA)
	mountIn(b, set.Busybox.Ref, dirB)
	mountIn(a, set.Hello.Ref, dirA) // again: nothing new
	if got := e.snapshots(t, snapshots.KindView); len(got) != 2 {
		t.Errorf("views %v, want one per cell", got)
	}
	for _, program := range []string{filepath.Join(dirA, "app"), filepath.Join(dirB, "bin", "busybox")} {
		if info, err := os.Stat(program); err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("the image's program %s: %v, %v", program, info, err)
		}
	}
	for _, dir := range []string{dirA, dirB} {
		if err := os.WriteFile(filepath.Join(dir, "written"), nil, 0o600); !errors.Is(err, unix.EROFS) {
			t.Errorf("writing in the view at %s: %v, want EROFS", dir, err)
		}
	}

	if err := b.UnmountImage(ctx, dirB); err != nil {
		t.Fatalf("cell B UnmountImage: %v", err)
	}
	if err := b.Cleanup(ctx); err != nil {
		t.Fatalf("cell B Cleanup: %v", err)
	}
	if mounted, _ := mountinfo.Mounted(dirB); mounted {
		t.Error("cell B's view still mounted after UnmountImage")
	}
	e.collect(t)
	if got := e.snapshots(t, snapshots.KindView); len(got) != 1 {
		t.Errorf("views after cell B's release and a collection %v, want cell A's", got)
	}
	if _, err := os.Stat(filepath.Join(dirA, "etc", "passwd")); err != nil {
		t.Errorf("cell A's view after cell B's Cleanup: %v", err)
	}

	// Cell A's agent died with its view mounted: its next Cleanup removes
	// the view (the mount is the agent's, RemoveVolumes).
	if err := a.Cleanup(ctx); err != nil {
		t.Fatalf("cell A Cleanup: %v", err)
	}
	if got := e.snapshots(t, snapshots.KindView); len(got) != 0 {
		t.Errorf("views after every Cleanup: %v", got)
	}
	if err := unix.Unmount(dirA, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{set.Hello.Ref, set.Busybox.Ref} {
		if err := e.d.Client.ImageService().Delete(e.nsCtx, ref, ctrimages.SynchronousDelete()); err != nil {
			t.Fatal(err)
		}
	}
	e.collect(t)
	if got := e.snapshots(t, snapshots.KindCommitted); len(got) != 0 {
		t.Errorf("committed snapshots with no image, view or lease: %v", got)
	}
	containerdtest.CleanupNamespace(t, e.d.Client, e.ns)
}
