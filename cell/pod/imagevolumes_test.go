package pod

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// imageVolumePod is a pod whose container "app" mounts image volume
// "img" (image ref, policy) at each of mounts, and whose container
// "other" mounts nothing.
func imageVolumePod(ref string, policy corev1.PullPolicy, mounts ...corev1.VolumeMount) *corev1.Pod {
	p := testPod(corev1.RestartPolicyAlways, "app", "other")
	p.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}}
	p.Spec.Containers[0].VolumeMounts = mounts
	return p
}

func newImageVolumeManager(t *testing.T, rt *fakeRuntime) (*Manager, string) {
	t.Helper()
	vdir := filepath.Join(t.TempDir(), "volumes")
	return New(Config{Runtime: rt, Logs: newManager(t, rt).cfg.Logs, VolumesDir: vdir, Backoff: testBackoff}), vdir
}

func appSpec(t *testing.T, rt *fakeRuntime) runtime.ContainerSpec {
	t.Helper()
	for _, s := range rt.startedSpecs() {
		if s.Name == "app" {
			return s
		}
	}
	t.Fatalf("app never started; started %v", rt.startedNames())
	return runtime.ContainerSpec{}
}

// An image volume is pulled with the image manager's events about the pod
// (no container), mounted in the volumes' directory, bound read-only
// into the container (a subPath too, though the mount asks for
// read-write), and released when the pod is deleted, before the runtime's
// Cleanup.
func TestImageVolumeMountedReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("pinning a subPath (a bind mount) needs root")
	}
	rt := newFakeRuntime()
	m, vdir := newImageVolumeManager(t, rt)
	p := imageVolumePod("reg/data:v1", corev1.PullIfNotPresent,
		corev1.VolumeMount{Name: "img", MountPath: "/img"},
		corev1.VolumeMount{Name: "img", MountPath: "/tools", SubPath: "bin", ReadOnly: false})
	apply(t, m, 1, p)
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })

	spec := appSpec(t, rt)
	dir := filepath.Join(vdir, "img")
	pin := filepath.Join(vdir, subPathsDir, "app", "1")
	want := []runtime.Mount{
		{Source: dir, Destination: "/img", ReadOnly: true},
		{Source: pin, Destination: "/tools", ReadOnly: true},
	}
	if diff := cmp.Diff(want, spec.Mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(pin, "sh")); err != nil {
		t.Errorf("the subPath pin does not show the image's bin/: %v", err)
	}
	if got := readVolFile(t, filepath.Join(dir, "ref")); got != "reg/data:v1" {
		t.Errorf("mounted image = %q", got)
	}
	var podEvents []string
	for _, e := range m.Events() {
		if e.Container == "" && strings.Contains(e.Message, "reg/data:v1") {
			podEvents = append(podEvents, e.Reason+": "+e.Message)
		}
	}
	if len(podEvents) < 2 || podEvents[0] != `Pulling: Pulling image "reg/data:v1"` || !strings.HasPrefix(podEvents[1], `Pulled: Successfully pulled image "reg/data:v1" in `) {
		t.Errorf("the pod's events about the volume's image = %q, want Pulling then Pulled", podEvents)
	}
	if dirs := m.VolumeDirs(); dirs["img"] != "" {
		t.Errorf("VolumeDirs = %v: an image volume counts in no usage", dirs)
	}

	deletePod(t, m, time.Second)
	h := rt.history()
	if !slices.Contains(h, "mount-image reg/data:v1 "+dir) || !slices.Contains(h, "unmount-image "+dir) {
		t.Errorf("runtime history %q: want the image mounted at %s and released", h, dir)
	}
}

