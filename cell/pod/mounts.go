package pod

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/expansion"
	"github.com/kipcell/kip/cell/runtime"
)

// mounts resolves a container's volumeMounts into bind mounts. It fails,
// naming the volume, when a volume of the pod could not be set up (the
// kubelet starts no container of a pod whose volumes do not mount) or a
// subPath is invalid. vars expands subPathExpr.
func (v *volumes) mounts(p *corev1.Pod, c *corev1.Container, vars map[string]string) ([]runtime.Mount, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	byName := map[string]*corev1.Volume{}
	for i := range p.Spec.Volumes {
		vol := &p.Spec.Volumes[i]
		byName[vol.Name] = vol
		if err := v.errs[vol.Name]; err != nil {
			return nil, err
		}
	}
	var out []runtime.Mount
	for i, vm := range c.VolumeMounts {
		vol, ok := byName[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of mount %s is not a volume of the pod", vm.Name, vm.MountPath)
		}
		if st := v.disks[vm.Name]; st != nil && st.dir == "" {
			return nil, fmt.Errorf("volume %q has volumeMode Block, but is specified in volumeMounts", vm.Name)
		}
		base, ok := v.paths[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q (%s) is not set up yet", vm.Name, volumeKind(vol))
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expansion.Expand(vm.SubPathExpr, vars)
		}
		// Pinned where the runtime sees the agent's mounts, as it sees
		// its tmpfs volumes (see subPathSource).
		pin := ""
		if v.dir != "" && v.noTmpfs == nil {
			pin = filepath.Join(v.dir, subPathsDir, c.Name, strconv.Itoa(i))
		}
		src, err := subPathSource(vol, base, sub, pin)
		if err == nil && vol.Image != nil && sub != "" {
			err = imageSubPath(src, sub)
		} else if err != nil && vol.Image != nil {
			err = createContainerError{err}
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q (%s) at %s: %w", vm.Name, volumeKind(vol), vm.MountPath, err)
		}
		// An image volume is read-only whatever the mount says, as the
		// kubelet's image volume mounter is; a share mounted read-only is too.
		readOnly := vm.ReadOnly || fileVolume(&vol.VolumeSource) || vol.Image != nil || v.shares[vm.Name]
		if st := v.disks[vm.Name]; st != nil && st.readOnly {
			readOnly = true
		}
		out = append(out, runtime.Mount{Source: src, Destination: vm.MountPath, ReadOnly: readOnly})
	}
	return out, nil
}

// devices resolves a container's volumeDevices into the device nodes of
// the pod's block volumes (volumeMode Block disks), as the kubelet hands
// a CRI runtime their devices. A volume that is not a block disk of the
// pod fails, with the kubelet's message for a filesystem volume.
func (v *volumes) devices(p *corev1.Pod, c *corev1.Container) ([]runtime.Device, error) {
	if len(c.VolumeDevices) == 0 {
		return nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []runtime.Device
	for _, vd := range c.VolumeDevices {
		st := v.disks[vd.Name]
		switch {
		case st == nil && slices.ContainsFunc(p.Spec.Volumes, func(vol corev1.Volume) bool { return vol.Name == vd.Name && isClaimVolume(&vol) }):
			return nil, fmt.Errorf("volume %q of device %s is not set up yet", vd.Name, vd.DevicePath)
		case st == nil:
			return nil, fmt.Errorf("volume %q of device %s is not a block volume of the pod", vd.Name, vd.DevicePath)
		case st.dir != "":
			return nil, fmt.Errorf("volume %q has volumeMode Filesystem, but is specified in volumeDevices", vd.Name)
		}
		out = append(out, runtime.Device{Source: st.dev, Destination: vd.DevicePath, ReadOnly: st.readOnly})
	}
	return out, nil
}

// subPathSource returns what to bind for sub within a volume at base: base
// itself, or what sub names below it, symlinks followed while they stay
// inside (a subPath of a file volume then sees the file of the moment, as
// on a kubelet). It must stay inside the volume; in an emptyDir or
// hostPath directory a missing subPath is created as a directory, without
// following a symlink out. With pin (the agent's own path for this
// mount), what sub names is opened and bind-mounted there (pinSubPath),
// and pin is what the runtime binds: a container cannot redirect it by a
// symlink swap between this check and runc's mount. Without (the runtime
// would not see the agent's mounts, runtime.MountsShared), the checked
// path is returned, as before, and such a swap could redirect it.
func subPathSource(vol *corev1.Volume, base, sub, pin string) (string, error) {
	if sub == "" {
		return base, nil
	}
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("subPath %q must be relative", sub)
	}
	for _, part := range strings.Split(filepath.ToSlash(sub), "/") {
		if part == ".." {
			return "", fmt.Errorf("subPath %q must not contain '..'", sub)
		}
	}
	if vol.EmptyDir != nil || vol.HostPath != nil {
		if err := makeSubPathDir(base, sub, 0o755); err != nil {
			return "", err
		}
	}
	if isClaimVolume(vol) {
		// As the kubelet's makeMounts: with the mode of the volume's
		// root, so that a subPath of a disk given to an fsGroup is the
		// group's to write.
		info, err := os.Stat(base)
		if err != nil {
			return "", fmt.Errorf("reading the volume: %w", err)
		}
		if err := makeSubPathDir(base, sub, info.Mode()&(os.ModePerm|os.ModeSetgid)); err != nil {
			return "", err
		}
	}
	if pin != "" {
		return pinSubPath(base, sub, pin)
	}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", fmt.Errorf("resolving volume path: %w", err)
	}
	realSrc, err := filepath.EvalSymlinks(filepath.Join(base, sub))
	if err != nil {
		return "", fmt.Errorf("resolving subPath %q: %w", sub, err)
	}
	if realSrc != realBase && !strings.HasPrefix(realSrc, realBase+string(filepath.Separator)) {
		return "", fmt.Errorf("subPath %q %w", sub, errLeavesVolume)
	}
	return realSrc, nil
}
