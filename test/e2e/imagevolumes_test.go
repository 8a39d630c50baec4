//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestImageVolume: image volumes, as the conformance test "ImageVolume
// should succeed with pod and pull policy of Always" and the node e2e
// tests check them. A pod mounts the hello image (pull policy Always) at
// /img and its bin/ directory through a subPath at /tools: the container
// reads the image's files there and cannot write; the pull's events are
// the pod's (no field path). A pod whose image volume names an image the
// registry does not have waits, its container ImagePullBackOff, with the
// kubelet's events: Failed "Failed to pull image" on the pod, BackOff,
// and the container's "Error: ErrImagePull" or "Error: ImagePullBackOff".
func TestImageVolume(t *testing.T) {
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	withImage := func(ref string, mounts ...corev1.VolumeMount) corev1.PodSpec {
		c := sleeper()
		c.VolumeMounts = mounts
		spec := onKip(c)
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: corev1.PullAlways}}}}
		return spec
	}
	absent := cells.Registry.Ref("kip-e2e/absent-volume", "v1")
	createPod(t, ns, "imgvol", withImage(cells.Images.Hello.Ref,
		corev1.VolumeMount{Name: "data", MountPath: "/img"},
		corev1.VolumeMount{Name: "data", MountPath: "/tools", SubPath: "bin"}))
	createPod(t, ns, "imgvol-absent", withImage(absent, corev1.VolumeMount{Name: "data", MountPath: "/img"}))

	f.WaitForPods(t, ns, "app=imgvol", 1, 90*time.Second, "Running", running)
	// The hello image is busybox and the hello program at /app.
	out, code := kubectl(t, "exec", "-n", ns, "imgvol", "--", "sh", "-c",
		"test -x /img/app && test -x /tools/busybox && grep -c '^root:' /img/etc/passwd")
	if code != 0 || out != "1\n" {
		t.Errorf("the image's files at /img and /tools: %q (exit %d)", out, code)
	}
	for _, path := range []string{"/img/app", "/img/new", "/tools/new"} {
		out, code := kubectl(t, "exec", "-n", ns, "imgvol", "--", "sh", "-c", "echo x > "+path)
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("writing %s: %q (exit %d), want a read-only file system", path, out, code)
		}
	}
	events := func(pod string) string {
		out, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+pod,
			"-o", "custom-columns=REASON:.reason,PATH:.involvedObject.fieldPath,MESSAGE:.message", "--no-headers")
		return out
	}
	// On the pod, no field path: "<none>" in the PATH column.
	f.WaitFor(t, 20*time.Second, "the volume image's Pulling and Pulled events on the pod", func(context.Context) (bool, error) {
		out := events("imgvol")
		return hasEvent(out, "Pulling", "<none>", cells.Images.Hello.Ref) && hasEvent(out, "Pulled", "<none>", cells.Images.Hello.Ref), nil
	})

	got := f.WaitForPods(t, ns, "app=imgvol-absent", 1, 60*time.Second, "ImagePullBackOff", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "ImagePullBackOff" {
				return true
			}
		}
		return false
	})[0]
	if msg := got.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, absent) {
		t.Errorf("waiting message %q does not name the image", msg)
	}
	if got.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", got.Status.Phase)
	}
	f.WaitFor(t, 30*time.Second, "the failed pull's events", func(context.Context) (bool, error) {
		out := events("imgvol-absent")
		return hasEvent(out, "Failed", "<none>", "Failed to pull image \""+absent+"\"") &&
			hasEvent(out, "BackOff", "<none>", "Back-off pulling image \""+absent+"\"") &&
			hasEvent(out, "Failed", "spec.containers{main}", "Error: ImagePullBackOff"), nil
	})
}

// hasEvent reports whether the custom-columns lines (REASON PATH MESSAGE)
// of kubectl get events hold one of reason at path whose message holds
// msg.
func hasEvent(lines, reason, path, msg string) bool {
	for _, line := range strings.Split(lines, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 2 && fields[0] == reason && fields[1] == path && strings.Contains(line, msg) {
			return true
		}
	}
	return false
}
