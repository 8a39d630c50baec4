package pod

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/cell/runtime"
)

func readVolFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	changed, err := writeAtomic(dir, map[string][]byte{"a": []byte("1"), "sub/b": []byte("2")}, map[string]uint32{"a": 0o400}, nil)
	if err != nil || !changed {
		t.Fatalf("first write = %v, %v", changed, err)
	}
	first, _ := os.Readlink(filepath.Join(dir, dataLink))
	if !strings.HasPrefix(first, "..") {
		t.Errorf("..data → %q, want a ..<timestamp> directory", first)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Errorf("a → %q, want ..data/a", l)
	}
	if got := readVolFile(t, filepath.Join(dir, "sub/b")); got != "2" {
		t.Errorf("sub/b = %q", got)
	}
	info, err := os.Stat(filepath.Join(dir, "a"))
	if err != nil || info.Mode().Perm() != 0o400 {
		t.Errorf("mode of a = %v, %v; want 0400", info.Mode(), err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "sub/b")); info.Mode().Perm() != 0o644 {
		t.Errorf("default mode = %v, want 0644", info.Mode())
	}

	// The same payload changes nothing.
	changed, err = writeAtomic(dir, map[string][]byte{"a": []byte("1"), "sub/b": []byte("2")}, map[string]uint32{"a": 0o400}, nil)
	if err != nil || changed {
		t.Fatalf("equal write = %v, %v; want no change", changed, err)
	}

	// An update swaps ..data, drops the old payload and stale links.
	changed, err = writeAtomic(dir, map[string][]byte{"a": []byte("one"), "c": []byte("3")}, nil, nil)
	if err != nil || !changed {
		t.Fatalf("update = %v, %v", changed, err)
	}
	second, _ := os.Readlink(filepath.Join(dir, dataLink))
	if second == first {
		t.Error("..data not swapped")
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("old payload %s still there: %v", first, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("stale link sub still there: %v", err)
	}
	if got := readVolFile(t, filepath.Join(dir, "a")) + readVolFile(t, filepath.Join(dir, "c")); got != "one3" {
		t.Errorf("after update a+c = %q", got)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 4 { // ..<ts>, ..data, a, c
		t.Errorf("volume directory holds %v", names)
	}

	for _, bad := range []string{"/abs", "../up", "x/../../y", "..hidden"} {
		if _, err := writeAtomic(dir, map[string][]byte{bad: nil}, nil, nil); err == nil {
			t.Errorf("path %q accepted", bad)
		}
	}
}

func TestVolumeMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning a subPath (a bind mount) needs root")
	}
	dir := t.TempDir()
	v := newVolumes(filepath.Join(dir, "volumes"), nil, "", nil, slog.New(slog.DiscardHandler))
	hostDir := filepath.Join(dir, "host", "made")
	hostFile := filepath.Join(dir, "hostfile")
	dirOrCreate, fileOrCreate, mustDir := corev1.HostPathDirectoryOrCreate, corev1.HostPathFileOrCreate, corev1.HostPathDirectory
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "hostdir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: &dirOrCreate}}},
		{Name: "hostfile", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostFile, Type: &fileOrCreate}}},
	}
	c := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/cfg"},
		{Name: "cfg", MountPath: "/etc/one", SubPath: "key"},
		{Name: "scratch", MountPath: "/data"},
		{Name: "scratch", MountPath: "/logs", SubPathExpr: "logs/$(POD)", ReadOnly: true},
		{Name: "hostdir", MountPath: "/host"},
		{Name: "hostfile", MountPath: "/hostfile"},
	}}
	d := &Desired{Generation: 1, Pod: p, Volumes: map[string]VolumeFiles{"cfg": {Files: map[string][]byte{"key": []byte("v")}}}}
	v.sync(t.Context(), d)
	got, err := v.mounts(p, c, map[string]string{"POD": "p1"})
	if err != nil {
		t.Fatalf("mounts: %v", err)
	}
	vols := filepath.Join(dir, "volumes")
	payload, _ := os.Readlink(filepath.Join(vols, "cfg", dataLink))
	// A subPath is what it named when checked, pinned by a bind mount of
	// the agent's (.subpaths/<container>/<index>).
	pins := filepath.Join(vols, subPathsDir, "app")
	want := []runtime.Mount{
		{Source: filepath.Join(vols, "cfg"), Destination: "/etc/cfg", ReadOnly: true},
		{Source: filepath.Join(pins, "1"), Destination: "/etc/one", ReadOnly: true},
		{Source: filepath.Join(vols, "scratch"), Destination: "/data"},
		{Source: filepath.Join(pins, "3"), Destination: "/logs", ReadOnly: true},
		{Source: hostDir, Destination: "/host"},
		{Source: hostFile, Destination: "/hostfile"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	for pin, named := range map[string]string{
		filepath.Join(pins, "1"): filepath.Join(vols, "cfg", payload, "key"),
		filepath.Join(pins, "3"): filepath.Join(vols, "scratch", "logs", "p1"),
	} {
		if !sameFile(t, pin, named) {
			t.Errorf("%s is not %s", pin, named)
		}
	}
	wantDirs := map[string]string{"cfg": filepath.Join(vols, "cfg"), "scratch": filepath.Join(vols, "scratch")}
	if diff := cmp.Diff(wantDirs, v.dirs()); diff != "" {
		t.Errorf("dirs, hostPath left out (-want +got):\n%s", diff)
	}
	if info, err := os.Stat(filepath.Join(vols, "scratch")); err != nil || info.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir = %v, %v; want mode 0777", info, err)
	}
	if info, err := os.Stat(hostFile); err != nil || !info.Mode().IsRegular() {
		t.Errorf("FileOrCreate made %v, %v", info, err)
	}

	// A subPath may not leave its volume.
	if err := os.Symlink("/etc", filepath.Join(vols, "scratch", "escape")); err != nil {
		t.Fatal(err)
	}
	c2 := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/x", SubPath: "escape"}}}
	if _, err := v.mounts(p, c2, nil); err == nil || !strings.Contains(err.Error(), "leaves the volume") {
		t.Errorf("escaping subPath = %v", err)
	}
	c2.VolumeMounts[0].SubPath = "../x"
	if _, err := v.mounts(p, c2, nil); err == nil {
		t.Error("subPath with .. accepted")
	}

	// Unsupported kinds and failed checks name the volume and its kind.
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	v.sync(t.Context(), &Desired{Generation: 2, Pod: p})
	if _, err := v.mounts(p, c, nil); err == nil || !strings.Contains(err.Error(), `volume "claim" (persistentVolumeClaim)`) {
		t.Errorf("mounts with a PVC = %v", err)
	}
	p.Spec.Volumes = append(p.Spec.Volumes[:4],
		corev1.Volume{Name: "nodir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(dir, "absent"), Type: &mustDir}}})
	v.sync(t.Context(), &Desired{Generation: 3, Pod: p})
	if _, err := v.mounts(p, c, nil); err == nil || !strings.Contains(err.Error(), `volume "nodir" (hostPath)`) {
		t.Errorf("mounts with a missing Directory = %v", err)
	}

	if err := v.cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vols); !os.IsNotExist(err) {
		t.Errorf("volumes left after cleanup: %v", err)
	}
	if _, err := os.Stat(hostDir); err != nil {
		t.Errorf("cleanup touched the hostPath: %v", err)
	}
}

// sameFile says whether a and b are one file (device and inode).
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	ia, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(ia, ib)
}

