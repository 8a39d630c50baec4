package cell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/cell/api"
)

// loopDisk is a blank disk of size bytes for the test: a sparse file
// behind a loop device the test made, detached at its end.
func loopDisk(t *testing.T, size int64) string {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
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

// mountedIn lists where the filesystem of the block device dev is
// mounted in this mount namespace (/proc/self/mountinfo).
func mountedIn(t *testing.T, dev string) []string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[2] == want {
			out = append(out, f[4])
		}
	}
	return out
}

// watchEvent follows WatchStatus until cond holds for the status and
// an event with reason has come whose message has msg; it returns the
// status.
func watchEvent(t *testing.T, a *agent, reason, msg string, cond func(*corev1.PodStatus) bool) *corev1.PodStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	stream, err := a.client.WatchStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		seen []api.PodEvent
		got  bool
		last corev1.PodStatus
	)
	for {
		u, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for a %s event with %q: %v; events %+v; last status %+v", reason, msg, err, seen, last)
		}
		for _, e := range u.Events {
			seen = append(seen, e)
			got = got || (e.Reason == reason && e.Type == "Warning" && strings.Contains(e.Message, msg))
		}
		last = corev1.PodStatus{}
		if err := json.Unmarshal(u.StatusJSON, &last); err != nil {
			t.Fatal(err)
		}
		if got && cond(&last) {
			return &last
		}
	}
}

// diskPod is a pod whose container runs script with the claim volume
// "data" at /data (and its subPath "sub" at /sub), fsGroup 2000.
func diskPod(e *env, name, script string) *corev1.Pod {
	grace, fsGroup := int64(1), int64(2000)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: &fsGroup},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name},
			}}},
			Containers: []corev1.Container{{
				Name: "app", Image: e.img.Busybox.Ref,
				Command:      []string{"sh", "-c", script + "; trap 'exit 0' TERM; while true; do sleep 0.1; done"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/sub", SubPath: "sub"}},
			}},
		},
	}
}

