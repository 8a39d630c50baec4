package pod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// This file gives the pod its disks: the persistent volumes the host
// attached to the instance (Desired.Disks), found, formatted when blank,
// mounted and handed to the containers as a CSI node plugin and the
// kubelet do on a node (NodeStageVolume, NodePublishVolume and
// k8s.io/mount-utils' SafeFormatAndMount), and unmounted before Delete
// returns, since the host detaches them right after.

// Disk is an attached disk of the pod (cell/api's Disk): how to find its
// device and how the pod uses it.
type Disk struct {
	// Serial is the device's serial (/sys/block/<dev>/serial or
	// device/serial): the first block device whose serial matches is the
	// disk's. EC2's NVMe serials are the volume ID without its dash.
	Serial string
	// Path is the device's path, used when no serial matches; symlinks
	// are followed.
	Path string
	// FSType is the filesystem: ext4 when empty.
	FSType string
	// ReadOnly mounts it read-only.
	ReadOnly bool
	// Block gives the device itself to the containers (volumeMode Block).
	Block bool
	// MountOptions are passed to mount.
	MountOptions []string
}

// DefaultDiskWait is how long the agent waits for an attached disk's
// device to appear (Config.DiskWait): a disk shows some seconds after the
// cloud attached it, and the kubelet waits two minutes for its volumes.
const DefaultDiskWait = 2 * time.Minute

// diskRelease bounds how long Delete waits for a disk to be free once its
// containers stopped: an unmount that finds it busy is retried, and the
// device must be held by nothing before the host may detach it. Tests
// shorten it.
var diskRelease = 30 * time.Second

// Reasons of the disks' events.
const (
	// ReasonFailedMount is the kubelet's Warning event of a volume that
	// could not be mounted: the device never appeared, could not be
	// formatted or mounted, or holds another filesystem.
	ReasonFailedMount = "FailedMount"
	// ReasonWaitingForDisk is a Warning event while an attached disk's
	// device has not appeared yet, once per disk.
	ReasonWaitingForDisk = "WaitingForDisk"
)

// diskWaitWarning is how long a disk may take to appear before the pod
// gets a WaitingForDisk event. Tests shorten it.
var diskWaitWarning = 10 * time.Second

// unformattedMarker is what diskFormat reports for a device that holds a
// partition table: mount-utils' "not blank, do not format".
const unformattedMarker = "unknown data, probably partitions"

// diskState is a disk the agent set up.
type diskState struct {
	// dev is the device node found for the disk, rdev its device number
	// (what mountinfo names its mounts by, even once the node is gone).
	dev  string
	rdev uint64
	// dir is where its filesystem is mounted; empty for a block volume.
	dir string
	// readOnly: mounted read-only, so bound read-only too.
	readOnly bool
}

// isClaimVolume reports whether vol is a disk's: a persistentVolumeClaim,
// or a generic ephemeral volume (whose claim is <pod>-<volume>).
func isClaimVolume(vol *corev1.Volume) bool {
	return vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil
}

