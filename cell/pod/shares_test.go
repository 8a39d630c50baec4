package pod

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/nfs"
)

// recordingNFS is a Mounter whose mount(2) records what it would mount.
func recordingNFS() (*nfs.Mounter, func() []string) {
	var mu sync.Mutex
	var got []string
	m := &nfs.Mounter{
		KernelMount: func(source, target, fstype string, _ uintptr, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fstype+" "+source+" "+filepath.Base(target))
			return nil
		},
		OwnAddrs: func() ([]netip.Addr, error) { return nil, nil },
	}
	return m, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestSharesMountedBeforeTheContainers: an inline nfs volume and a claim
// the host resolved to a share are mounted on their volume directories
// before the container starts, and bound into it, the read-only claim
// read-only.
func TestSharesMountedBeforeTheContainers(t *testing.T) {
	rt := newFakeRuntime()
	vdir := filepath.Join(t.TempDir(), "volumes")
	mounter, mounted := recordingNFS()
	m := New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: vdir, Backoff: testBackoff, NFS: mounter})
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "inline", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.5", Path: "/srv/a"}}},
		{Name: "claimed", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c", ReadOnly: true}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "inline", MountPath: "/a"}, {Name: "claimed", MountPath: "/b"}}
	d := Desired{Generation: 1, Pod: p, Shares: map[string]Share{"claimed": {Server: "10.0.0.6", Path: "/srv/b", Options: []string{"nfsvers=3"}}}}
	if _, err := m.Apply(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	got := mounted()
	slices.Sort(got)
	if want := []string{"nfs 10.0.0.6:/srv/b claimed", "nfs4 10.0.0.5:/srv/a inline"}; !slices.Equal(got, want) {
		t.Errorf("mounted %v, want %v", got, want)
	}
	mounts := rt.startedSpecs()[0].Mounts
	want := map[string]struct {
		source   string
		readOnly bool
	}{"/a": {filepath.Join(vdir, "inline"), false}, "/b": {filepath.Join(vdir, "claimed"), true}}
	for _, mt := range mounts {
		if w, ok := want[mt.Destination]; ok && mt.Source == w.source && mt.ReadOnly == w.readOnly {
			delete(want, mt.Destination)
		}
	}
	if len(want) > 0 {
		t.Errorf("the container's mounts %+v lack %+v (the inline share read-write, the claim read-only)", mounts, want)
	}
	deletePod(t, m, 0)
}

// TestShareThatCannotBeMountedHoldsThePod: a share the agent refuses (a
// server only the instance reaches) keeps the container waiting with
// CreateContainerConfigError and a FailedMount event naming the volume,
// nothing mounted; an agent without NFS says so the same way.
func TestShareThatCannotBeMountedHoldsThePod(t *testing.T) {
	tests := []struct {
		name   string
		server string
		nfs    bool
		want   string
	}{
		{"a server only the instance reaches", "127.0.0.1", true, "127.0.0.1 resolves to 127.0.0.1, and it is a loopback address"},
		{"no NFS in the agent", "10.0.0.5", false, "this cell's agent mounts no NFS shares"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newFakeRuntime()
			mounter, mounted := recordingNFS()
			if !tt.nfs {
				mounter = nil
			}
			m := New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: t.TempDir(), Backoff: testBackoff, NFS: mounter})
			p := testPod(corev1.RestartPolicyAlways, "app")
			p.Spec.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: tt.server, Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "share", MountPath: "/s"}}
			if _, err := m.Apply(t.Context(), Desired{Generation: 1, Pod: p}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, m, "CreateContainerConfigError naming the volume", func(s corev1.PodStatus) bool {
				w := s.ContainerStatuses[0].State.Waiting
				return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `volume "share" (nfs)`) &&
					strings.Contains(w.Message, tt.want)
			})
			failed := slices.ContainsFunc(m.Events(), func(e Event) bool {
				return e.Type == EventWarning && e.Reason == ReasonFailedMount && strings.Contains(e.Message, `MountVolume.SetUp failed for volume "share"`)
			})
			if !failed {
				t.Errorf("events %+v, want a FailedMount warning", m.Events())
			}
			if got := mounted(); len(got) > 0 {
				t.Errorf("mounted %v", got)
			}
			if got := rt.startedNames(); len(got) > 0 {
				t.Errorf("started %v without the pod's share", got)
			}
			deletePod(t, m, 0)
		})
	}
}