// TestSubPathCannotBeRedirected checks the escapes of a subPath in a
// volume that a container shares with the agent, as a pod author would
// try them, with openat2 and on a kernel without it (os.Root):
//   - a directory swapped for a symlink to the cell's files after the
//     agent checked it and before runc mounts it: the mount is still the
//     directory that was checked (CVE-2021-25741; a path would follow the
//     symlink);
//   - a missing subPath below a symlink that leads out: refused, and
//     nothing is created outside the volume (a MkdirAll through the
//     symlink would make the directory on the cell);
//   - a subPath that is a symlink out: refused;
//   - the container's next start pins again, replacing the first pin;
//   - cleanup unmounts the pins and removes them.
func TestSubPathCannotBeRedirected(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning a subPath (a bind mount) needs root")
	}
	for _, kernel := range []string{"openat2", "no openat2"} {
		t.Run(kernel, func(t *testing.T) {
			if kernel == "no openat2" {
				orig := openat2
				openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
				t.Cleanup(func() { openat2 = orig })
			}
			dir := t.TempDir()
			outside := filepath.Join(dir, "cell-files")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "shadow"), []byte("the cell's"), 0o600); err != nil {
				t.Fatal(err)
			}
			vols := filepath.Join(dir, "volumes")
			v := newVolumes(vols, nil, "", nil, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { _ = v.cleanup() })
			p := testPod(corev1.RestartPolicyAlways, "app")
			p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			v.sync(t.Context(), &Desired{Generation: 1, Pod: p})
			shared := filepath.Join(vols, "shared")
			mount := func(sub string) (string, error) {
				c := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: sub}}}
				got, err := v.mounts(p, c, nil)
				if err != nil {
					return "", err
				}
				return got[0].Source, nil
			}

			// A missing subPath below a symlink out.
			if err := os.Symlink(outside, filepath.Join(shared, "esc")); err != nil {
				t.Fatal(err)
			}
			if _, err := mount("esc/made"); err == nil {
				t.Error("a subPath below a symlink out of the volume was mounted")
			}
			if _, err := os.Stat(filepath.Join(outside, "made")); err == nil {
				t.Error("the agent created a directory outside the volume, through the pod's symlink")
			}

			// The swap between the check and runc's mount.
			src, err := mount("data")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shared, "data", "mine"), []byte("the pod's"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(shared, "data"), filepath.Join(shared, "data.old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(shared, "data")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(src, "shadow")); err == nil {
				t.Errorf("after the swap, what the runtime binds (%s) is the cell's directory", src)
			}
			if _, err := os.Stat(filepath.Join(src, "mine")); err != nil {
				t.Errorf("after the swap, what the runtime binds (%s) is not the directory checked: %v", src, err)
			}

			// The container's next start: the symlink is refused now, and
			// a new directory is pinned in place of the first.
			if _, err := mount("data"); err == nil || !strings.Contains(err.Error(), "leaves the volume") {
				t.Errorf("a subPath that is a symlink out of the volume: %v, want it refused", err)
			}
			again, err := mount("data.old")
			if err != nil || again != src {
				t.Errorf("the next start's pin = %s, %v; want %s", again, err, src)
			}
			if n := strings.Count(mountInfo(t), " "+src+" "); n != 1 {
				t.Errorf("%s is mounted %d times after a second start, want once", src, n)
			}

			if err := v.cleanup(); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(mountInfo(t), vols) {
				t.Errorf("a pin is still mounted after cleanup:\n%s", mountInfo(t))
			}
			if _, err := os.Stat(filepath.Join(outside, "shadow")); err != nil {
				t.Errorf("cleanup removed the cell's file through the symlink: %v", err)
			}
		})
	}
}