// mountDisks sets up the pod's disks and NFS shares that are not yet:
// it finds each disk's device, waiting up to wait for it, formats a blank
// one and mounts it; it mounts each share (shares.go). A volume that
// fails is kept as the volume's error (so that no container starts) and
// reported, with a FailedMount event. With retry, only volumes that
// failed earlier are tried again, at most once per Backoff.Initial.
func (m *Manager) mountDisks(ctx context.Context, d *Desired, wait time.Duration, retry bool) {
	v := m.vols
	v.diskMu.Lock()
	defer v.diskMu.Unlock()
	var fsGroup *int64
	var policy *corev1.PodFSGroupChangePolicy
	if sc := d.Pod.Spec.SecurityContext; sc != nil {
		fsGroup, policy = sc.FSGroup, sc.FSGroupChangePolicy
	}
	for i := range d.Pod.Spec.Volumes {
		vol := &d.Pod.Spec.Volumes[i]
		share, isShare := shareOf(vol, d)
		disk, isDisk := d.Disks[vol.Name]
		if !isShare && (!isClaimVolume(vol) || !isDisk) {
			continue
		}
		v.mu.Lock()
		_, done := v.disks[vol.Name]
		_, mounted := v.shares[vol.Name]
		failedAt, failed := v.diskFailed[vol.Name]
		v.mu.Unlock()
		if done || mounted || (retry && (!failed || m.now().Sub(failedAt) < m.cfg.Backoff.Initial)) {
			continue
		}
		kind := volumeKind(vol)
		var (
			st    *diskState
			stage = "SetUp"
			err   error
		)
		if isShare {
			err = v.setupShare(ctx, vol.Name, share)
		} else {
			if pvc := vol.PersistentVolumeClaim; pvc != nil && pvc.ReadOnly {
				// The host folds it into the disk's; a pod's readOnly holds
				// whatever the host sent.
				disk.ReadOnly = true
			}
			st, stage, err = v.setupDisk(ctx, vol.Name, disk, wait, fsGroup, policy, func() {
				m.emit(EventWarning, ReasonWaitingForDisk, "", "Waiting for the disk of volume %q to appear on the instance (%s)", vol.Name, describeDisk(disk))
			})
		}
		v.mu.Lock()
		if err != nil {
			v.diskFailed[vol.Name] = m.now()
			v.errs[vol.Name] = fmt.Errorf("volume %q (%s): %w", vol.Name, kind, err)
			v.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			m.log.WarnContext(ctx, "setting up a volume", "volume", vol.Name, "kind", kind, "error", err)
			m.emit(EventWarning, ReasonFailedMount, "", "MountVolume.%s failed for volume %q : %v", stage, vol.Name, err)
			continue
		}
		delete(v.diskFailed, vol.Name)
		delete(v.errs, vol.Name)
		if isShare {
			v.shares[vol.Name] = share.ReadOnly
			v.paths[vol.Name] = filepath.Join(v.dir, vol.Name)
			v.mu.Unlock()
			m.log.InfoContext(ctx, "NFS share mounted", "volume", vol.Name, "share", share.String())
			continue
		}
		v.disks[vol.Name] = st
		if st.dir != "" {
			v.paths[vol.Name] = st.dir
		}
		v.mu.Unlock()
		m.log.InfoContext(ctx, "disk set up", "volume", vol.Name, "device", st.dev, "dir", st.dir, "block", disk.Block)
	}
}

// describeDisk names how a disk is found, for messages.
func describeDisk(d Disk) string {
	var parts []string
	if d.Serial != "" {
		parts = append(parts, "serial "+strconv.Quote(d.Serial))
	}
	if d.Path != "" {
		parts = append(parts, "path "+d.Path)
	}
	if len(parts) == 0 {
		return "no serial or path"
	}
	return strings.Join(parts, ", ")
}

// setupDisk finds the disk's device and, unless it is a block volume,
// formats it when blank and mounts it under the volume's directory, then
// gives it to fsGroup. stage names the kubelet's step that failed
// (WaitForAttach, MountDevice, SetUp). waiting is called once when the
// device has not appeared after diskWaitWarning. It does not hold v.mu.
func (v *volumes) setupDisk(ctx context.Context, name string, disk Disk, wait time.Duration, fsGroup *int64,
	policy *corev1.PodFSGroupChangePolicy, waiting func(),
) (st *diskState, stage string, err error) {
	if !disk.Block && v.noTmpfs != nil {
		return nil, "MountDevice", fmt.Errorf("the container runtime would not see the disk's mount: %w", v.noTmpfs)
	}
	if !disk.Block && v.dir == "" {
		return nil, "MountDevice", errors.New("the agent has no volume directory")
	}
	dev, err := waitForDevice(ctx, v.sysBlock, v.devDir, v.pathRoot, disk, wait, waiting)
	if err != nil {
		return nil, "WaitForAttach", err
	}
	rdev, err := deviceNumber(dev)
	if err != nil {
		return nil, "WaitForAttach", err
	}
	// A device the cell uses otherwise (its root disk, named by mistake)
	// is not the pod's.
	if err := notMountedOutside(dev, rdev, v.dir); err != nil {
		return nil, "MountDevice", err
	}
	st = &diskState{dev: dev, rdev: rdev, readOnly: disk.ReadOnly}
	if disk.Block {
		return st, "", nil
	}
	st.dir = filepath.Join(v.dir, name)
	if err := mountDisk(ctx, dev, rdev, st.dir, disk); err != nil {
		return nil, "MountDevice", err
	}
	if fsGroup != nil && !disk.ReadOnly {
		if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch && !ownershipMismatch(st.dir, *fsGroup) {
			return st, "", nil
		}
		if err := setVolumeOwnership(st.dir, *fsGroup, false); err != nil {
			return nil, "SetUp", err
		}
	}
	return st, "", nil
}

