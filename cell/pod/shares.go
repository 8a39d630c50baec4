package pod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/nfs"
)

// This file gives the pod its NFS shares: its inline nfs volumes and the
// claims the host resolved to NFS shares (Desired.Shares), mounted under
// the volume's directory by Config.NFS (cell/nfs) before any container
// starts, as the kubelet's nfs plugin mounts them in SetUp, and bound
// into the containers per their volumeMounts like any volume. They are
// unmounted with the other volumes when the pod is deleted (cleanup).

// Share is an NFS share of the pod (cell/api's Share).
type Share = nfs.Share

// shareOf answers the NFS share of vol: its inline nfs source, or the
// share the host resolved for its claim.
func shareOf(vol *corev1.Volume, d *Desired) (Share, bool) {
	if n := vol.NFS; n != nil {
		return Share{Server: n.Server, Path: n.Path, ReadOnly: n.ReadOnly}, true
	}
	if !isClaimVolume(vol) {
		return Share{}, false
	}
	sh, ok := d.Shares[vol.Name]
	if ok && vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly {
		sh.ReadOnly = true
	}
	return sh, ok
}

// setupShare mounts the share on the volume's directory. It does not
// hold v.mu.
func (v *volumes) setupShare(ctx context.Context, name string, sh Share) error {
	if v.nfs == nil {
		return errors.New("this cell's agent mounts no NFS shares")
	}
	if v.noTmpfs != nil {
		return fmt.Errorf("the container runtime would not see the share's mount: %w", v.noTmpfs)
	}
	if v.dir == "" {
		return errors.New("the agent has no volume directory")
	}
	dir := filepath.Join(v.dir, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating the volume's directory: %w", err)
	}
	if _, _, mounted := mountSource(dir); mounted {
		// An earlier try that outlived its context finished after all.
		return nil
	}
	return v.nfs.Mount(ctx, sh, dir)
}

// restoreShare takes over a share an earlier agent mounted; one that is
// not mounted is mounted again by mountDisks.
func (v *volumes) restoreShare(name string, sh Share) {
	if v.dir == "" {
		return
	}
	dir := filepath.Join(v.dir, name)
	if _, _, ok := mountSource(dir); ok {
		v.shares[name] = sh.ReadOnly
		v.paths[name] = dir
	}
}
