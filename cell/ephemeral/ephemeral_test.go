package ephemeral

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/cell/runtime"
)

const mi = 1 << 20

func limits(storage string) corev1.ResourceRequirements {
	if storage == "" {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(storage)}}
}

func podWith(containers map[string]string, volumes ...corev1.Volume) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: volumes}}
	for _, name := range []string{"a", "b"} {
		if l, ok := containers[name]; ok {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Resources: limits(l)})
		}
	}
	return p
}

func emptyDir(name, size string, medium corev1.StorageMedium) corev1.Volume {
	ed := &corev1.EmptyDirVolumeSource{Medium: medium}
	if size != "" {
		q := resource.MustParse(size)
		ed.SizeLimit = &q
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}}
}

func TestCheck(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withInits := podWith(map[string]string{"a": "10Mi"})
	withInits.Spec.InitContainers = []corev1.Container{
		{Name: "sidecar", RestartPolicy: &always, Resources: limits("5Mi")},
		{Name: "init", Resources: limits("30Mi")},
	}
	withOverhead := podWith(map[string]string{"a": "10Mi"})
	withOverhead.Spec.Overhead = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Mi")}
	tests := []struct {
		name string
		pod  *corev1.Pod
		use  Usage
		want string
	}{
		{"no limits", podWith(map[string]string{"a": ""}), Usage{Containers: map[string]uint64{"a": 1 << 40}}, ""},
		{"within a container's limit", podWith(map[string]string{"a": "10Mi"}), Usage{Containers: map[string]uint64{"a": 10 * mi}}, ""},
		{"past a container's limit, the pod's first", podWith(map[string]string{"a": "10Mi"}), Usage{Containers: map[string]uint64{"a": 10*mi + 1}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{"past a container's limit, within the pod's", podWith(map[string]string{"a": "10Mi", "b": "30Mi"}), Usage{Containers: map[string]uint64{"a": 11 * mi, "b": 1}},
			`Container a exceeded its local ephemeral storage limit "10Mi". `},
		{"a container without a limit adds nothing to the pod's", podWith(map[string]string{"a": "10Mi", "b": ""}), Usage{Containers: map[string]uint64{"a": 6 * mi, "b": 6 * mi}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{"volumes and /etc count for the pod", podWith(map[string]string{"a": "10Mi"}, emptyDir("scratch", "", "")),
			Usage{Containers: map[string]uint64{"a": 4 * mi}, Volumes: map[string]uint64{"scratch": 6 * mi}, Etc: 1},
			"Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{"a memory emptyDir does not count for the pod", podWith(map[string]string{"a": "10Mi"}, emptyDir("shm", "", corev1.StorageMediumMemory)),
			Usage{Containers: map[string]uint64{"a": 4 * mi}, Volumes: map[string]uint64{"shm": 60 * mi}}, ""},
		{"emptyDir past its sizeLimit, first", podWith(map[string]string{"a": "1Mi"}, emptyDir("scratch", "5Mi", "")),
			Usage{Containers: map[string]uint64{"a": 20 * mi}, Volumes: map[string]uint64{"scratch": 5*mi + 1}},
			`Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `},
		{"memory emptyDir past its sizeLimit", podWith(nil, emptyDir("shm", "5Mi", corev1.StorageMediumMemory)),
			Usage{Volumes: map[string]uint64{"shm": 6 * mi}}, `Usage of EmptyDir volume "shm" exceeds the limit "5Mi". `},
		{"an init container's limit with the sidecars before it", withInits, Usage{Containers: map[string]uint64{"a": 5 * mi, "init": 29 * mi}}, ""},
		{"past an init container's limit with the sidecars before it", withInits, Usage{Containers: map[string]uint64{"a": 5 * mi, "init": 31 * mi}},
			"Pod ephemeral local storage usage exceeds the total limit of containers 35Mi. "},
		{"overhead", withOverhead, Usage{Containers: map[string]uint64{"a": 9 * mi}, Etc: 5 * mi}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.pod, tt.use); got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

// fakePod is a Pod whose containers write into dirs.
type fakePod struct {
	mu      sync.Mutex
	spec    *corev1.Pod
	phase   corev1.PodPhase
	vols    map[string]string
	evicted []string
}

func (f *fakePod) Spec() *corev1.Pod              { return f.spec }
func (f *fakePod) Tasks() map[string]runtime.Task { return nil }
func (f *fakePod) VolumeDirs() map[string]string  { return f.vols }
func (f *fakePod) PodStatus() corev1.PodStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return corev1.PodStatus{Phase: f.phase}
}

func (f *fakePod) Evict(_ context.Context, msg string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.phase == corev1.PodFailed {
		return false
	}
	f.evicted, f.phase = append(f.evicted, msg), corev1.PodFailed
	return true
}

func (f *fakePod) evictions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.evicted...)
}

func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Watch measures the logs (every attempt's, rotated files too) and the
// volumes on disk, evicts once when a limit is passed, and not before.
func TestWatchCountsLogsAndVolumes(t *testing.T) {
	dir := t.TempDir()
	logDir := func(c string) string { return filepath.Join(dir, "logs", c) }
	scratch := filepath.Join(dir, "volumes", "scratch")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	pod := &fakePod{
		spec:  podWith(map[string]string{"a": "4Mi"}, emptyDir("scratch", "", "")),
		phase: corev1.PodRunning,
		vols:  map[string]string{"scratch": scratch},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, Config{Pod: pod, LogDir: logDir, Interval: 20 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()

	writeFile(t, filepath.Join(logDir("a"), "0.log"), 1*mi)
	writeFile(t, filepath.Join(logDir("a"), "0.log.rotated-1"), 1*mi)
	writeFile(t, filepath.Join(scratch, "data"), 1*mi)
	time.Sleep(200 * time.Millisecond)
	if ev := pod.evictions(); len(ev) != 0 {
		t.Fatalf("evicted at 3 MiB of a 4Mi limit: %q", ev)
	}
	writeFile(t, filepath.Join(logDir("a"), "1.log"), 1*mi+4096)
	deadline := time.Now().Add(5 * time.Second)
	for len(pod.evictions()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want := "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
	if ev := pod.evictions(); len(ev) != 1 || ev[0] != want {
		t.Fatalf("evictions %q, want [%q]", ev, want)
	}
}

func TestDirUsage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a", "f"), 64*1024)
	if err := os.Link(filepath.Join(dir, "a", "f"), filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	// A sparse file holds only what was written.
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A symlink is an inode of its own.
	if err := os.Symlink("a/f", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	u, err := DirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 64*1024 || u.Bytes > 64*1024+64*1024 {
		t.Errorf("DirUsage = %d bytes, want 64 KiB and the directories' blocks (the hard link once, the sparse file's hole not at all)", u.Bytes)
	}
	if u.Inodes != 5 { // dir, a, a/f (= hard), sparse, sym
		t.Errorf("DirUsage = %d inodes, want 5", u.Inodes)
	}
	if _, err := DirUsage(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DirUsage of a missing dir: %v, want not exist", err)
	}
}
