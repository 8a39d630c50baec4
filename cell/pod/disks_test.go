package pod

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/cell/api/logs"
)

// fakeSysBlock makes a /sys/block tree: device name → serial file
// (relative to the device's directory) → content.
func fakeSysBlock(t *testing.T, devs map[string]map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, files := range devs {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, content := range files {
			p := filepath.Join(dir, name, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func TestDeviceBySerial(t *testing.T) {
	sys := fakeSysBlock(t, map[string]map[string]string{
		"loop0":      {},
		"nvme0n1":    {"device/serial": "AWS1234567890ABCDEF0\n"},
		"nvme1n1":    {"device/serial": "vol0123456789abcdef0    \n"},
		"nvme2n1":    {"device/serial": "vol0fedcba9876543210\n"},
		"vda":        {"serial": "root-disk\n"},
		"vdb":        {"serial": "data-disk\n"},
		"cciss!c0d0": {"serial": "cciss-1\n"},
	})
	tests := []struct {
		name, serial, want string
	}{
		{"an EBS volume ID, dash and all", "vol-0123456789abcdef0", "/dev/nvme1n1"},
		{"an EBS NVMe serial as the plugin gives it", "vol0fedcba9876543210", "/dev/nvme2n1"},
		{"a virtio serial", "data-disk", "/dev/vdb"},
		{"a name with a slash in /dev", "cciss-1", "/dev/cciss/c0d0"},
		{"no device has it", "vol-0000", ""},
		{"a prefix is not a match", "vol0123", ""},
		{"blanks are no serial", "   ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deviceBySerial(sys, "/dev", tt.serial); got != tt.want {
				t.Errorf("deviceBySerial(%q) = %q, want %q", tt.serial, got, tt.want)
			}
		})
	}
}

func TestFindDevice(t *testing.T) {
	dir := t.TempDir()
	// A block device node of its own (never opened): loop minor 250.
	blk := filepath.Join(dir, "blk")
	if err := unix.Mknod(blk, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 250))); err != nil {
		t.Skipf("cannot make a device node: %v", err)
	}
	link := filepath.Join(dir, "by-id", "disk-1")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../blk", link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Two instances' path roots (DiskPathRoot), as the simulators' local
	// cells have them: the same cloud path, a link to another device in
	// each; the second has no such link.
	root, other := t.TempDir(), t.TempDir()
	const cloudPath = "/dev/disk/azure/scsi1/lun0"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(cloudPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(blk, filepath.Join(root, cloudPath)); err != nil {
		t.Fatal(err)
	}
	sys := fakeSysBlock(t, map[string]map[string]string{"vdb": {"serial": "s-1"}})
	tests := []struct {
		name     string
		pathRoot string
		disk     Disk
		want     string
		wantErr  string
		missing  bool
	}{
		{"the serial first", "", Disk{Serial: "s-1", Path: link}, "/dev/vdb", "", false},
		{"the path when no serial matches", "", Disk{Serial: "other", Path: link}, blk, "", false},
		{"a symlinked path resolved", "", Disk{Path: link}, blk, "", false},
		{"a path not there yet", "", Disk{Path: filepath.Join(dir, "absent")}, "", "absent", true},
		{"a serial alone, not there yet", "", Disk{Serial: "s-2"}, "", `serial "s-2"`, true},
		{"a path that is no block device", "", Disk{Path: file}, "", "not a block device", false},
		{"a path under the path root, linked out of it", root, Disk{Path: cloudPath}, blk, "", false},
		{"the serial first, path root or not", root, Disk{Serial: "s-1", Path: cloudPath}, "/dev/vdb", "", false},
		{"another path root: not there", other, Disk{Path: cloudPath}, "", filepath.Join(other, cloudPath), true},
		{"with a path root, a path of the machine is not looked at", other, Disk{Path: link}, "", filepath.Join(other, link), true},
		{"no way out of the path root", other, Disk{Path: "/../.." + link}, "", filepath.Join(other, link), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findDevice(sys, "/dev", tt.pathRoot, tt.disk)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("findDevice(%+v) = %q, %v; want %q", tt.disk, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, errNoDevice) != tt.missing {
				t.Errorf("findDevice(%+v) = %q, %v; want an error with %q (missing: %v)", tt.disk, got, err, tt.wantErr, tt.missing)
			}
		})
	}
}

