package pod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/nfs"
)

// VolumeFiles are the files of a configMap, secret, downwardAPI or
// projected volume, resolved by the host: relative path → content and
// mode (default 0644).
type VolumeFiles struct {
	Files map[string][]byte
	Modes map[string]uint32
}

// volumes are the pod's volumes on the cell, under one directory (a
// subdirectory per volume). It is safe for concurrent use.
type volumes struct {
	dir string
	// noTmpfs is why a tmpfs the agent mounts would not be seen by the
	// runtime; nil when it would.
	noTmpfs error
	log     *slog.Logger

	mu     sync.Mutex
	gen    int64             // the generation last set up
	paths  map[string]string // volume name → host path to bind
	kinds  map[string]string // volume name → kind, for messages
	errs   map[string]error  // volume name → why it cannot be used
	tmpfs  map[string]bool   // volume dirs with a tmpfs mounted
	onDisk map[string]bool   // volumes meant for memory, told to be on disk
	owned  map[string]bool   // emptyDirs given to the pod's fsGroup

	// The pod's disks (disks.go): diskMu serializes their setup and
	// release, which may wait long and does not hold mu; disks (under mu)
	// are those set up, diskFailed when each that failed was last tried.
	diskMu     sync.Mutex
	disks      map[string]*diskState
	diskFailed map[string]time.Time
	// sysBlock and devDir are /sys/block and /dev; tests change them.
	sysBlock, devDir string
	// pathRoot is Config.DiskPathRoot.
	pathRoot string
	// nfs is Config.NFS; shares (under mu) are the NFS shares mounted, by
	// volume name: whether read-only.
	nfs    *nfs.Mounter
	shares map[string]bool
}

func newVolumes(dir string, noTmpfs error, pathRoot string, mounter *nfs.Mounter, log *slog.Logger) *volumes {
	return &volumes{dir: dir, noTmpfs: noTmpfs, log: log, paths: map[string]string{}, kinds: map[string]string{},
		errs: map[string]error{}, tmpfs: map[string]bool{}, onDisk: map[string]bool{}, owned: map[string]bool{},
		disks: map[string]*diskState{}, diskFailed: map[string]time.Time{}, sysBlock: "/sys/block", devDir: "/dev",
		pathRoot: pathRoot, nfs: mounter, shares: map[string]bool{}}
}

// ErrUnsupportedVolume marks a volume kind the cell cannot provide.
var ErrUnsupportedVolume = errors.New("volume kind not supported on kip cells")

// ReasonVolumeOnDisk is the Warning event of a volume the kubelet keeps in
// memory (secret, projected, emptyDir with medium Memory) that is on the
// cell's disk because the agent cannot mount a tmpfs the runtime sees.
const ReasonVolumeOnDisk = "VolumeOnDisk"

// sync sets up the volumes of d (once per generation): emptyDir and
// hostPath directories on first sight, and the files of configMap,
// secret, downwardAPI and projected volumes, swapped atomically when they
// change. Failures are kept per volume and reported by mounts. It returns
// a message for each volume meant for memory that is on disk instead, the
// first time it is.
func (v *volumes) sync(ctx context.Context, d *Desired) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d.Generation <= v.gen && v.gen != 0 {
		return nil
	}
	v.gen = d.Generation
	var fsGroup *int64
	if sc := d.Pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	var onDisk []string
	for i := range d.Pod.Spec.Volumes {
		vol := &d.Pod.Spec.Volumes[i]
		kind := volumeKind(vol)
		v.kinds[vol.Name] = kind
		if _, ok := shareOf(vol, d); ok {
			// Mounted by mountDisks with the disks, before any container.
			continue
		}
		if isClaimVolume(vol) {
			// The host's disk, set up by mountDisks, which may wait for it;
			// without one, the volume cannot be had.
			if _, ok := d.Disks[vol.Name]; !ok {
				v.errs[vol.Name] = fmt.Errorf("volume %q (%s): no disk attached for it: %w", vol.Name, kind, ErrUnsupportedVolume)
			}
			continue
		}
		if vol.Image != nil {
			continue // pulled and mounted by imagevolumes.go
		}
		path, diskWhy, err := v.setup(vol, kind, d.Volumes[vol.Name], fsGroup)
		if diskWhy != nil && !v.onDisk[vol.Name] {
			v.onDisk[vol.Name] = true
			v.log.WarnContext(ctx, "volume meant for memory is on disk", "volume", vol.Name, "kind", kind, "reason", diskWhy)
			onDisk = append(onDisk, fmt.Sprintf("volume %q (%s) is on the cell's disk, not in memory: %v", vol.Name, kind, diskWhy))
		}
		if err != nil {
			v.log.WarnContext(ctx, "setting up volume", "volume", vol.Name, "kind", kind, "error", err)
			v.errs[vol.Name] = fmt.Errorf("volume %q (%s): %w", vol.Name, kind, err)
			continue
		}
		delete(v.errs, vol.Name)
		v.paths[vol.Name] = path
	}
	return onDisk
}

