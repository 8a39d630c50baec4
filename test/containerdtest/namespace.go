package containerdtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/client"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
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

// SyncBuffer is a bytes.Buffer safe for a task's two copying goroutines
// (stdout and stderr) and the test reading it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