// ownershipMismatch reports whether the root of a volume at dir is not
// yet the fsGroup's as the kubelet leaves it (requiresPermissionChange):
// group fsGroup, group read, write and search, setgid. Under
// fsGroupChangePolicy OnRootMismatch only then is the volume changed.
func ownershipMismatch(dir string, fsGroup int64) bool {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup {
		return true
	}
	want := rwMask | execMask
	return info.Mode().Perm()&want != want || info.Mode()&os.ModeSetgid == 0
}

// waitForDevice finds the disk's device (findDevice), polling until it
// appears, wait passes or ctx ends.
func waitForDevice(ctx context.Context, sysBlock, devDir, pathRoot string, disk Disk, wait time.Duration, waiting func()) (string, error) {
	if disk.Serial == "" && disk.Path == "" {
		return "", errors.New("the host named no serial or path for the disk")
	}
	start := time.Now()
	warned := false
	for {
		dev, err := findDevice(sysBlock, devDir, pathRoot, disk)
		if err == nil {
			return dev, nil
		}
		if time.Since(start) >= wait {
			return "", fmt.Errorf("waiting for the disk's device (%s): not there after %s: %w", describeDisk(disk), wait.Round(time.Second), err)
		}
		if !warned && time.Since(start) >= diskWaitWarning && waiting != nil {
			warned = true
			waiting()
		}
		if !sleep(ctx, min(500*time.Millisecond, wait)) {
			return "", fmt.Errorf("waiting for the disk's device: %w", ctx.Err())
		}
	}
}

// errNoDevice marks a disk whose device is not (yet) there.
var errNoDevice = errors.New("no such device")

// findDevice returns the device node of disk: the first block device
// under sysBlock (/sys/block) whose serial (serial, or device/serial for
// NVMe) matches disk.Serial, else disk.Path with its symlinks resolved,
// which must be a block device. With a pathRoot (Config.DiskPathRoot)
// the path is looked up under it, and only there.
func findDevice(sysBlock, devDir, pathRoot string, disk Disk) (string, error) {
	if disk.Serial != "" {
		if dev := deviceBySerial(sysBlock, devDir, disk.Serial); dev != "" {
			return dev, nil
		}
	}
	if disk.Path == "" {
		return "", fmt.Errorf("no block device with serial %q: %w", disk.Serial, errNoDevice)
	}
	path := disk.Path
	if pathRoot != "" {
		// Cleaned as an absolute path first, so that no ".." leads out
		// of the root; a link in it may (to /dev/loopN).
		path = filepath.Join(pathRoot, filepath.Clean("/"+disk.Path))
	}
	dev, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", path, errNoDevice)
		}
		return "", fmt.Errorf("resolving %s: %w", path, err)
	}
	info, err := os.Stat(dev)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", dev, err)
	}
	if info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0 {
		return "", fmt.Errorf("%s is not a block device", dev)
	}
	return dev, nil
}

// deviceBySerial returns /dev/<name> of the first block device under
// sysBlock, in name order, whose serial matches serial; "" for none.
func deviceBySerial(sysBlock, devDir, serial string) string {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		for _, f := range []string{"serial", "device/serial"} {
			data, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), f)) //nolint:gosec // G304: sysfs
			if err == nil && serialMatches(string(data), serial) {
				// A block device's name in sysfs has "!" for a "/" of its
				// /dev path (cciss!c0d0).
				return filepath.Join(devDir, strings.ReplaceAll(e.Name(), "!", "/"))
			}
		}
	}
	return ""
}

// serialMatches compares a serial the kernel reports (padded with blanks)
// to the one the host sent, as the EBS CSI driver does: an EBS volume's
// NVMe serial is its ID without the dash ("vol0123…" for "vol-0123…"),
// so dashes do not count.
func serialMatches(got, want string) bool {
	norm := func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "-", "") }
	g := norm(got)
	return g != "" && g == norm(want)
}