// TestAgentDisks: a persistent volume on a real block device (a loop
// device the test makes): the first pod's agent formats the blank disk
// and mounts it, its container writes to it, through a subPath too, as
// fsGroup's; once DeletePod returned the disk is mounted nowhere and free
// for the host to detach. A second cell's pod with the same disk,
// read-only, reads what the first wrote (no reformat) and cannot write.
// A third asking for another filesystem than the disk holds is refused
// with FailedMount, its container never started.
func TestAgentDisks(t *testing.T) {
	e := newEnv(t)
	dev := loopDisk(t, 64<<20)
	running := func(s *corev1.PodStatus) bool { return containerStatus(s, "app").State.Running != nil }
	run := func(a *agent, script string) (string, int32) {
		t.Helper()
		out, errOut, code := execute(t, a, &api.ExecStart{Container: "app", Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
		return out + errOut, code
	}

	// The first pod: a blank disk, formatted ext4 and mounted.
	a := e.startAgent(t, "10.251.9.61")
	e.applyPodWith(t, a, diskPod(e, "writer", "echo kept > /data/note && echo deep > /sub/file"),
		&api.PodRequest{Disks: map[string]api.Disk{"data": {Path: dev}}})
	watch(t, a, "the writer running", running)
	if out, code := run(a, "grep ' /data ' /proc/mounts"); code != 0 || !strings.Contains(out, " ext4 ") || !strings.Contains(out, " rw,") {
		t.Errorf("the disk's mount in the container = %q (exit %d), want ext4 read-write", out, code)
	}
	var (
		out  string
		code int32
	)
	for range 50 { // the container may not have written yet
		if out, code = run(a, "cat /data/note /data/sub/file && stat -c %g /data /data/sub"); code == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out != "kept\ndeep\n2000\n2000\n" {
		t.Errorf("the disk's files and group = %q (exit %d), want kept, deep and fsGroup 2000", out, code)
	}
	checkDiskStats(t, a, 64<<20)
	if got := mountedIn(t, dev); len(got) == 0 {
		t.Error("the disk is not mounted while the pod runs")
	}
	deleteAndCheckReleased(t, a, dev)

	// The second pod, on another cell: the same disk, read-only.
	b := e.startAgent(t, "10.251.9.62")
	e.applyPodWith(t, b, diskPod(e, "reader", "true"),
		&api.PodRequest{Disks: map[string]api.Disk{"data": {Path: dev, FSType: "ext4", ReadOnly: true}}})
	watch(t, b, "the reader running", running)
	if out, code := run(b, "cat /data/note /sub/file"); code != 0 || out != "kept\ndeep\n" {
		t.Errorf("the second pod reads %q (exit %d), want what the first wrote", out, code)
	}
	if out, code := run(b, "echo x > /data/new"); code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing to the read-only disk: %q (exit %d), want a read-only file system", out, code)
	}
	deleteAndCheckReleased(t, b, dev)

	checkOtherFilesystemRefused(t, e, dev)
}

// checkDiskStats checks that the pod's Stats report the volume "data"
// with its filesystem's figures (a capacity of at most size) and a usage.
func checkDiskStats(t *testing.T, a *agent, size uint64) {
	t.Helper()
	stats, err := a.client.Stats(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	var fs *api.FsStats
	for _, v := range stats.Volumes {
		if v.Name == "data" {
			fs = v.Fs
		}
	}
	if fs == nil || !fs.HasFilesystem || fs.CapacityBytes == 0 || fs.CapacityBytes > size || fs.Inodes == 0 || !fs.HasUsage || fs.UsedBytes == 0 {
		t.Errorf("the disk's stats = %+v, want its filesystem's figures (at most %d bytes) and a usage", fs, size)
	}
}

// deleteAndCheckReleased deletes the pod of a and checks that once
// DeletePod returned the disk dev is mounted nowhere here and nothing
// holds it, in any mount namespace: the host may detach it.
func deleteAndCheckReleased(t *testing.T, a *agent, dev string) {
	t.Helper()
	if err := a.client.DeletePod(t.Context(), -1); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if got := mountedIn(t, dev); len(got) > 0 {
		t.Errorf("the disk is still mounted at %v after DeletePod", got)
	}
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Errorf("the disk is in use after DeletePod: %v", err)
		return
	}
	_ = unix.Close(fd)
}

// checkOtherFilesystemRefused runs a pod whose volume asks for xfs on the
// disk dev, which holds ext4: the agent refuses it with FailedMount and
// never starts the container, and the disk is left as it was.
func checkOtherFilesystemRefused(t *testing.T, e *env, dev string) {
	t.Helper()
	c := e.startAgent(t, "10.251.9.63")
	e.applyPodWith(t, c, diskPod(e, "wrongfs", "true"),
		&api.PodRequest{Disks: map[string]api.Disk{"data": {Path: dev, FSType: "xfs"}}})
	st := watchEvent(t, c, "FailedMount", "filesystem is ext4, not xfs", func(s *corev1.PodStatus) bool {
		w := containerStatus(s, "app").State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `volume "data" (persistentVolumeClaim)`)
	})
	if cs := containerStatus(st, "app"); cs.ContainerID != "" || cs.RestartCount != 0 {
		t.Errorf("the container started without its volume: %+v", cs)
	}
	if got := mountedIn(t, dev); len(got) > 0 {
		t.Errorf("the refused disk is mounted at %v", got)
	}
	blkid, err := exec.CommandContext(t.Context(), "blkid", "-p", "-s", "TYPE", "-o", "value", dev).CombinedOutput()
	if err != nil || strings.TrimSpace(string(blkid)) != "ext4" {
		t.Errorf("the refused disk holds %q (%v), want its ext4 untouched", blkid, err)
	}
}

// TestAgentBlockDisk: a volumeMode Block disk reaches the container as a
// device node at its devicePath, neither formatted nor mounted by the
// agent: the container writes to the device and reads it back.
func TestAgentBlockDisk(t *testing.T) {
	e := newEnv(t)
	dev := loopDisk(t, 16<<20)
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "raw", Namespace: "default", UID: "uid-raw"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{{Name: "raw", VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{},
			}}},
			Containers: []corev1.Container{{
				Name: "app", Image: e.img.Busybox.Ref,
				Command:       []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"},
				VolumeDevices: []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvdb"}},
			}},
		},
	}
	a := e.startAgent(t, "10.251.9.64")
	e.applyPodWith(t, a, p, &api.PodRequest{Disks: map[string]api.Disk{"raw": {Path: dev, Block: true}}})
	watch(t, a, "running", func(s *corev1.PodStatus) bool { return containerStatus(s, "app").State.Running != nil })
	script := "test -b /dev/xvdb && echo block-data | dd of=/dev/xvdb bs=512 count=1 conv=sync 2>/dev/null && sync && head -c 10 /dev/xvdb"
	out, errOut, code := execute(t, a, &api.ExecStart{Container: "app", Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
	if code != 0 || out != "block-data" {
		t.Errorf("the container's device: %q %q (exit %d), want block-data written and read back", out, errOut, code)
	}
	if got := mountedIn(t, dev); len(got) > 0 {
		t.Errorf("the block disk is mounted at %v", got)
	}
	if err := a.client.DeletePod(t.Context(), -1); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	data := make([]byte, 10)
	f, err := os.Open(dev) //nolint:gosec // G304: the test's own loop device
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(data, 0); err != nil || string(data) != "block-data" {
		t.Errorf("the device holds %q (%v), want what the container wrote", data, err)
	}
}
