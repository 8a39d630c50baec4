package cell_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
)

// TestAgentImageVolume: an image volume through real containerd, pulled
// from the loopback registry with the pod's credentials: a busybox
// container sees the hello image's root filesystem (two layers: an
// overlay view) at /img, its bin/ directory through a subPath at /tools,
// and the busybox image's (one layer: a bind of it) at /bb, all read-only
// though the mounts ask for none; once DeletePod
// returned nothing of the view is mounted, and the cell's namespace could
// be removed (a view left behind would keep it: "namespace must be
// empty").
func TestAgentImageVolume(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.51")
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "imgvol", Namespace: "default", UID: "uid-imgvol"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{
				{Name: "hello", VolumeSource: corev1.VolumeSource{
					Image: &corev1.ImageVolumeSource{Reference: e.img.Hello.Ref, PullPolicy: corev1.PullAlways}}},
				{Name: "bb", VolumeSource: corev1.VolumeSource{
					Image: &corev1.ImageVolumeSource{Reference: e.img.Busybox.Ref, PullPolicy: corev1.PullIfNotPresent}}},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: e.img.Busybox.Ref,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "hello", MountPath: "/img"},
					{Name: "hello", MountPath: "/tools", SubPath: "bin"},
					{Name: "bb", MountPath: "/bb"},
				},
			}},
		},
	}
	e.applyPod(t, a, p, nil)
	watch(t, a, "app running", func(s *corev1.PodStatus) bool { return containerStatus(s, "app").State.Running != nil })
	run := func(script string) (string, int32) {
		t.Helper()
		out, errOut, code := execute(t, a, &api.ExecStart{Container: "app", Command: []string{"sh", "-c", script}, Stdout: true, Stderr: true})
		return out + errOut, code
	}
	// The hello image is busybox plus its program at /app.
	if out, code := run("test -x /img/app && test -x /tools/busybox && grep '^root:' /img/etc/passwd && test -x /bb/bin/busybox && test ! -e /bb/app"); code != 0 {
		t.Errorf("the images' files at /img, /tools and /bb: %q (exit %d)", out, code)
	}
	for _, path := range []string{"/img/written", "/tools/written", "/img/app", "/bb/written", "/bb/bin/busybox"} {
		if out, code := run("echo x > " + path); code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("writing %s: %q (exit %d), want a read-only file system", path, out, code)
		}
	}
	stateDir := filepath.Join(e.d.Dir, a.cellID)
	if got := mountsUnder(t, stateDir); len(got) == 0 {
		t.Errorf("no mount under the agent's state directory %s: where is the image?", stateDir)
	}

	if err := a.client.DeletePod(t.Context(), -1); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if got := mountsUnder(t, stateDir); len(got) > 0 {
		t.Errorf("still mounted after DeletePod: %v", got)
	}
}

// mountsUnder lists this process's mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			out = append(out, f[1])
		}
	}
	return out
}
