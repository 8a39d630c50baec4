package containerdtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/kipcell/kip/test/syncbuf"
)

// CleanupNamespace deletes the images and the namespace ns, then the
// cgroup parents runc leaves behind (containerd.md section 4.8). Register
// it with t.Cleanup before the containers' own cleanups, which run first.
func CleanupNamespace(t testing.TB, c *client.Client, ns string) {
	ctx := namespaces.WithNamespace(context.Background(), ns) //nolint:usetesting // a Cleanup: t.Context() has ended
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		t.Errorf("listing images: %v", err)
	}
	for i, img := range imgs {
		var opts []ctrimages.DeleteOpt
		if i == len(imgs)-1 {
			opts = append(opts, ctrimages.SynchronousDelete())
		}
		if err := c.ImageService().Delete(ctx, img.Name, opts...); err != nil {
			t.Errorf("deleting image %s: %v", img.Name, err)
		}
	}
	if err := c.NamespaceService().Delete(ctx, ns); err != nil {
		t.Errorf("deleting namespace %s: %v", ns, err)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + ns)
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing cgroup %s: %v", d, err)
		}
	}
}

// Container is a container RunImage started.
type Container struct {
	Task client.Task
	// Exit receives the task's exit status.
	Exit <-chan client.ExitStatus
	// Output is its stdout and stderr together, so far.
	Output *syncbuf.Buffer
}

// RunImage pulls ref through resolver into ctx's namespace, creates the
// container id from it (the image's config, then opts) with runc on
// overlayfs, starts it, and deletes it and its snapshot when the test
// ends. The output is copied through FIFOs by this process, as kip-cell
// does: cio.LogFile has the shim write both streams into one file, and
// containerd's shim then loses a stream now and then ("error copying
// stderr") after a fast exit.
func (d *Daemon) RunImage(ctx context.Context, t testing.TB, resolver remotes.Resolver, ref, id string, opts ...oci.SpecOpts) Container {
	t.Helper()
	c := d.Client
	img, err := c.Pull(ctx, ref, client.WithPullUnpack, client.WithPullSnapshotter("overlayfs"), client.WithResolver(resolver))
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	ctr, err := c.NewContainer(ctx, id,
		client.WithImage(img),
		client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(id+"-rootfs", img),
		client.WithRuntime("io.containerd.runc.v2", &options.Options{Root: d.RuncRoot}),
		client.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(img)}, opts...)...),
	)
	if err != nil {
		t.Fatalf("creating container %s: %v", id, err)
	}
	out := &syncbuf.Buffer{}
	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
	if err != nil {
		_ = ctr.Delete(ctx, client.WithSnapshotCleanup)
		t.Fatalf("creating task %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx) // the test's context may have ended
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil {
			t.Errorf("deleting task %s: %v", id, err)
		}
		if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			t.Errorf("deleting container %s: %v", id, err)
		}
	})
	exitCh, err := task.Wait(ctx) // before Start, or a fast exit is missed
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("starting %s: %v", id, err)
	}
	return Container{Task: task, Exit: exitCh, Output: out}
}