// setup sets up one volume and returns the path to bind; diskWhy is set
// when a volume meant for memory is on disk, saying why. With an fsGroup,
// emptyDir, configMap, secret, downwardAPI and projected volumes belong
// to that group (setVolumeOwnership), as on a kubelet; hostPath volumes
// are left as they are.
func (v *volumes) setup(vol *corev1.Volume, kind string, files VolumeFiles, fsGroup *int64) (path string, diskWhy, err error) {
	src := &vol.VolumeSource
	if src.HostPath != nil {
		return src.HostPath.Path, nil, prepareHostPath(src.HostPath)
	}
	if v.dir == "" {
		return "", nil, errors.New("the agent has no volume directory")
	}
	dir := filepath.Join(v.dir, vol.Name)
	switch {
	case src.EmptyDir != nil:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", nil, fmt.Errorf("creating emptyDir: %w", err)
		}
		if src.EmptyDir.Medium == corev1.StorageMediumMemory {
			opts := "mode=0777"
			if l := src.EmptyDir.SizeLimit; l != nil && l.Value() > 0 {
				opts += ",size=" + strconv.FormatInt(l.Value(), 10)
			}
			diskWhy = v.mountTmpfs(dir, unix.MS_NOSUID|unix.MS_NODEV, opts)
			if errors.Is(diskWhy, errMountFailed) {
				return "", nil, diskWhy // asked for memory, and memory it must be
			}
		}
		mode := os.FileMode(0o777)
		if fsGroup != nil {
			mode |= os.ModeSetgid
		}
		if err := os.Chmod(dir, mode); err != nil { //nolint:gosec // G302: emptyDir is world-writable, as on a kubelet
			return "", diskWhy, fmt.Errorf("setting emptyDir mode: %w", err)
		}
		// The kubelet gives an emptyDir to the fsGroup once, when it sets
		// it up; later files are the containers' own.
		if fsGroup != nil && !v.owned[vol.Name] {
			if err := setVolumeOwnership(dir, *fsGroup, false); err != nil {
				return "", diskWhy, err
			}
			v.owned[vol.Name] = true
		}
		return dir, diskWhy, nil
	case src.ConfigMap != nil, src.Secret != nil, src.DownwardAPI != nil, src.Projected != nil:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("creating volume directory: %w", err)
		}
		// Secrets (and projections, which may hold tokens) stay off disk
		// where the runtime sees the agent's tmpfs; otherwise they are
		// on disk, where the container sees them.
		if src.Secret != nil || src.Projected != nil {
			diskWhy = v.mountTmpfs(dir, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755")
		}
		if _, err := writeAtomic(dir, files.Files, files.Modes, fsGroup); err != nil {
			return "", diskWhy, fmt.Errorf("writing files: %w", err)
		}
		return dir, diskWhy, nil
	}
	return "", nil, ErrUnsupportedVolume
}

// errMountFailed marks a tmpfs that could have been used but failed to
// mount.
var errMountFailed = errors.New("mounting a tmpfs failed")

// mountTmpfs mounts a tmpfs at dir unless one is there already. It
// returns why the volume is on disk instead: the runtime would not see the
// mount (v.noTmpfs), or the mount failed (errMountFailed).
func (v *volumes) mountTmpfs(dir string, flags uintptr, opts string) error {
	if v.tmpfs[dir] {
		return nil
	}
	if v.noTmpfs != nil {
		return v.noTmpfs
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("%w: %w", errMountFailed, err)
	}
	v.tmpfs[dir] = true
	return nil
}

// prepareHostPath checks or creates a hostPath per its type.
func prepareHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	info, statErr := os.Stat(hp.Path)
	is := func(want os.FileMode, what string) error {
		if statErr != nil {
			return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", hp.Path, what, statErr)
		}
		if info.Mode().Type() != want {
			return fmt.Errorf("hostPath type check failed: %s is not a %s", hp.Path, what)
		}
		return nil
	}
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if statErr != nil {
			if err := os.MkdirAll(hp.Path, 0o755); err != nil {
				return fmt.Errorf("creating hostPath directory: %w", err)
			}
			return nil
		}
		return is(os.ModeDir, "directory")
	case corev1.HostPathDirectory:
		return is(os.ModeDir, "directory")
	case corev1.HostPathFileOrCreate:
		if statErr != nil {
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644) //nolint:gosec // G302: hostPath FileOrCreate makes a 0644 file, as the kubelet does
			if err != nil {
				return fmt.Errorf("creating hostPath file: %w", err)
			}
			return f.Close()
		}
		return is(0, "file")
	case corev1.HostPathFile:
		return is(0, "file")
	case corev1.HostPathSocket:
		return is(os.ModeSocket, "socket")
	case corev1.HostPathCharDev:
		return is(os.ModeDevice|os.ModeCharDevice, "character device")
	case corev1.HostPathBlockDev:
		return is(os.ModeDevice, "block device")
	}
	return fmt.Errorf("unknown hostPath type %q", t)
}