// A volume's image that cannot be pulled keeps the container that mounts
// it waiting, as the kubelet: ErrImagePull with the registry's message,
// then ImagePullBackOff, with the pull's events on the pod and the
// container's Failed events; its own image is not pulled meanwhile. The
// container that mounts no such volume runs. Once the registry answers,
// the container starts.
func TestImageVolumePullFailure(t *testing.T) {
	rt := newFakeRuntime()
	rt.setPullErr("reg/absent:v1", errors.New("reg/absent:v1: not found"))
	m, _ := newImageVolumeManager(t, rt)
	apply(t, m, 1, imageVolumePod("reg/absent:v1", corev1.PullAlways, corev1.VolumeMount{Name: "img", MountPath: "/img"}))

	app := func(s corev1.PodStatus) corev1.ContainerStatus { return s.ContainerStatuses[0] }
	st := waitStatus(t, m, "ErrImagePull", func(s corev1.PodStatus) bool {
		w := app(s).State.Waiting
		return w != nil && w.Reason == "ErrImagePull"
	})
	if msg := app(st).State.Waiting.Message; msg != "reg/absent:v1: not found" {
		t.Errorf("ErrImagePull message = %q", msg)
	}
	st = waitStatus(t, m, "ImagePullBackOff", func(s corev1.PodStatus) bool {
		w := app(s).State.Waiting
		return w != nil && w.Reason == "ImagePullBackOff"
	})
	if msg, want := app(st).State.Waiting.Message, `Back-off pulling image "reg/absent:v1": ErrImagePull: reg/absent:v1: not found`; msg != want {
		t.Errorf("ImagePullBackOff message = %q, want %q", msg, want)
	}
	waitStatus(t, m, "the other container running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[1].State.Running != nil })
	evs := waitEvent(t, m, "BackOff", `Back-off pulling image "reg/absent:v1"`)
	have := map[string]string{}
	for _, e := range evs {
		have[e.Reason+"|"+e.Container+"|"+e.Message] = e.Type
	}
	for _, want := range []struct{ typ, key string }{
		{EventNormal, `Pulling||Pulling image "reg/absent:v1"`},
		{EventWarning, `Failed||Failed to pull image "reg/absent:v1": reg/absent:v1: not found`},
		{EventWarning, "Failed|app|Error: ErrImagePull"},
		{EventNormal, `BackOff||Back-off pulling image "reg/absent:v1"`},
	} {
		if typ, ok := have[want.key]; !ok || typ != want.typ {
			t.Errorf("no %s event %q; have %v", want.typ, want.key, summary(evs))
		}
	}
	waitEvent(t, m, "Failed", "Error: ImagePullBackOff")
	rt.mu.Lock()
	pulledApp := slices.Contains(rt.pulls, "reg/app:v1")
	rt.mu.Unlock()
	if pulledApp {
		t.Error("the container's own image was pulled while its image volume failed")
	}

	rt.setPullErr("reg/absent:v1", nil)
	waitStatus(t, m, "app running once the image is there", func(s corev1.PodStatus) bool { return app(s).State.Running != nil })
	deletePod(t, m, time.Second)
}

// Pull policies, as the kubelet's image manager applies them to an image
// volume: IfNotPresent uses a present image ("already present"), Always
// pulls it again, Never refuses an absent one (ErrImageNeverPull, the
// kubelet's message and a Warning event of that reason on the pod).
func TestImageVolumePullPolicy(t *testing.T) {
	tests := []struct {
		policy     corev1.PullPolicy
		present    bool
		wantPulled bool
		wantEvent  string // reason: message of the pod's event
		wantWait   string // the app container's waiting reason; "" running
	}{
		{corev1.PullIfNotPresent, true, false, `Pulled: Container image "reg/data:v1" already present on machine`, ""},
		{corev1.PullAlways, true, true, `Pulling: Pulling image "reg/data:v1"`, ""},
		{corev1.PullNever, false, false, `ErrImageNeverPull: Container image "reg/data:v1" is not present with pull policy of Never`, "ErrImageNeverPull"},
		{corev1.PullNever, true, false, `Pulled: Container image "reg/data:v1" already present on machine`, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			rt := newFakeRuntime()
			rt.present["reg/data:v1"] = tt.present
			m, _ := newImageVolumeManager(t, rt)
			apply(t, m, 1, imageVolumePod("reg/data:v1", tt.policy, corev1.VolumeMount{Name: "img", MountPath: "/img"}))
			st := waitStatus(t, m, "the app container started or waiting for its volume", func(s corev1.PodStatus) bool {
				c := s.ContainerStatuses[0]
				return (tt.wantWait == "" && c.State.Running != nil) || (c.State.Waiting != nil && c.State.Waiting.Reason == tt.wantWait)
			})
			reason, msg, _ := strings.Cut(tt.wantEvent, ": ")
			evs := waitEvent(t, m, reason, msg)
			for _, e := range evs {
				if e.Reason == reason && strings.Contains(e.Message, msg) && e.Container != "" {
					t.Errorf("event %s about container %s, want about the pod", e.Reason, e.Container)
				}
			}
			rt.mu.Lock()
			pulled := slices.Contains(rt.pulls, "reg/data:v1")
			rt.mu.Unlock()
			if pulled != tt.wantPulled {
				t.Errorf("pulled = %v, want %v", pulled, tt.wantPulled)
			}
			if w := st.ContainerStatuses[0].State.Waiting; tt.wantWait != "" && w.Message != msg {
				t.Errorf("waiting message = %q, want %q", w.Message, msg)
			}
			deletePod(t, m, time.Second)
		})
	}
}