func TestWaitForDeviceGivesUp(t *testing.T) {
	start := time.Now()
	_, err := waitForDevice(t.Context(), t.TempDir(), "/dev", "", Disk{Path: "/dev/kip-test-absent"}, 300*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "not there after") {
		t.Errorf("waitForDevice = %v, want a timeout", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("waitForDevice gave up after %s, want about 300ms", d)
	}
	if _, err := waitForDevice(t.Context(), t.TempDir(), "/dev", "", Disk{}, time.Second, nil); err == nil {
		t.Error("a disk without serial or path was looked for")
	}
}

func TestFormatDecision(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		fsType   string
		readOnly bool
		format   bool
		wantErr  string
	}{
		{"blank: formatted", "", "ext4", false, true, ""},
		{"its filesystem: mounted as it is", "ext4", "ext4", false, false, ""},
		{"its filesystem read-only", "xfs", "xfs", true, false, ""},
		{"blank but read-only: refused", "", "ext4", true, false, "unformatted disk read-only"},
		{"another filesystem: refused", "xfs", "ext4", false, false, "filesystem is xfs, not ext4"},
		{"a partition table: refused", unformattedMarker, "ext4", false, false, "partition table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			format, err := formatDecision(tt.existing, tt.fsType, tt.readOnly)
			if format != tt.format {
				t.Errorf("format = %v, want %v", format, tt.format)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseBlkid(t *testing.T) {
	tests := []struct {
		name, out, want string
		wantErr         bool
	}{
		{"a filesystem", "TYPE=ext4\n", "ext4", false},
		{"a partition table", "PTTYPE=gpt\n", unformattedMarker, false},
		{"a filesystem on the whole device beside a table", "TYPE=vfat\nPTTYPE=dos\n", "vfat", false},
		{"nothing", "", "", false},
		{"garbage", "what\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBlkid(tt.out)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("parseBlkid(%q) = %q, %v; want %q (error: %v)", tt.out, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestOwnershipMismatch(t *testing.T) {
	tests := []struct {
		name     string
		gid      int
		mode     os.FileMode
		mismatch bool
	}{
		{"the group's, setgid, rwx", 1234, 0o770 | os.ModeSetgid, false},
		{"more than asked", 1234, 0o775 | os.ModeSetgid, false},
		{"another group", 0, 0o770 | os.ModeSetgid, true},
		{"no setgid", 1234, 0o770, true},
		{"no group write", 1234, 0o750 | os.ModeSetgid, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chown(dir, -1, tt.gid); err != nil {
				t.Skipf("chown: %v", err)
			}
			if err := os.Chmod(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			if got := ownershipMismatch(dir, 1234); got != tt.mismatch {
				t.Errorf("ownershipMismatch = %v, want %v", got, tt.mismatch)
			}
		})
	}
}

// TestDiskNeverAppears: a disk whose device does not appear gets a
// WaitingForDisk event while the pod waits for it, then keeps every
// container Waiting CreateContainerConfigError naming the volume, with
// a FailedMount event, and nothing starts.
func TestDiskNeverAppears(t *testing.T) {
	old := diskWaitWarning
	diskWaitWarning = 100 * time.Millisecond
	t.Cleanup(func() { diskWaitWarning = old })
	rt := newFakeRuntime()
	m := New(Config{
		Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", HostIP: "10.0.0.7", NetNSPath: "/var/run/netns/test",
		Backoff: testBackoff, VolumesDir: t.TempDir(), DiskWait: 600 * time.Millisecond,
	})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	_, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, Disks: map[string]Disk{"data": {Path: "/dev/kip-test-absent"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "CreateContainerConfigError naming the volume", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `volume "data" (persistentVolumeClaim)`) &&
			strings.Contains(w.Message, "/dev/kip-test-absent")
	})
	var waited, failed bool
	for _, e := range m.Events() {
		waited = waited || (e.Type == EventWarning && e.Reason == ReasonWaitingForDisk && strings.Contains(e.Message, `volume "data"`) &&
			strings.Contains(e.Message, "path /dev/kip-test-absent"))
		failed = failed || (e.Type == EventWarning && e.Reason == ReasonFailedMount && strings.Contains(e.Message, `MountVolume.WaitForAttach failed for volume "data"`))
	}
	if !waited || !failed {
		t.Errorf("events %+v, want a WaitingForDisk and a FailedMount warning", m.Events())
	}
	if got := rt.startedNames(); len(got) > 0 {
		t.Errorf("started %v without the pod's disk", got)
	}
	deletePod(t, m, 0)
}

// TestClaimWithoutDisk: a claim volume the host sent no disk for stays
// unsupported, as before disks.
func TestClaimWithoutDisk(t *testing.T) {
	v := newVolumes(t.TempDir(), nil, "", nil, slog.New(slog.DiscardHandler))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
	}}}
	v.sync(t.Context(), &Desired{Generation: 1, Pod: p})
	_, err := v.mounts(p, &corev1.Container{Name: "c"}, nil)
	if !errors.Is(err, ErrUnsupportedVolume) || !strings.Contains(err.Error(), `volume "scratch" (ephemeral): no disk attached`) {
		t.Errorf("mounts = %v, want the volume unsupported without a disk", err)
	}
}

// TestVolumeModeMismatch: a block disk in volumeMounts, or a filesystem
// one in volumeDevices, is refused with the kubelet's messages.
func TestVolumeModeMismatch(t *testing.T) {
	v := newVolumes(t.TempDir(), nil, "", nil, slog.New(slog.DiscardHandler))
	v.disks["raw"] = &diskState{dev: "/dev/xvdf"}
	v.disks["fs"] = &diskState{dev: "/dev/xvdg", dir: "/v/fs"}
	v.paths["fs"] = "/v/fs"
	claim := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}
	p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "raw", VolumeSource: claim}, {Name: "fs", VolumeSource: claim}}}}
	if _, err := v.mounts(p, &corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "raw", MountPath: "/raw"}}}, nil); err == nil ||
		!strings.Contains(err.Error(), `volume "raw" has volumeMode Block, but is specified in volumeMounts`) {
		t.Errorf("block volume mounted: %v", err)
	}
	if _, err := v.devices(p, &corev1.Container{VolumeDevices: []corev1.VolumeDevice{{Name: "fs", DevicePath: "/dev/fs"}}}); err == nil ||
		!strings.Contains(err.Error(), `volume "fs" has volumeMode Filesystem, but is specified in volumeDevices`) {
		t.Errorf("filesystem volume as a device: %v", err)
	}
	got, err := v.devices(p, &corev1.Container{VolumeDevices: []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/raw"}}})
	if err != nil || len(got) != 1 || got[0].Source != "/dev/xvdf" || got[0].Destination != "/dev/raw" {
		t.Errorf("devices = %+v, %v", got, err)
	}
}

// testLoopDisk is a blank disk of size bytes: a sparse file behind a loop
// device the test made, detached at its end.
func testLoopDisk(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("cannot make a loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		//nolint:usetesting // a Cleanup: t.Context() has ended
		if out, err := exec.CommandContext(context.Background(), "losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// TestDiskMountedAndReleased: with a real loop device and the fake
// runtime, the manager formats the blank disk, mounts it at the volume's
// directory before the container starts and binds it (and a subPath of
// it, made with the root's mode); Delete leaves it mounted nowhere and
// free. A later pod's manager mounts the same disk without formatting it
// again: what the first wrote is there.
func TestDiskMountedAndReleased(t *testing.T) {
	dev := testLoopDisk(t, 32<<20)
	rdev, err := deviceNumber(dev)
	if err != nil {
		t.Fatal(err)
	}
	fsGroup := int64(3000)
	pod := func(uid string) *corev1.Pod {
		p := testPod(corev1.RestartPolicyAlways, "app")
		p.UID = types.UID(uid)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &fsGroup}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
		}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/logs", SubPath: "logs"}}
		return p
	}
	start := func(uid string) (*Manager, *fakeRuntime, string) {
		t.Helper()
		rt := newFakeRuntime()
		vols := t.TempDir()
		m := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", NetNSPath: "/var/run/netns/test",
			Backoff: testBackoff, VolumesDir: vols})
		if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: pod(uid), Disks: map[string]Disk{"data": {Path: dev}}}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
		return m, rt, vols
	}

	m, rt, vols := start("uid-1")
	dir := filepath.Join(vols, "data")
	if got := mountsOfDevice(rdev); !slices.Contains(got, dir) {
		t.Errorf("the disk is mounted at %v, want %s", got, dir)
	}
	if format, err := diskFormat(t.Context(), dev); err != nil || format != "ext4" {
		t.Errorf("the disk holds %q (%v), want ext4", format, err)
	}
	mounts := rt.startedSpecs()[0].Mounts
	if len(mounts) != 2 || mounts[0].Source != dir || mounts[0].Destination != "/data" || mounts[0].ReadOnly {
		t.Errorf("mounts = %+v, want the disk's directory at /data", mounts)
	}
	root, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if root.Mode().Perm()&0o770 != 0o770 || root.Mode()&os.ModeSetgid == 0 || root.Sys().(*syscall.Stat_t).Gid != 3000 {
		t.Errorf("the disk's root = %v, gid %d; want group rwx, setgid, the fsGroup's", root.Mode(), root.Sys().(*syscall.Stat_t).Gid)
	}
	info, err := os.Stat(filepath.Join(dir, "logs"))
	if err != nil || info.Mode() != root.Mode() || info.Sys().(*syscall.Stat_t).Gid != 3000 {
		t.Errorf("the subPath directory = %v, %v; want the root's mode %v, the fsGroup's", info.Mode(), err, root.Mode())
	}
	if err := os.WriteFile(filepath.Join(dir, "note"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	deletePod(t, m, 0)
	if got := mountsOfDevice(rdev); len(got) > 0 {
		t.Errorf("the disk is still mounted at %v after Delete", got)
	}
	if err := deviceFree(dev); err != nil {
		t.Errorf("after Delete: %v", err)
	}

	m, _, vols = start("uid-2")
	if got, err := os.ReadFile(filepath.Join(vols, "data", "note")); err != nil || string(got) != "kept" {
		t.Errorf("the second pod reads %q, %v; want what the first wrote", got, err)
	}
	deletePod(t, m, 0)
	if got := mountsOfDevice(rdev); len(got) > 0 {
		t.Errorf("the disk is still mounted at %v after the second Delete", got)
	}
}

// TestRestoreTakesOverADisk: an agent restarted while its pod runs finds
// the disk mounted where the earlier one mounted it (the state file keeps
// how the disk is found), restarts a container on it, and releases it at
// Delete.
func TestRestoreTakesOverADisk(t *testing.T) {
	dev := testLoopDisk(t, 32<<20)
	rdev, err := deviceNumber(dev)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rt := newFakeRuntime()
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	first := newAgentManager(t, rt, dir)
	if _, err := first.Apply(t.Context(), Desired{Generation: 1, Pod: p, Disks: map[string]Disk{"data": {Path: dev}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	volDir := filepath.Join(dir, "volumes", "data")

	// The first agent dies here; the second starts on the same disk.
	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	if got := second.VolumeDirs()["data"]; got != volDir {
		t.Errorf("restored volume dirs = %v, want data at %s", second.VolumeDirs(), volDir)
	}
	rt.task("app-0", true).exit(1)
	waitStatus(t, second, "restarted", func(s corev1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	specs := rt.startedSpecs()
	if last := specs[len(specs)-1]; len(last.Mounts) == 0 || last.Mounts[0].Source != volDir {
		t.Errorf("restarted with mounts %+v, want the disk's directory", last.Mounts)
	}
	if got := mountsOfDevice(rdev); !slices.Equal(got, []string{volDir}) {
		t.Errorf("the disk is mounted at %v, want once at %s", got, volDir)
	}
	deletePod(t, second, 0)
	if got := mountsOfDevice(rdev); len(got) > 0 {
		t.Errorf("the disk is still mounted at %v after Delete", got)
	}
	if err := deviceFree(dev); err != nil {
		t.Errorf("after Delete: %v", err)
	}
}

// TestBusyDiskFailsDelete: a disk something still holds (a file open on
// it) is not lazily unmounted: Delete fails, saying so, and a repeated
// Delete, once it is free, unmounts it.
func TestBusyDiskFailsDelete(t *testing.T) {
	dev := testLoopDisk(t, 32<<20)
	rdev, err := deviceNumber(dev)
	if err != nil {
		t.Fatal(err)
	}
	old := diskRelease
	diskRelease = 300 * time.Millisecond
	t.Cleanup(func() { diskRelease = old })
	rt := newFakeRuntime()
	vols := t.TempDir()
	m := New(Config{Runtime: rt, Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", NetNSPath: "/var/run/netns/test",
		Backoff: testBackoff, VolumesDir: vols})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
	}
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, Disks: map[string]Disk{"data": {Path: dev}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	f, err := os.Create(filepath.Join(vols, "data", "open"))
	if err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(0)
	if err := m.Delete(t.Context(), &grace); err == nil || !strings.Contains(err.Error(), `releasing the disk of volume "data"`) {
		t.Errorf("Delete with the disk busy = %v, want it not released", err)
	}
	if got := mountsOfDevice(rdev); len(got) != 1 {
		t.Errorf("the busy disk is mounted at %v, want still at its directory", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	deletePod(t, m, 0)
	if got := mountsOfDevice(rdev); len(got) > 0 {
		t.Errorf("the disk is still mounted at %v after the second Delete", got)
	}
	if err := deviceFree(dev); err != nil {
		t.Errorf("after the second Delete: %v", err)
	}
}

// TestBlankDiskReadOnlyIsRefused: a claim volume the pod mounts readOnly
// on a blank disk is refused, as mount-utils refuses to format what it
// mounts read-only: the disk stays blank.
func TestBlankDiskReadOnlyIsRefused(t *testing.T) {
	dev := testLoopDisk(t, 32<<20)
	m := New(Config{Runtime: newFakeRuntime(), Logs: logs.NewStore(t.TempDir()), PodIP: "10.0.0.7", NetNSPath: "/var/run/netns/test",
		Backoff: testBackoff, VolumesDir: t.TempDir()})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0", ReadOnly: true},
	}}}
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, Disks: map[string]Disk{"data": {Path: dev}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "CreateContainerConfigError", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "unformatted disk read-only")
	})
	if format, err := diskFormat(t.Context(), dev); err != nil || format != "" {
		t.Errorf("the disk holds %q (%v), want it blank", format, err)
	}
	deletePod(t, m, 0)
}
