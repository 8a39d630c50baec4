package kubeletnode

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kipcell/kip/test/images"
)

// SandboxImage is the name of the pod sandbox ("pause") image the node's
// containerd holds: busybox sleeping, imported at start, never pulled.
// CRI stops a sandbox with SIGKILL and gives it a PID namespace of its own,
// so sleep is all a pause process has to do here.
const SandboxImage = "kip.local/kubeletnode/pause:v1"

// criNamespace is the containerd namespace of CRI's images and containers.
const criNamespace = "k8s.io"

// containerdUp reports whether the containerd at socket answers.
func containerdUp(ctx context.Context, socket string) bool {
	c, err := client.New(socket, client.WithTimeout(200*time.Millisecond))
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c.Version(ctx)
	return err == nil
}

// importSandboxImage imports SandboxImage into the containerd at socket
// and unpacks it, so that CRI finds it without a pull.
func importSandboxImage(ctx context.Context, socket string) error {
	bb, err := images.Busybox()
	if err != nil {
		return fmt.Errorf("building the sandbox image: %w", err)
	}
	cf, err := bb.ConfigFile()
	if err != nil {
		return fmt.Errorf("reading the busybox config: %w", err)
	}
	cfg := cf.Config
	cfg.Entrypoint, cfg.Cmd = []string{"/bin/sleep", "2147483647"}, nil
	pause, err := mutate.Config(bb, cfg)
	if err != nil {
		return fmt.Errorf("building the sandbox image: %w", err)
	}
	tag, err := name.NewTag(SandboxImage)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", SandboxImage, err)
	}
	c, err := client.New(socket, client.WithTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("connecting to the node's containerd: %w", err)
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, criNamespace)
	r, w := io.Pipe()
	go func() { w.CloseWithError(tarball.Write(tag, pause, w)) }()
	imported, err := c.Import(ctx, r)
	_ = r.Close()
	if err != nil {
		return fmt.Errorf("importing the sandbox image: %w", err)
	}
	for _, img := range imported {
		if err := client.NewImage(c, img).Unpack(ctx, "overlayfs"); err != nil {
			return fmt.Errorf("unpacking the sandbox image %s: %w", img.Name, err)
		}
	}
	return nil
}