// volumeKind is the name of the volume's source field ("emptyDir",
// "persistentVolumeClaim", ...).
func volumeKind(vol *corev1.Volume) string {
	rv := reflect.ValueOf(vol.VolumeSource)
	rt := rv.Type()
	for i := range rt.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return "unknown"
}

// fileVolume reports whether the kind holds host-resolved files, which
// containers always see read-only.
func fileVolume(src *corev1.VolumeSource) bool {
	return src.ConfigMap != nil || src.Secret != nil || src.DownwardAPI != nil || src.Projected != nil
}

// VolumeDirs returns the directories of the pod's volumes the agent made
// (emptyDir, configMap, secret, downwardAPI, projected, and the mounted
// disks of persistentVolumeClaim and ephemeral volumes), by volume name,
// for their usage figures. hostPath volumes are the cell's own directories
// and are left out, as the kubelet reports no usage of them.
func (m *Manager) VolumeDirs() map[string]string { return m.vols.dirs() }

func (v *volumes) dirs() map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]string, len(v.paths))
	for name, path := range v.paths {
		// An image volume is the image's, in the runtime's store, as on a
		// kubelet, which counts it in no pod's usage.
		if k := v.kinds[name]; k != "hostPath" && k != "image" {
			out[name] = path
		}
	}
	return out
}

// cleanup unmounts and removes every volume directory.
func (v *volumes) cleanup() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tmpfs = map[string]bool{}
	if v.dir == "" {
		return nil
	}
	return RemoveVolumes(v.dir)
}

// RemoveVolumes unmounts whatever is mounted under dir and removes it:
// the volumes of a deleted pod, or those an earlier agent left.
func RemoveVolumes(dir string) error {
	points := mountsUnder(dir)
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", points[i], err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing volumes: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points at or under dir, in mount order.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			out = append(out, f[1])
		}
	}
	return out
}

// restore takes over the volumes of d that an earlier agent set up
// (Restore): their directories and tmpfs mounts are there, with the files
// of the last generation it wrote, so nothing is written; volumes that
// are not there count as failed, as sync would leave them.
func (v *volumes) restore(d *Desired) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen = d.Generation
	mounted := map[string]bool{}
	if v.dir != "" {
		for _, p := range mountsUnder(v.dir) {
			mounted[p] = true
		}
	}
	for i := range d.Pod.Spec.Volumes {
		vol := &d.Pod.Spec.Volumes[i]
		kind := volumeKind(vol)
		v.kinds[vol.Name] = kind
		if hp := vol.HostPath; hp != nil {
			v.paths[vol.Name] = hp.Path
			continue
		}
		if sh, ok := shareOf(vol, d); ok {
			v.restoreShare(vol.Name, sh)
			continue
		}
		if isClaimVolume(vol) {
			v.restoreDisk(vol.Name, d.Disks)
			continue
		}
		if vol.Image != nil {
			continue // mounted again by imagevolumes.go (a mount there is kept)
		}
		switch {
		case vol.EmptyDir == nil && !fileVolume(&vol.VolumeSource):
			v.errs[vol.Name] = fmt.Errorf("volume %q (%s): %w", vol.Name, kind, ErrUnsupportedVolume)
			continue
		case v.dir == "":
			v.errs[vol.Name] = fmt.Errorf("volume %q (%s): the agent has no volume directory", vol.Name, kind)
			continue
		}
		dir := filepath.Join(v.dir, vol.Name)
		if _, err := os.Stat(dir); err != nil {
			v.errs[vol.Name] = fmt.Errorf("volume %q (%s): not found after the cell agent restarted: %w", vol.Name, kind, err)
			continue
		}
		v.paths[vol.Name] = dir
		v.tmpfs[dir] = mounted[dir]
		v.owned[vol.Name] = true
		// Told once already, by the earlier agent.
		v.onDisk[vol.Name] = true
	}
}

// Volume ownership masks of the kubelet (pkg/volume/volume_linux.go).
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

// setVolumeOwnership gives everything under dir to group fsGroup the way
// the kubelet does (SetVolumeOwnership, changeFilePermission): group
// fsGroup, group read and write (read only for a read-only volume:
// configMap, secret, downwardAPI, projected), and on directories group
// search and setgid, so that new files inherit the group. Symbolic links
// change group only. fsGroupChangePolicy does not apply: the kubelet
// reads it for persistent volumes only, and these volume kinds are
// always changed whole.
func setVolumeOwnership(dir string, fsGroup int64, readOnly bool) error {
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	// Within an os.Root, so that a link a container makes in an emptyDir
	// cannot lead the changes out of the volume.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("setting the volume's ownership to fsGroup %d: %w", fsGroup, err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := root.Lchown(path, -1, int(fsGroup)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		return root.Chmod(path, info.Mode()|m)
	})
	if err != nil {
		return fmt.Errorf("setting the volume's ownership to fsGroup %d: %w", fsGroup, err)
	}
	return nil
}
