package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/image-spec/identity"
	"golang.org/x/sys/unix"
)

// ImageViewLabel marks the snapshots MountImage makes (read-only views of
// an image's root filesystem, the pod's image volumes); its value is the
// view's key. Cleanup removes every snapshot that carries it.
const ImageViewLabel = "kipcell.io/image-view"

// gcRootLabel keeps a snapshot from containerd's garbage collection, which
// takes any snapshot that no container, lease, image or root label
// references (core/metadata/gc.go): the view lives as long as its mount,
// and UnmountImage or Cleanup removes it.
const gcRootLabel = "containerd.io/gc.root"

// imageViewKey is the snapshot key of the view mounted at target: one per
// mount point, so that two image volumes of one image have two views, and
// in a shared namespace one per cell.
func (r *Containerd) imageViewKey(target string) string {
	sum := sha256.Sum256([]byte(target))
	key := "kip-image-view-" + hex.EncodeToString(sum[:12])
	if r.shared() {
		key = r.cfg.Cell + "." + key
	}
	return key
}

// MountImage implements Runtime, as containerd's CRI plugin mounts an
// image volume (internal/cri/server/container_image_mount.go): the image
// unpacked into the snapshotter, a snapshot of its root filesystem (here a
// View, which the snapshotter makes read-only: a read-only bind of a one
// layer image, an overlay of lower directories only for more) mounted at
// target by this process. Only a runtime that sees this process's mounts
// (MountsShared) can bind it into a container.
func (r *Containerd) MountImage(ctx context.Context, img Image, target string) error {
	ctx = r.ctx(ctx)
	if mounted, err := mountinfo.Mounted(target); err == nil && mounted {
		return nil // an earlier call's, or an earlier agent's
	}
	ctx, err := r.holdImages(ctx)
	if err != nil {
		return err
	}
	ci, err := r.c.GetImage(ctx, img.Ref)
	if err != nil {
		return fmt.Errorf("loading image %s: %w", img.Ref, err)
	}
	// Pulled unpacked by EnsureImage; an image another cell of a shared
	// namespace found present may not be.
	if err := ci.Unpack(ctx, Snapshotter); err != nil {
		return fmt.Errorf("unpacking image %s: %w", img.Ref, err)
	}
	diffIDs, err := ci.RootFS(ctx)
	if err != nil {
		return fmt.Errorf("reading the layers of image %s: %w", img.Ref, err)
	}
	key := r.imageViewKey(target)
	labels := map[string]string{ImageViewLabel: key, gcRootLabel: time.Now().UTC().Format(time.RFC3339)}
	if r.shared() {
		labels[CellLabel] = r.cfg.Cell
	}
	sn := r.c.SnapshotService(Snapshotter)
	mounts, err := sn.View(ctx, key, identity.ChainID(diffIDs).String(), snapshots.WithLabels(labels))
	if errdefs.IsAlreadyExists(err) {
		mounts, err = sn.Mounts(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("making a view of image %s: %w", img.Ref, err)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("making the mount point of image %s: %w", img.Ref, err)
	}
	if err := mount.All(mounts, target); err != nil {
		_ = mount.UnmountAll(target, unix.MNT_DETACH)
		return fmt.Errorf("mounting image %s at %s: %w", img.Ref, target, err)
	}
	r.log.DebugContext(ctx, "mounted image", "image", img.Ref, "target", target, "snapshot", key)
	return nil
}

// UnmountImage implements Runtime. The mount is detached (MNT_DETACH): a
// subPath of the volume bound elsewhere keeps what it shows until it is
// unmounted itself.
func (r *Containerd) UnmountImage(ctx context.Context, target string) error {
	ctx = r.ctx(ctx)
	if err := mount.UnmountAll(target, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting image at %s: %w", target, err)
	}
	key := r.imageViewKey(target)
	if err := r.c.SnapshotService(Snapshotter).Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing the image view %s: %w", key, err)
	}
	return nil
}

// removeImageViews removes the image views left in the namespace (their
// mounts are the agent's to undo: RemoveVolumes); ctx carries the
// namespace.
func (r *Containerd) removeImageViews(ctx context.Context) error {
	sn := r.c.SnapshotService(Snapshotter)
	var keys []string
	filter := "labels." + strconv.Quote(ImageViewLabel)
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		keys = append(keys, info.Name)
		return nil
	}, filter); err != nil {
		return fmt.Errorf("listing image views: %w", err)
	}
	var errs []error
	for _, key := range keys {
		if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing image view %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}