func mountInfo(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestMemoryVolumesOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "volumes")
	v := newVolumes(dir, nil, "", nil, slog.New(slog.DiscardHandler))
	size := resource.MustParse("4Mi")
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
	}
	v.sync(t.Context(), &Desired{Generation: 1, Pod: p, Volumes: map[string]VolumeFiles{"sec": {Files: map[string][]byte{"k": []byte("x")}}}})
	t.Cleanup(func() { _ = v.cleanup() })
	if err := v.errs["mem"]; err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mem", "sec"} {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is not on tmpfs", name)
		}
		if name == "mem" && st.Blocks*uint64(st.Bsize) != 4<<20 {
			t.Errorf("mem tmpfs size = %d, want 4Mi", st.Blocks*uint64(st.Bsize))
		}
	}
	if got := readVolFile(t, filepath.Join(dir, "sec", "k")); got != "x" {
		t.Errorf("secret file = %q", got)
	}
	if err := v.cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("volumes left: %v", err)
	}
}

// When the runtime would not see the agent's tmpfs, the volumes meant for
// memory are directories on disk, which the containers do see, written
// as usual, and the pod is told once per volume why they are on disk.
func TestVolumesOnDiskWhenTheRuntimeCannotSeeTmpfs(t *testing.T) {
	rt := newFakeRuntime()
	vdir := filepath.Join(t.TempDir(), "volumes")
	why := errors.New("the runtime is in another mount namespace")
	m := New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: vdir, NoTmpfs: why, Backoff: testBackoff})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	files := map[string]VolumeFiles{
		"sec":   {Files: map[string][]byte{"k": []byte("s3cret")}},
		"token": {Files: map[string][]byte{"token": []byte("jwt")}},
		"cfg":   {Files: map[string][]byte{"c": []byte("v")}},
	}
	for gen := int64(1); gen <= 2; gen++ {
		if _, err := m.Apply(t.Context(), Desired{Generation: gen, Pod: p, Volumes: files}); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	// A tmpfs of the agent's would be a mount of its own: another device
	// than the volumes' directory. (The directory itself may be on a tmpfs
	// the runtime sees, as /tmp is in hack/fresh-root.sh.)
	var parent unix.Stat_t
	if err := unix.Stat(vdir, &parent); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"sec": "k", "token": "token"} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(vdir, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Dev != parent.Dev {
			t.Errorf("%s is a mount of its own (a tmpfs the runtime would not see), not a directory of %s", name, vdir)
		}
		if got := readVolFile(t, filepath.Join(vdir, name, file)); got != string(files[name].Files[file]) {
			t.Errorf("%s/%s = %q", name, file, got)
		}
	}
	var got []string
	for _, e := range m.Events() {
		if e.Reason == ReasonVolumeOnDisk {
			if e.Type != EventWarning || e.Container != "" || !strings.Contains(e.Message, why.Error()) {
				t.Errorf("event %+v, want a pod Warning saying why", e)
			}
			got = append(got, e.Message[:strings.Index(e.Message, " is on")])
		}
	}
	want := []string{`volume "sec" (secret)`, `volume "token" (projected)`, `volume "mem" (emptyDir)`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VolumeOnDisk events, once each over two generations (-want +got):\n%s", diff)
	}
	deletePod(t, m, time.Second)
}