// mountDisk formats dev (device number rdev) when blank and mounts it at
// dir, unless it is mounted there already (a retry, a restarted agent).
func mountDisk(ctx context.Context, dev string, rdev uint64, dir string, disk Disk) error {
	if slices.Contains(mountsOfDevice(rdev), dir) {
		return nil
	}
	fsType := disk.FSType
	if fsType == "" {
		fsType = "ext4"
	}
	if !validFSType(fsType) {
		return fmt.Errorf("invalid fsType %q", fsType)
	}
	// Read-only by the disk or by its mount options, as mount-utils reads
	// "ro" among them.
	readOnly := disk.ReadOnly || slices.Contains(disk.MountOptions, "ro")
	existing, err := diskFormat(ctx, dev)
	if err != nil {
		return err
	}
	format, err := formatDecision(existing, fsType, readOnly)
	if err != nil {
		return fmt.Errorf("device %s: %w", dev, err)
	}
	if format {
		if err := formatDisk(ctx, dev, fsType); err != nil {
			return err
		}
	} else if !readOnly {
		if err := checkFilesystem(ctx, dev, fsType); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating the mount point: %w", err)
	}
	opts := []string{"defaults"}
	if disk.ReadOnly {
		opts = append(opts, "ro")
	}
	opts = append(opts, disk.MountOptions...)
	args := []string{"-t", fsType, "-o", strings.Join(opts, ","), dev, dir}
	if out, err := exec.CommandContext(ctx, "mount", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mounting %s at %s (mount %s): %w: %s", dev, dir, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// formatDecision says whether a device whose content blkid reports as
// existing ("" for none) is formatted with fsType before it is mounted,
// or refused. A blank device is formatted unless it is to be mounted
// read-only (mount-utils' UnformattedReadOnly); one with a partition
// table or another filesystem is refused and never formatted.
func formatDecision(existing, fsType string, readOnly bool) (format bool, err error) {
	switch {
	case existing == "" && readOnly:
		return false, errors.New("cannot mount an unformatted disk read-only")
	case existing == "":
		return true, nil
	case existing == unformattedMarker:
		return false, errors.New("the disk holds a partition table and no filesystem: not formatting it")
	case existing != fsType:
		return false, fmt.Errorf("the disk's filesystem is %s, not %s as its volume asks: not formatting it", existing, fsType)
	}
	return false, nil
}

// diskFormat returns the filesystem on dev as blkid probes it, "" when
// there is none, or unformattedMarker for a partition table without one,
// as mount-utils' getDiskFormat.
func diskFormat(ctx context.Context, dev string) (string, error) {
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", dev).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		return "", nil // nothing found: blank
	}
	if err != nil {
		return "", fmt.Errorf("probing %s for a filesystem (blkid): %w: %s", dev, err, bytes.TrimSpace(out))
	}
	return parseBlkid(string(out))
}

// parseBlkid reads blkid's "-o export" output of TYPE and PTTYPE.
func parseBlkid(out string) (string, error) {
	var fsType, ptType string
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		k, val, ok := strings.Cut(l, "=")
		if !ok {
			return "", fmt.Errorf("reading blkid's output %q", out)
		}
		switch k {
		case "TYPE":
			fsType = val
		case "PTTYPE":
			ptType = val
		}
	}
	if ptType != "" && fsType == "" {
		return unformattedMarker, nil
	}
	return fsType, nil
}

// formatDisk makes a filesystem of fsType on the blank dev, with
// mount-utils' options (ext3 and ext4: -F -m0; xfs: -f).
func formatDisk(ctx context.Context, dev, fsType string) error {
	args := []string{dev}
	switch fsType {
	case "ext3", "ext4":
		args = []string{"-F", "-m0", dev}
	case "xfs":
		args = []string{"-f", dev}
	}
	if out, err := exec.CommandContext(ctx, "mkfs."+fsType, args...).CombinedOutput(); err != nil { //nolint:gosec // G204: the PV's fsType
		return fmt.Errorf("formatting %s as %s: %w: %s", dev, fsType, err, bytes.TrimSpace(out))
	}
	return nil
}

// checkFilesystem repairs what fsck may on an ext filesystem before it is
// mounted writable, as mount-utils' checkAndRepairFilesystem: exit code 1
// (errors corrected) is fine, 4 (errors left) fails.
func checkFilesystem(ctx context.Context, dev, fsType string) error {
	if !strings.HasPrefix(fsType, "ext") {
		return nil
	}
	out, err := exec.CommandContext(ctx, "fsck", "-a", dev).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 4:
		return fmt.Errorf("checking %s: fsck found errors it could not correct: %s", dev, bytes.TrimSpace(out))
	}
	// fsck itself failed (missing, another error): mount-utils goes on.
	return nil
}

// deviceNumber is the device number of the block device node dev.
func deviceNumber(dev string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return 0, fmt.Errorf("reading %s: %w", dev, err)
	}
	return st.Rdev, nil
}

// mountsOfDevice lists the mount points of the filesystem on device rdev
// in this mount namespace, in mount order (/proc/self/mountinfo).
func mountsOfDevice(rdev uint64) []string {
	infos, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return unix.Mkdev(uint32(i.Major), uint32(i.Minor)) != rdev, false //nolint:gosec // device numbers fit
	})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		out = append(out, i.Mountpoint)
	}
	return out
}