// An image volume's subPath must be a directory of the image: a file or a
// missing path keeps the container waiting with CreateContainerError, as
// containerd refuses it (the node e2e test "should fail if subPath in
// volume is not existing").
func TestImageVolumeSubPathMustBeADirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("pinning a subPath (a bind mount) needs root")
	}
	for _, tt := range []struct{ sub, want string }{
		{"ref", "only directory subpath is supported"},
		{"not-existing", "not-existing"},
	} {
		t.Run(tt.sub, func(t *testing.T) {
			rt := newFakeRuntime()
			m, _ := newImageVolumeManager(t, rt)
			apply(t, m, 1, imageVolumePod("reg/data:v1", corev1.PullIfNotPresent, corev1.VolumeMount{Name: "img", MountPath: "/img", SubPath: tt.sub}))
			st := waitStatus(t, m, "CreateContainerError", func(s corev1.PodStatus) bool {
				w := s.ContainerStatuses[0].State.Waiting
				return w != nil && w.Reason == "CreateContainerError"
			})
			if msg := st.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, tt.want) || !strings.Contains(msg, `volume "img" (image)`) {
				t.Errorf("message = %q, want the volume and %q", msg, tt.want)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			grace := time.Duration(0)
			if err := m.Delete(ctx, &grace); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A mount that fails keeps the container waiting with the runtime's
// message (CreateContainerError) and is tried again.
func TestImageVolumeMountFailure(t *testing.T) {
	rt := newFakeRuntime()
	rt.mountErr = errors.New("overlay: invalid argument")
	m, _ := newImageVolumeManager(t, rt)
	apply(t, m, 1, imageVolumePod("reg/data:v1", corev1.PullIfNotPresent, corev1.VolumeMount{Name: "img", MountPath: "/img"}))
	st := waitStatus(t, m, "CreateContainerError", func(s corev1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerError"
	})
	want := "failed to mount image volume: ImageVolumeMountFailed: overlay: invalid argument"
	if msg := st.ContainerStatuses[0].State.Waiting.Message; msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
	waitEvent(t, m, "Failed", "Error: "+want)
	rt.mu.Lock()
	rt.mountErr = nil
	rt.mu.Unlock()
	waitStatus(t, m, "running once it mounts", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	deletePod(t, m, time.Second)
}

// A restarted agent keeps the image volume an earlier one mounted: while
// its image cannot be pulled again (policy Always) a container that does
// not mount it restarts all the same, and once it can, the resumed
// container's next attempt gets the volume, read-only; the volume is
// released at deletion.
func TestImageVolumeAfterRestore(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	p := imageVolumePod("reg/data:v1", corev1.PullAlways, corev1.VolumeMount{Name: "img", MountPath: "/img"})
	first := newAgentManager(t, rt, dir)
	apply(t, first, 1, p)
	both := func(restarts int32) func(s corev1.PodStatus) bool {
		return func(s corev1.PodStatus) bool {
			for _, c := range s.ContainerStatuses {
				if c.State.Running == nil || c.RestartCount != restarts {
					return false
				}
			}
			return true
		}
	}
	waitStatus(t, first, "both running", both(0))

	rt.setPullErr("reg/data:v1", errors.New("registry down"))
	second := newAgentManager(t, rt, dir)
	if !restore(t, second, "uid-1") {
		t.Fatal("Restore found nothing to resume")
	}
	rt.task("other-0", true).exit(1)
	waitStatus(t, second, "other restarted while the volume's image fails", func(s corev1.PodStatus) bool {
		c := s.ContainerStatuses[1]
		return c.RestartCount == 1 && c.State.Running != nil
	})
	rt.setPullErr("reg/data:v1", nil)
	rt.task("app-0", true).exit(1)
	waitStatus(t, second, "both restarted", both(1))
	img := filepath.Join(dir, "volumes", "img")
	want := runtime.Mount{Source: img, Destination: "/img", ReadOnly: true}
	if spec := appSpec(t, rt); !slices.Contains(spec.Mounts, want) {
		t.Errorf("app's first attempt with mounts %+v, want %+v", spec.Mounts, want)
	}
	specs := rt.startedSpecs()
	if last := specs[len(specs)-1]; last.ID != "app-1" || !slices.Contains(last.Mounts, want) {
		t.Errorf("restarted %s with mounts %+v, want app-1 with %+v", last.ID, last.Mounts, want)
	}
	deletePod(t, second, 0)
	if h := rt.history(); !slices.Contains(h, "unmount-image "+img) {
		t.Errorf("runtime history %q: the restarted agent did not release the image volume", h)
	}
}