// A pod with a volume the cell cannot provide fails clearly: its
// containers wait with CreateContainerConfigError naming the volume.
func TestUnsupportedVolumeFailsThePod(t *testing.T) {
	rt := newFakeRuntime()
	m := New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: t.TempDir(), Backoff: testBackoff})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "x"}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	apply(t, m, 1, p)
	st := waitStatus(t, m, "CreateContainerConfigError", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError"
	})
	msg := st.ContainerStatuses[0].State.Waiting.Message
	if !strings.Contains(msg, `volume "data" (csi)`) || !strings.Contains(msg, "not supported") {
		t.Errorf("message = %q, want the volume, its kind and why", msg)
	}
	if st.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", st.Phase)
	}
	waitEvent(t, m, "Failed", `Error: volume "data" (csi)`)
	if n := len(rt.startedNames()); n != 0 {
		t.Errorf("%d containers started", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	grace := time.Duration(0)
	if err := m.Delete(ctx, &grace); err != nil {
		t.Fatal(err)
	}
}

// Volume files and mounts reach the runtime, and a new generation swaps
// the files in while the container runs.
func TestVolumesReachTheRuntime(t *testing.T) {
	rt := newFakeRuntime()
	vdir := filepath.Join(t.TempDir(), "volumes")
	m := New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: vdir, Backoff: testBackoff})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	files := func(v string) map[string]VolumeFiles {
		return map[string]VolumeFiles{"cfg": {Files: map[string][]byte{"k": []byte(v)}}}
	}
	if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p, Volumes: files("one")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	spec := rt.startedSpecs()[0]
	if len(spec.Mounts) != 1 || spec.Mounts[0].Source != filepath.Join(vdir, "cfg") || !spec.Mounts[0].ReadOnly {
		t.Errorf("mounts = %+v", spec.Mounts)
	}
	if got := readVolFile(t, filepath.Join(vdir, "cfg", "k")); got != "one" {
		t.Errorf("k = %q", got)
	}
	if _, err := m.Apply(t.Context(), Desired{Generation: 2, Pod: p, Volumes: files("two")}); err != nil {
		t.Fatal(err)
	}
	if got := readVolFile(t, filepath.Join(vdir, "cfg", "k")); got != "two" {
		t.Errorf("k after generation 2 = %q", got)
	}
	if n := len(rt.startedNames()); n != 1 {
		t.Errorf("%d starts: a file update must not restart the container", n)
	}
	deletePod(t, m, time.Second)
	if _, err := os.Stat(vdir); !os.IsNotExist(err) {
		t.Errorf("volumes left after Delete: %v", err)
	}
}