// releaseDisks unmounts every mount of the pod's disks' filesystems (the
// pinned subPaths, then the disks themselves), without MNT_DETACH, which
// would leave a busy filesystem on a device the host detaches next,
// retrying a busy one for up to diskRelease; then waits until nothing
// holds each device (an exclusive open succeeds). Block volumes only
// wait for the device to be free.
func (v *volumes) releaseDisks(ctx context.Context) error {
	v.diskMu.Lock()
	defer v.diskMu.Unlock()
	v.mu.Lock()
	disks := maps.Clone(v.disks)
	v.mu.Unlock()
	var errs []error
	for name, st := range disks {
		if err := releaseDisk(ctx, v.dir, st); err != nil {
			// Kept, so that a repeated Delete tries again.
			errs = append(errs, fmt.Errorf("releasing the disk of volume %q: %w", name, err))
			continue
		}
		v.mu.Lock()
		delete(v.disks, name)
		delete(v.paths, name)
		v.mu.Unlock()
	}
	return errors.Join(errs...)
}

// releaseDisk unmounts the disk's filesystem wherever it is mounted
// under dir (the volumes' directory) and waits until its device is free.
func releaseDisk(ctx context.Context, dir string, st *diskState) error {
	deadline := time.Now().Add(diskRelease)
	for {
		err := unmountDevice(st.rdev, dir)
		if err == nil {
			err = deviceFree(st.dev)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		}
	}
}

// unmountDevice unmounts every mount of the filesystem on rdev under
// dir, the last made first.
func unmountDevice(rdev uint64, dir string) error {
	points := mountsOfDevice(rdev)
	for i := len(points) - 1; i >= 0; i-- {
		if !within(points[i], dir) {
			continue
		}
		if err := unix.Unmount(points[i], 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmounting %s: %w", points[i], err)
		}
	}
	return nil
}

// deviceFree fails while something holds the block device dev: a
// filesystem mounted in any mount namespace, or another exclusive user.
// A device that is gone (its node, or the disk behind it) holds nothing.
func deviceFree(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the device %s is still in use: %w", dev, err)
	}
	return unix.Close(fd)
}

// within reports whether path is dir or under it.
func within(path, dir string) bool {
	return dir != "" && (path == dir || strings.HasPrefix(path, dir+"/"))
}

// notMountedOutside fails when the filesystem on dev (device number rdev)
// is mounted anywhere but under dir.
func notMountedOutside(dev string, rdev uint64, dir string) error {
	for _, p := range mountsOfDevice(rdev) {
		if !within(p, dir) {
			return fmt.Errorf("the device %s is mounted at %s, outside the pod's volumes", dev, p)
		}
	}
	return nil
}

// restoreDisk takes over the disk of volume name that an earlier agent
// mounted (Restore): the device whose filesystem is mounted at the
// volume's directory. A disk not mounted there is set up again by
// mountDisks.
func (v *volumes) restoreDisk(name string, disks map[string]Disk) {
	disk, ok := disks[name]
	if !ok {
		v.errs[name] = fmt.Errorf("volume %q: no disk attached for it: %w", name, ErrUnsupportedVolume)
		return
	}
	if disk.Block || v.dir == "" {
		return
	}
	dir := filepath.Join(v.dir, name)
	if dev, rdev, ok := mountSource(dir); ok {
		v.disks[name] = &diskState{dev: dev, rdev: rdev, dir: dir, readOnly: disk.ReadOnly}
		v.paths[name] = dir
	}
}

// mountSource is the source (a device path) and the device number of the
// mount at dir in this namespace, the last one made there; false when
// nothing is mounted there.
func mountSource(dir string) (src string, rdev uint64, ok bool) {
	infos, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) { return i.Mountpoint != dir, false })
	if err != nil || len(infos) == 0 {
		return "", 0, false
	}
	last := infos[len(infos)-1]
	return last.Source, unix.Mkdev(uint32(last.Major), uint32(last.Minor)), true //nolint:gosec // device numbers fit
}

// validFSType reports whether fsType names a filesystem (lowercase
// letters and digits: ext4, xfs, btrfs), so that mkfs.<fsType> is a
// program's name and not a path.
func validFSType(fsType string) bool {
	return fsType != "" && strings.IndexFunc(fsType, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) < 0
}
